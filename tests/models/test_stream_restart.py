"""A streamed answer that is abandoned and asked again is marked for the run's
``model_delta`` subscribers (``handle.events()``): a delta with ``restart: True``, a
``note`` and no text, after which the answer starts anew (counterpoint.models.call).

Regression: ``ask --stream``'s sink was told, but a subscriber saw the cut-off text and
then the retry's, concatenated ("Hello there Hello in full."), as if the model had
said both. A scripted OpenAI-compatible server on 127.0.0.1 cuts the stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.models import Model, ScriptedModel
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.policy import Backoff
from counterpoint.testing import OpenAIServer, Reply

FAST = Backoff(initial=0.01, factor=2.0, maximum=0.05, jitter=0.0)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def _served(server: OpenAIServer, **options: Any) -> Model:
    return Model(OpenAIProvider("fake-gpt", "gpt-test", base_url=server.base_url),
                 **{"retries": 2, "backoff": FAST, "timeout": 5.0, "cache": False, **options})


async def _deltas(model: Model, **generate: Any) -> tuple[str, list[dict[str, Any]]]:
    """The answer of one streamed call made by a node, and the ``model_delta`` data a
    subscriber of the run saw."""
    g = cp.Graph("stream")

    async def ask(ctx: cp.NodeContext) -> str:
        return (await model.generate("Say hello", stream=True, ctx=ctx, **generate)).text

    g.add("ask", ask)
    handle = await cp.start(g, store="memory")
    seen = [ev.data or {} async for ev in handle.events() if ev.kind is EventKind.MODEL_DELTA]
    result = await handle.result()
    return str(result.outputs["ask"]), seen


def _after_last_restart(deltas: list[dict[str, Any]]) -> str:
    """What a subscriber that clears its text at each restart shows."""
    text = ""
    for delta in deltas:
        text = "" if delta.get("restart") else text + delta["text"]
    return text


async def test_a_cut_off_stream_asked_again_is_marked_for_subscribers(
        server: OpenAIServer) -> None:
    server.script(Reply.truncated_stream("Hello there friend", chunks=2),
                  Reply.text("Hello in full."))
    answer, deltas = await _deltas(_served(server))
    assert answer == "Hello in full."
    restarts = [d for d in deltas if d.get("restart")]
    assert len(restarts) == 1 and restarts[0]["text"] == ""
    assert "cut off" in restarts[0]["note"] and "attempt 2 of 3" in restarts[0]["note"]
    before = deltas[:deltas.index(restarts[0])]
    assert before and "".join(d["text"] for d in before) != answer  # the abandoned part
    assert _after_last_restart(deltas) == answer


async def test_no_restart_is_sent_when_nothing_had_streamed(server: OpenAIServer) -> None:
    server.script(Reply.status(503), Reply.text("Hello."))
    answer, deltas = await _deltas(_served(server))
    assert answer == "Hello." and not any(d.get("restart") for d in deltas)
    assert "".join(d["text"] for d in deltas) == answer


async def test_the_next_model_of_the_chain_after_a_cut_stream_is_marked(
        server: OpenAIServer) -> None:
    server.script(Reply.truncated_stream("Hello there friend", chunks=2))
    model = _served(server, retries=0, fallbacks=[ScriptedModel(["Hi from the spare."],
                                                                name="spare")])
    answer, deltas = await _deltas(model)
    assert answer == "Hi from the spare."
    restarts = [d for d in deltas if d.get("restart")]
    assert len(restarts) == 1 and "next model of the chain" in restarts[0]["note"]
    assert _after_last_restart(deltas) == answer


class City(pydantic.BaseModel):
    name: str


async def test_an_answer_asked_again_for_its_schema_is_marked() -> None:
    scripted = ScriptedModel(["Paris, I think", json.dumps({"name": "Paris"})], name="city")
    answer, deltas = await _deltas(Model(scripted, cache=False), output=City)
    assert json.loads(answer) == {"name": "Paris"}
    restarts = [d for d in deltas if d.get("restart")]
    assert len(restarts) == 1 and "did not match the output schema" in restarts[0]["note"]
    assert _after_last_restart(deltas) == answer
