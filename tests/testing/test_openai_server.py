"""counterpoint.testing.OpenAIServer, driven by the official openai SDK (and raw HTTP)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

import counterpoint.testing as cpt
from counterpoint.testing import OpenAIServer, RecordedRequest, Reply, TokenBucket, Usage

MESSAGES: list[Any] = [{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": "Say hello"}]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as the_server:
        yield the_server


def client(server: OpenAIServer, timeout: float = 5.0) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0,
                              timeout=timeout)


async def ask(server: OpenAIServer, *, client_timeout: float = 5.0, **kwargs: Any) -> Any:
    async with client(server, client_timeout) as c:
        return await c.chat.completions.create(model="gpt-test", messages=MESSAGES, **kwargs)


async def ask_stream(server: OpenAIServer, **kwargs: Any) -> list[Any]:
    async with client(server) as c:
        stream = await c.chat.completions.create(model="gpt-test", messages=MESSAGES,
                                                 stream=True, **kwargs)
        return [chunk async for chunk in stream]


def test_public_api_is_pinned() -> None:
    assert sorted(cpt.__all__) == ["ManualClock", "OpenAIServer", "RecordedRequest", "Reply",
                                   "SimulatedEngine", "TokenBucket", "ToolCall", "Usage"]


def test_text_reply_is_a_realistic_completion_and_the_request_is_recorded(
        server: OpenAIServer) -> None:
    server.script(Reply.text("Hello there!", usage=Usage(prompt_tokens=12, completion_tokens=3,
                                                         cached_tokens=8)))
    result = asyncio.run(ask(server, temperature=0))
    assert result.object == "chat.completion" and result.id.startswith("chatcmpl-")
    assert result.model == "gpt-test"
    (choice,) = result.choices
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content == "Hello there!"
    assert choice.message.refusal is None and choice.message.tool_calls is None
    assert result.usage is not None
    assert (result.usage.prompt_tokens, result.usage.completion_tokens,
            result.usage.total_tokens) == (12, 3, 15)
    assert result.usage.prompt_tokens_details is not None
    assert result.usage.prompt_tokens_details.cached_tokens == 8
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.body == {"model": "gpt-test", "messages": MESSAGES, "temperature": 0}
    assert request.headers["authorization"] == "Bearer x"
    assert request.last_user_text == "Say hello"
    assert server.pending == 0 and server.unscripted == []


def test_usage_is_estimated_when_not_given(server: OpenAIServer) -> None:
    server.script(Reply.json({"city": "Paris", "days": 3}))
    result = asyncio.run(ask(server))
    assert json.loads(result.choices[0].message.content) == {"city": "Paris", "days": 3}
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0


def test_streamed_text_with_include_usage(server: OpenAIServer) -> None:
    server.script(Reply.text("one two three four", usage=Usage(prompt_tokens=5,
                                                               completion_tokens=4)))
    chunks = asyncio.run(ask_stream(server, stream_options={"include_usage": True}))
    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    with_choices = [chunk for chunk in chunks if chunk.choices]
    assert with_choices[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in with_choices) == "one two three four"
    assert len(with_choices) > 3  # really sent in pieces
    assert [c.choices[0].finish_reason for c in with_choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 9
    assert all(chunk.usage is None for chunk in chunks[:-1])
    assert server.requests[0].stream and server.requests[0].include_usage


def test_streamed_text_without_include_usage_sends_no_usage(server: OpenAIServer) -> None:
    server.script(Reply.text("hi there"))
    chunks = asyncio.run(ask_stream(server))
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(chunk.usage is None for chunk in chunks)


CALLS = [("get_weather", {"city": "Paris", "unit": "celsius"}), ("get_time", "{}")]
EXPECTED_CALLS = [("get_weather", {"city": "Paris", "unit": "celsius"}), ("get_time", {})]


def test_tool_calls(server: OpenAIServer) -> None:
    server.script(Reply.tool_calls(CALLS))
    result = asyncio.run(ask(server, tools=[{"type": "function", "function": {
        "name": "get_weather", "parameters": {"type": "object"}}}]))
    (choice,) = result.choices
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == EXPECTED_CALLS
    assert all(c.type == "function" for c in calls)
    assert len({c.id for c in calls}) == 2
    assert server.requests[0].body["tools"][0]["function"]["name"] == "get_weather"


def test_streamed_tool_calls_use_the_incremental_index_format(server: OpenAIServer) -> None:
    server.script(Reply.tool_calls(CALLS))
    chunks = asyncio.run(ask_stream(server))
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for delta in chunk.choices[0].delta.tool_calls or []:
            call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            if delta.id:
                assert not call["id"], "the id is sent once, in the call's first delta"
                call["id"] = delta.id
            if delta.function and delta.function.name:
                call["name"] += delta.function.name
            if delta.function and delta.function.arguments:
                call["arguments"] += delta.function.arguments
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == EXPECTED_CALLS
    assert all(c["id"] for c in calls.values())
    argument_deltas = [d for chunk in chunks for d in chunk.choices[0].delta.tool_calls or []
                       if d.function and d.function.arguments]
    assert len(argument_deltas) > 2  # the arguments arrive in fragments
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_refusal(server: OpenAIServer) -> None:
    server.script(Reply.refusal("I can't help with that."), Reply.refusal("No."))
    message = asyncio.run(ask(server)).choices[0]
    assert message.finish_reason == "stop"
    assert message.message.content is None
    assert message.message.refusal == "I can't help with that."
    chunks = asyncio.run(ask_stream(server))
    assert "".join(c.choices[0].delta.refusal or "" for c in chunks) == "No."
    assert chunks[-1].choices[0].finish_reason == "stop"


@pytest.mark.parametrize(("code", "error"), [
    (400, openai.BadRequestError), (401, openai.AuthenticationError),
    (429, openai.RateLimitError), (500, openai.InternalServerError),
    (503, openai.InternalServerError)])
def test_status_replies_raise_the_sdk_errors(server: OpenAIServer, code: int,
                                             error: type[openai.APIStatusError]) -> None:
    server.script(Reply.status(code))
    with pytest.raises(error) as caught:
        asyncio.run(ask(server))
    assert caught.value.status_code == code
    assert isinstance(caught.value.body, dict) and caught.value.body.get("message")
    expected_retry_after = "1" if code in (429, 503) else None
    assert caught.value.response.headers.get("retry-after") == expected_retry_after


def test_status_reply_with_custom_body_and_headers(server: OpenAIServer) -> None:
    server.script(Reply.status(429, {"error": {"message": "slow down", "type": "tokens",
                                               "code": "rate_limit_exceeded"}},
                               headers={"Retry-After": "7", "X-Extra": "yes"}),
                  Reply.status(429, headers={}))
    with pytest.raises(openai.RateLimitError) as caught:
        asyncio.run(ask(server))
    assert caught.value.message.endswith("slow down")
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.response.headers["x-extra"] == "yes"
    with pytest.raises(openai.RateLimitError) as caught:
        asyncio.run(ask(server))
    assert "retry-after" not in caught.value.response.headers


def test_sdk_retries_honour_retry_after(server: OpenAIServer) -> None:
    server.script(Reply.status(503, headers={"retry-after-ms": "10"}), Reply.text("recovered"))

    async def scenario() -> Any:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="x",
                                      max_retries=1) as c:
            return await c.chat.completions.create(model="m", messages=MESSAGES)

    assert asyncio.run(scenario()).choices[0].message.content == "recovered"
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]


def test_hang_times_out_the_client_and_the_server_carries_on(server: OpenAIServer) -> None:
    server.script(Reply.hang(30), Reply.text("after the hang"))
    with pytest.raises(openai.APITimeoutError):
        asyncio.run(ask(server, client_timeout=0.3))
    assert asyncio.run(ask(server)).choices[0].message.content == "after the hang"


def test_delayed_reply_times_out_a_short_client_timeout(server: OpenAIServer) -> None:
    server.script(Reply.text("late").after(2), Reply.text("on time").after(0.01))
    with pytest.raises(openai.APITimeoutError):
        asyncio.run(ask(server, client_timeout=0.2))
    assert asyncio.run(ask(server)).choices[0].message.content == "on time"


def test_truncated_stream_raises_after_the_first_pieces(server: OpenAIServer) -> None:
    server.script(Reply.truncated_stream("alpha beta gamma delta epsilon", chunks=2))
    received: list[str] = []

    async def scenario() -> None:
        async with client(server) as c:
            stream = await c.chat.completions.create(model="m", messages=MESSAGES, stream=True)
            async for chunk in stream:
                received.append(chunk.choices[0].delta.content or "")

    with pytest.raises(openai.APIConnectionError):
        asyncio.run(scenario())
    assert "".join(received) == "alpha beta "


def test_cleanly_truncated_stream_ends_without_a_finish_reason(server: OpenAIServer) -> None:
    server.script(Reply.truncated_stream("alpha beta gamma", chunks=1, abort=False))
    chunks = asyncio.run(ask_stream(server))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "alpha "
    assert all(c.choices[0].finish_reason is None for c in chunks)


def test_truncated_plain_response_raises(server: OpenAIServer) -> None:
    server.script(Reply.truncated_stream("alpha beta"))
    with pytest.raises(openai.APIConnectionError):
        asyncio.run(ask(server))


def test_malformed_body_raises(server: OpenAIServer) -> None:
    server.script(Reply.malformed(), Reply.malformed())
    with pytest.raises(ValueError):  # the SDK lets json.JSONDecodeError through
        asyncio.run(ask(server))
    with pytest.raises(ValueError):
        asyncio.run(ask_stream(server))


def test_unscripted_request_is_a_500_and_is_recorded(server: OpenAIServer) -> None:
    with pytest.raises(openai.InternalServerError, match="unscripted request"):
        asyncio.run(ask(server))
    (request,) = server.unscripted
    assert request.body["model"] == "gpt-test"


def test_default_reply_answers_once_the_script_is_used_up() -> None:
    with OpenAIServer([Reply.text("scripted")], default=Reply.echo()) as server:
        first = asyncio.run(ask(server)).choices[0].message.content
        second = asyncio.run(ask(server)).choices[0].message.content
    assert (first, second) == ("scripted", "echo: Say hello")
    assert server.unscripted == []


def test_dynamic_reply_sees_the_request(server: OpenAIServer) -> None:
    def respond(request: RecordedRequest) -> Reply:
        return Reply.text(f"you asked {request.model} with {len(request.body['messages'])}")

    server.script(Reply.dynamic(respond))
    assert asyncio.run(ask(server)).choices[0].message.content == "you asked gpt-test with 2"


def test_invalid_json_body_is_a_400_and_keeps_the_script(server: OpenAIServer) -> None:
    server.script(Reply.text("kept"))
    request = urllib.request.Request(f"{server.base_url}/chat/completions", data=b"{nope",
                                     headers={"content-type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    caught.value.close()
    assert caught.value.code == 400
    assert server.pending == 1 and server.requests[0].raw == b"{nope"


def test_raw_http_streaming_is_sse_ending_with_done(server: OpenAIServer) -> None:
    server.script(Reply.text("a b"))
    body = json.dumps({"model": "m", "messages": MESSAGES, "stream": True}).encode()
    request = urllib.request.Request(f"{server.base_url}/chat/completions", data=body,
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        text = response.read().decode()
    events = [e for e in text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"


def test_models_endpoint() -> None:
    async def scenario(server: OpenAIServer) -> list[str]:
        async with client(server) as c:
            return [model.id async for model in c.models.list()]

    with OpenAIServer(models=["gpt-a", "gpt-b"]) as server:
        assert asyncio.run(scenario(server)) == ["gpt-a", "gpt-b"]


def test_sync_client_and_keep_alive(server: OpenAIServer) -> None:
    server.script(*(Reply.text(f"answer {i}") for i in range(5)))
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as c:
        answers = [c.chat.completions.create(model="m", messages=MESSAGES)
                   .choices[0].message.content for _ in range(5)]
    assert answers == [f"answer {i}" for i in range(5)]


def test_latency_does_not_block_other_connections() -> None:
    async def scenario(server: OpenAIServer) -> list[str]:
        async with client(server) as c:
            results = await asyncio.gather(*(
                c.chat.completions.create(model="m", messages=MESSAGES) for _ in range(20)))
        return [r.choices[0].message.content for r in results]

    with OpenAIServer(default=Reply.text("ok"), latency=0.3) as server:
        assert asyncio.run(scenario(server)) == ["ok"] * 20
        assert server.peak_concurrency == 20


def test_rate_limit_answers_429_with_retry_after_and_counts_them() -> None:
    async def scenario(server: OpenAIServer) -> list[Any]:
        async with client(server) as c:
            async def one() -> Any:
                try:
                    return await c.chat.completions.create(model="m", messages=MESSAGES)
                except openai.RateLimitError as exc:
                    return exc
            first = await one()
            second = await one()
            assert isinstance(second, openai.RateLimitError)
            await asyncio.sleep(int(second.response.headers["retry-after-ms"]) / 1000 + 0.05)
            return [first, second, await one()]

    # 120 a minute = one every 0.5 s, so the second immediate request is always rejected.
    with OpenAIServer([Reply.text("scripted")], rate_limit_rpm=120, rate_limit_burst=1,
                      latency=0.01) as server:
        first, second, third = asyncio.run(scenario(server))
        assert first.choices[0].message.content == "scripted"
        headers = second.response.headers
        assert 0 < int(headers["retry-after-ms"]) <= 500
        assert float(headers["retry-after"]) == pytest.approx(
            int(headers["retry-after-ms"]) / 1000)
        assert headers["x-ratelimit-limit-requests"] == "120"
        assert second.code == "rate_limit_exceeded"
        assert third.choices[0].message.content == "echo: Say hello"  # the default in this mode
        assert server.rejected == 1
        assert len(server.requests) == 3


def test_token_bucket() -> None:
    bucket = TokenBucket(per_minute=60, burst=2)
    assert [bucket.take(0.0), bucket.take(0.0)] == [0.0, 0.0]
    assert bucket.take(0.25) == pytest.approx(0.75)
    assert bucket.take(1.0) == 0.0
    assert bucket.take(1.0) == pytest.approx(1.0)
    assert bucket.take(100.0) == 0.0 and bucket.remaining == 1  # refills only up to the burst


@pytest.mark.timeout(20)
def test_stop_cuts_a_hanging_request_and_returns() -> None:
    server = OpenAIServer([Reply.hang(60)]).start()
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            asyncio.run(ask(server, client_timeout=60))
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    while not server.requests:
        time.sleep(0.01)
    server.stop()
    caller.join(timeout=10)
    assert not caller.is_alive()
    assert isinstance(outcome[0], openai.APIConnectionError)
    server.stop()  # idempotent
    with pytest.raises(RuntimeError):
        server.start()
