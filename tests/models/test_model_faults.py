"""Provider faults end in the documented behaviour, and the run log keeps everything.

A scripted OpenAI-compatible server on 127.0.0.1 answers with 429 + Retry-After,
500, 503, a hang past the timeout, a cut-off stream, malformed JSON, a refusal and
a 400. Retryable faults are retried (then fall back, if a fallback is given);
the others fail the node at once with an error naming the model and the cause.
Every attempt is a ``model_call`` event in the SQLite log, read back from a
fresh connection after the run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.models import Model, ScriptedModel
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.policy import Backoff
from counterpoint.store import SQLiteStore
from counterpoint.testing import OpenAIServer, Reply

FAST = Backoff(initial=0.01, factor=2.0, maximum=0.05, jitter=0.0)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def _model(server: OpenAIServer, **kwargs: Any) -> Model:
    options: dict[str, Any] = {"retries": 2, "backoff": FAST, "timeout": 5.0, "cache": False}
    options.update(kwargs)
    return Model(OpenAIProvider("fake-gpt", "gpt-test", base_url=server.base_url), **options)


async def _run_one(model: Model, tmp_path: Path, *, stream: bool = False,
                   ) -> tuple[cp.RunResult, list[dict[str, Any]]]:
    g = cp.Graph("faults")

    async def ask() -> str:
        return (await model.generate("Say hi", max_tokens=16, stream=stream)).text

    async def unrelated() -> str:
        return "still here"

    g.add("ask", ask)
    g.add("other", unrelated)
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    try:
        result = await cp.run(g, store=store)
    finally:
        store.close()
    reread = SQLiteStore(db)  # what a crash would leave: only what reached the disk
    try:
        events = reread.events(result.run_id)
        for e in events:
            if e.kind is EventKind.MODEL_CALL and e.data and e.data.get("request"):
                assert reread.blob(e.data["request"]) is not None, "request blob lost"
    finally:
        reread.close()
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[-1].kind is EventKind.RUN_FINISHED
    calls = [e.data for e in events if e.kind is EventKind.MODEL_CALL and e.data]
    return result, calls


async def test_429_is_retried_after_the_time_the_server_asked_for(
        server: OpenAIServer, tmp_path: Path) -> None:
    server.script(Reply.status(429, headers={"Retry-After": "0.3"}), Reply.text("hello"))
    started = time.monotonic()
    result, calls = await _run_one(_model(server), tmp_path)
    assert result.ok and result.outputs["ask"] == "hello"
    assert time.monotonic() - started >= 0.3
    assert [c.get("status") for c in calls] == [429, None]
    assert calls[0]["error_type"] == "RateLimited" and calls[0]["retry_in"] >= 0.3
    assert result.usage.failed == 1 and result.usage.calls == 1


@pytest.mark.parametrize("status", [500, 503])
async def test_server_errors_are_retried(server: OpenAIServer, tmp_path: Path,
                                         status: int) -> None:
    server.script(Reply.status(status), Reply.text("recovered"))
    result, calls = await _run_one(_model(server), tmp_path)
    assert result.outputs["ask"] == "recovered"
    assert calls[0]["status"] == status and calls[0]["retryable"]


async def test_a_hang_past_the_timeout_is_retried(server: OpenAIServer,
                                                  tmp_path: Path) -> None:
    server.script(Reply.hang(5.0), Reply.text("answered"))
    result, calls = await _run_one(_model(server, timeout=0.3), tmp_path)
    assert result.outputs["ask"] == "answered"
    assert calls[0]["error_type"] == "ModelUnavailable"
    assert "timeout" in calls[0]["error"] and "fake-gpt" in calls[0]["error"]


async def test_a_cut_off_stream_is_retried(server: OpenAIServer, tmp_path: Path) -> None:
    server.script(Reply.truncated_stream("Hello the", chunks=2), Reply.text("Hello there"))
    result, calls = await _run_one(_model(server), tmp_path, stream=True)
    assert result.outputs["ask"] == "Hello there"
    assert calls[0]["error_type"] == "ModelUnavailable"
    assert "cut off" in calls[0]["error"] or "ended before" in calls[0]["error"]


async def test_malformed_json_is_retried(server: OpenAIServer, tmp_path: Path) -> None:
    server.script(Reply.malformed(), Reply.text("fine"))
    result, calls = await _run_one(_model(server), tmp_path)
    assert result.outputs["ask"] == "fine"
    assert calls[0]["error_type"] == "MalformedResponse"


async def test_a_refusal_fails_the_node_at_once_and_the_rest_goes_on(
        server: OpenAIServer, tmp_path: Path) -> None:
    server.script(Reply.refusal("I can't help with that."))
    result, calls = await _run_one(_model(server), tmp_path)
    assert result.nodes["ask"].status is cp.NodeStatus.FAILED
    assert result.outputs["other"] == "still here"
    error = result.nodes["ask"].error
    assert error is not None and "fake-gpt refused" in error["message"]
    assert [c["error_type"] for c in calls] == ["ModelRefused"]
    assert server.pending == 0


async def test_a_bad_request_is_not_retried(server: OpenAIServer, tmp_path: Path) -> None:
    server.script(Reply.status(400, {"error": {"message": "max_tokens is too large"}}))
    result, calls = await _run_one(_model(server), tmp_path)
    error = result.nodes["ask"].error
    assert error is not None and "max_tokens is too large" in error["message"]
    assert "HTTP 400" in error["message"] and "fake-gpt" in error["message"]
    assert len(calls) == 1 and not calls[0]["retryable"]


async def test_exhausted_retries_fall_back_to_the_next_model(server: OpenAIServer,
                                                             tmp_path: Path) -> None:
    server.script(*[Reply.status(503)] * 3)
    backup = ScriptedModel(["from the backup"], name="backup")
    result, calls = await _run_one(_model(server, fallbacks=[backup]), tmp_path)
    assert result.outputs["ask"] == "from the backup"
    assert [c["model"] for c in calls] == ["fake-gpt"] * 3 + ["backup"]
    backup.verify()


async def test_exhausted_retries_without_fallback_fail_with_the_cause(
        server: OpenAIServer, tmp_path: Path) -> None:
    server.script(*[Reply.status(503)] * 3)
    result, calls = await _run_one(_model(server), tmp_path)
    error = result.nodes["ask"].error
    assert error is not None
    assert "fake-gpt" in error["message"] and "HTTP 503" in error["message"]
    assert len(calls) == 3 and all(c["status"] == 503 for c in calls)
    assert result.outputs["other"] == "still here"


async def test_an_unreachable_server_is_a_connection_error(tmp_path: Path) -> None:
    with OpenAIServer() as gone:
        url = gone.base_url
    model = Model(OpenAIProvider("nowhere", "m", base_url=url), retries=1, backoff=FAST,
                  cache=False)
    with pytest.raises(cp.ModelUnavailable, match="nowhere: cannot connect") as caught:
        await model.generate("hi")
    # it says where it tried and what to do
    assert f"cannot connect to {url}" in str(caught.value)
    assert "fix the model's base_url" in str(caught.value)


async def test_a_password_in_the_base_url_is_not_shown() -> None:
    with OpenAIServer() as gone:
        url = gone.base_url.replace("http://", "http://me:hunter2-pass@")
    model = Model(OpenAIProvider("nowhere", "m", base_url=url), retries=1, backoff=FAST,
                  cache=False)
    with pytest.raises(cp.ModelUnavailable, match="cannot connect to http://\\*\\*\\*@127") \
            as caught:
        await model.generate("hi")
    assert "hunter2" not in str(caught.value)


class _Sink:
    """A stream sink that wants to know when its text so far is abandoned."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, piece: str) -> None:
        self.seen.append(piece)

    def restart(self, note: str) -> None:
        self.seen.append(f"<restart: {note}>")


async def test_a_sink_is_told_when_a_cut_stream_is_asked_again(server: OpenAIServer) -> None:
    server.script(Reply.truncated_stream("Hello there friend", chunks=2),
                  Reply.text("Hello in full."))
    sink = _Sink()
    answer = await _model(server).generate("hi", stream=sink)
    assert answer.text == "Hello in full."
    restarts = [p for p in sink.seen if p.startswith("<restart")]
    assert len(restarts) == 1 and "cut off" in restarts[0] and "attempt 2 of" in restarts[0]
    # what came before the note is abandoned; what follows it is the whole answer
    after = sink.seen[sink.seen.index(restarts[0]) + 1:]
    assert "".join(after) == "Hello in full."


async def test_a_plain_callable_sink_still_gets_only_text(server: OpenAIServer) -> None:
    server.script(Reply.truncated_stream("Hello there friend", chunks=2), Reply.text("ok"))
    seen: list[str] = []
    await _model(server).generate("hi", stream=seen.append)
    assert "".join(seen).endswith("ok") and not any("restart" in p for p in seen)
