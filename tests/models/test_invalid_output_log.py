"""Structured output that never validates: the re-asks are bounded, the log says which
invalid answer was re-asked and which one ended the call, and the error names the type.

A real `OpenAIServer` on 127.0.0.1 answers three invalid objects in a row.
"""

from __future__ import annotations

from pydantic import BaseModel

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.models import Model
from counterpoint.models.openai_compat import PROFILES, OpenAIProvider
from counterpoint.testing import OpenAIServer, Reply


class Capital(BaseModel):
    country: str
    capital: str


async def test_the_last_invalid_answer_is_logged_as_given_up_and_the_error_names_the_type(
        ) -> None:
    replies = [Reply.json({"country": "France"}), Reply.text("not json"),
               Reply.json({"country": "France", "capital": 3})]
    with OpenAIServer(replies) as server:
        model = Model(OpenAIProvider("fake-gpt", "gpt-test", base_url=server.base_url,
                                     capabilities=PROFILES["openai"]), cache=False, retries=0)

        async def ask() -> str:
            return (await model.generate("Capital of France?", output=Capital)).text

        g = cp.Graph("schema")
        g.add("ask", ask)
        store = cp.MemoryStore()
        result = await cp.run(g, store=store)
        assert len(server.requests) == 3 and server.pending == 0
    error = result.nodes["ask"].error
    assert error is not None and error["type"] == "InvalidOutput"
    assert "output schema (Capital) after 3 attempt(s)" in error["message"]
    assert "capital: Input should be a valid string" in error["message"]
    calls = [e.data for e in store.events(result.run_id)
             if e.kind is EventKind.MODEL_CALL and e.data]
    answered = [c for c in calls if "invalid_output" not in c]
    invalid = [c for c in calls if "invalid_output" in c]
    assert len(answered) == 3  # one model_call per answer the server gave
    assert [c.get("re_ask") for c in invalid] == [1, 2, None]
    assert [c.get("gave_up", False) for c in invalid] == [False, False, True]
