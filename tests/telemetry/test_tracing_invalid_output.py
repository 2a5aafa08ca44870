"""Structured output that never validates, as span events: each invalid answer is a
``counterpoint.invalid_output`` event of its model call's parent, numbered by the re-ask
that follows it, and the last one says the call gave up (it said ``re_ask: 0``)."""

from __future__ import annotations

from pydantic import BaseModel

import counterpoint as cp
from counterpoint import telemetry
from counterpoint.models import Model
from counterpoint.models.openai_compat import PROFILES, OpenAIProvider
from counterpoint.testing import OpenAIServer, Reply
from counterpoint.testing.otlp import OTLPReceiver


class Capital(BaseModel):
    country: str
    capital: str


async def test_the_invalid_answers_say_which_was_re_asked_and_which_gave_up(
        receiver: OTLPReceiver, tracing: telemetry.Tracing) -> None:
    replies = [Reply.json({"country": "France"}), Reply.json({"capital": "Paris"})]
    with OpenAIServer(replies) as server:
        model = Model(OpenAIProvider("fake-gpt", "gpt-test", base_url=server.base_url,
                                     capabilities=PROFILES["openai"]),
                      cache=False, retries=0, output_retries=1)

        async def ask() -> str:
            return (await model.generate("Capital of France?", output=Capital)).text

        g = cp.Graph("schema")
        g.add("ask", ask)
        result = await cp.run(g, store="memory")
    assert result.status == "failed"
    tracing.force_flush()
    spans = receiver.wait_for(lambda spans: any(s.name == "run schema" for s in spans))
    events = [e.attributes for s in spans for e in s.events
              if e.name == "counterpoint.invalid_output"]
    assert len(events) == 2, events
    first, last = sorted(events, key=lambda e: "counterpoint.gave_up" in e)
    assert first["counterpoint.re_ask"] == 1 and "counterpoint.gave_up" not in first
    assert last["counterpoint.gave_up"] is True and "counterpoint.re_ask" not in last
    assert "capital" in first["counterpoint.problems"]
