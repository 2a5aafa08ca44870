"""A server that accepts a call and then goes quiet: before answering, or mid-stream.

The model's ``timeout`` bounds one attempt (the whole of it, not each read); the
error that ends the call names the model, the server, the time limit, how much of a
stream had come, what to set, and how many attempts were made. A real
`OpenAIServer` on 127.0.0.1 does the hanging.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from counterpoint.errors import ModelUnavailable
from counterpoint.models import Model
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.policy import Backoff
from counterpoint.testing import OpenAIServer, Reply

FAST = Backoff(initial=0.01, factor=2.0, maximum=0.05, jitter=0.0)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def _model(server: OpenAIServer, *, retries: int = 1) -> Model:
    return Model(OpenAIProvider("fake-gpt", "gpt-test", base_url=server.base_url),
                 retries=retries, backoff=FAST, timeout=0.3, cache=False)


async def test_a_server_that_never_answers_is_named_with_the_limit_and_what_to_set(
        server: OpenAIServer) -> None:
    server.script(Reply.hang(30), Reply.hang(30))
    with pytest.raises(ModelUnavailable) as caught:
        await _model(server).generate("Say hi", max_tokens=16)
    message = str(caught.value)
    assert "model fake-gpt" in message and server.base_url in message
    assert "within 0.3s (the timeout of one attempt)" in message
    assert "Model(timeout=...)" in message and "counterpoint.toml" in message
    assert "gave up after 2 attempt(s) (the model's retries=1)" in message
    assert len(server.requests) == 2


async def test_a_stream_that_stalls_mid_answer_says_how_much_had_come_and_is_retried(
        server: OpenAIServer) -> None:
    server.script(Reply.truncated_stream("Hello there friend", chunks=2, stall=30),
                  Reply.text("Hello there"))
    seen: list[str] = []
    answer = await _model(server).generate("Say hi", max_tokens=16, stream=seen.append)
    assert answer.text == "Hello there"
    server.script(Reply.truncated_stream("Hello there friend", chunks=2, stall=30))
    with pytest.raises(ModelUnavailable) as caught:
        await _model(server, retries=0).generate("Say hi", max_tokens=16, stream=seen.append)
    message = str(caught.value)
    assert f"the answer from {server.base_url}" in message
    assert "stalled after 12 characters" in message and "within 0.3s" in message
    assert "gave up after 1 attempt(s) (the model's retries=0)" in message


async def test_an_error_that_is_not_retried_does_not_claim_attempts(
        server: OpenAIServer) -> None:
    server.script(Reply.status(400))
    with pytest.raises(Exception) as caught:
        await _model(server).generate("Say hi", max_tokens=16)
    assert "gave up" not in str(caught.value)
