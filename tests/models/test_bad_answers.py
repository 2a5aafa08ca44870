"""Errors of a server that was reached but did not answer properly say what it did: an
HTTP 200 with an error body quotes the server's message (not the SDK object's repr), and
an answer cut off mid-body is not called a server to start."""

from __future__ import annotations

import pytest

from counterpoint.errors import MalformedResponse, ModelUnavailable
from counterpoint.models import Model
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.testing import OpenAIServer, Reply


async def test_an_error_body_with_status_200_quotes_the_servers_message() -> None:
    with OpenAIServer([Reply.status(200, {"error": {"message": "model overloaded"}})]) as srv:
        model = Model(OpenAIProvider("m", "m", base_url=srv.base_url), retries=0,
                      cache=False)
        with pytest.raises(MalformedResponse) as failed:
            await model.generate("hi", max_tokens=8)
    said = str(failed.value)
    assert said.startswith("model m: the server answered HTTP 200 with an error instead "
                           "of an answer: model overloaded")
    assert "ChatCompletion(" not in said


async def test_an_answer_cut_off_mid_body_is_not_called_a_server_to_start() -> None:
    """The server was reached and closed the socket mid-answer: the error said "cannot
    connect ...; start the server, or fix the model's base_url"."""
    with OpenAIServer([Reply.truncated_stream("Tokyo is the capital", chunks=2)]) as srv:
        model = Model(OpenAIProvider("m", "m", base_url=srv.base_url), retries=0,
                      cache=False)
        with pytest.raises(ModelUnavailable) as failed:
            await model.generate("hi", max_tokens=8)
    said = str(failed.value)
    assert said.startswith(f"model m: the server at {srv.base_url}")
    assert "closed the connection before its answer was complete" in said
    assert "start the server" not in said and "cannot connect" not in said
