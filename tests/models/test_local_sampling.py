"""What the embedded model is asked to decode with: a repeat penalty on free text (the
135M model otherwise loops until the token limit), none under an output schema, a
cache identity that tells answers decoded with and without it apart, and how many
threads decode."""

from __future__ import annotations

import os

import pytest

from counterpoint.errors import ConfigError
from counterpoint.models import Message, Request
from counterpoint.models.local import FREE_TEXT_REPEAT_PENALTY, LocalProvider, default_threads
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


def test_decoding_leaves_one_cpu_free_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    # with every CPU decoding, one other busy process slowed a plan 4.4 x on 2 cores
    # (python -m benchmarks.local_threads)
    monkeypatch.delenv("COUNTERPOINT_LOCAL_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    assert default_threads() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(16)))
    assert default_threads() == 4
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    assert default_threads() == 1
    monkeypatch.setenv("COUNTERPOINT_LOCAL_THREADS", "3")
    assert default_threads() == 3 == LocalProvider()._threads


@pytest.mark.parametrize("given", ["0", "two", "-1", "1.5"])
def test_a_thread_count_that_is_not_one_or_more_is_a_clear_error(
        given: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COUNTERPOINT_LOCAL_THREADS", given)
    with pytest.raises(ConfigError, match=f"COUNTERPOINT_LOCAL_THREADS='{given}': give a "
                                          "whole number of decoding threads"):
        default_threads()
