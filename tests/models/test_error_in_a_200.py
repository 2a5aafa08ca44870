"""A server that answers HTTP 200 with an error body instead of a completion: the error
names the server's message, not the SDK object's repr."""

from __future__ import annotations

import pytest

from counterpoint.errors import MalformedResponse
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
