"""What the embedded model is asked to decode with: a repeat penalty on free text (the
135M model otherwise loops until the token limit), none under an output schema, and a
cache identity that tells answers decoded with and without it apart."""

from __future__ import annotations

from counterpoint.models import Message, Request
from counterpoint.models.local import FREE_TEXT_REPEAT_PENALTY, LocalProvider
from counterpoint.models.types import OutputSpec

ASK = (Message(role="user", content="Give two tips."),)
SCHEMA = OutputSpec(name="Tips", schema={"type": "object",
                                         "properties": {"tips": {"type": "array"}}})


def test_free_text_is_decoded_with_a_repeat_penalty() -> None:
    body = LocalProvider()._body(Request(messages=ASK, max_tokens=50))
    assert body["repeat_penalty"] == FREE_TEXT_REPEAT_PENALTY > 1.0
    assert "response_format" not in body


def test_an_answer_under_a_schema_is_decoded_without_one() -> None:
    body = LocalProvider()._body(Request(messages=ASK, output=SCHEMA, max_tokens=50))
    assert "repeat_penalty" not in body
    assert body["response_format"]["schema"] == SCHEMA.schema_


def test_the_cache_identity_names_the_penalty() -> None:
    # answers cached before the penalty (identity "local:PATH") are not replayed
    identity = LocalProvider().identity
    assert identity.startswith("local:")
    assert identity.endswith(f"|repeat_penalty={FREE_TEXT_REPEAT_PENALTY:g}")
