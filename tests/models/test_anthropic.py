"""AnthropicProvider driven through the official SDK against a fake Messages API."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest
from anthropic_fake import FakeAnthropic, Reply, tool_use
from support import free_port

from counterpoint.errors import (
    ContextTooLong,
    MalformedResponse,
    ModelError,
    ModelRefused,
    ModelRejected,
    ModelUnavailable,
    RateLimited,
)
from counterpoint.models import Message, Model, OutputSpec, Request, Response, ToolCall, ToolSpec
from counterpoint.models.anthropic import AnthropicProvider
from counterpoint.policy import Backoff

WEATHER = ToolSpec(name="get_weather", description="Current weather in a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]})
CITY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "name": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["name", "population"]}


class City(pydantic.BaseModel):
    name: str
    population: int


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


def provider(base_url: str, name: str = "anthropic:claude-test") -> AnthropicProvider:
    return AnthropicProvider(name, "claude-test", base_url=base_url, api_key="sk-test",
                             timeout=5.0)


def ask(base_url: str, request: Request, *, stream: bool = False,
        time_limit: float | None = None,
        pieces: list[str] | None = None) -> tuple[Response, list[str]]:
    """One ``complete`` call; returns the response and the streamed pieces."""
    pieces = [] if pieces is None else pieces

    async def go() -> Response:
        the_provider = provider(base_url)
        try:
            return await the_provider.complete(
                request, on_text=pieces.append if stream else None, time_limit=time_limit)
        finally:
            await the_provider.aclose()

    return asyncio.run(go()), pieces


def fails(base_url: str, request: Request, *, stream: bool = False,
          time_limit: float | None = None, pieces: list[str] | None = None) -> ModelError:
    with pytest.raises(ModelError) as info:
        ask(base_url, request, stream=stream, time_limit=time_limit, pieces=pieces)
    return info.value


def user(text: str = "hi", **kwargs: Any) -> Request:
    return Request(messages=(Message.user(text),), **kwargs)


# ----------------------------------------------------------------------- requests and answers
@pytest.mark.parametrize("stream", [False, True])
def test_text_answer_and_usage(fake: FakeAnthropic, stream: bool) -> None:
    fake.script(Reply.text("Hello there!", input_tokens=10, output_tokens=3,
                           cache_creation_input_tokens=20, cache_read_input_tokens=100))
    response, pieces = ask(fake.base_url, user(), stream=stream)
    assert response.text == "Hello there!"
    assert response.finish_reason == "stop" and response.tool_calls == ()
    assert response.model == "claude-test"
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens, usage.calls) == \
        (130, 3, 100, 1)
    (request,) = fake.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert "anthropic-version" in request.headers
    expected: dict[str, Any] = {"model": "claude-test", "max_tokens": 1024,
                                "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        expected["stream"] = True
        assert "".join(pieces) == "Hello there!" and len(pieces) > 1
    else:
        assert pieces == []
    assert request.body == expected


def test_system_messages_go_to_the_top_level_system_parameter(fake: FakeAnthropic) -> None:
    fake.script(Reply.text("Bonjour."))
    request = Request(messages=(Message.system("Be brief."), Message.system("Use French."),
                                Message.user("Greet me.")),
                      max_tokens=50, stop=("END",), temperature=0.5)
    ask(fake.base_url, request)
    (body,) = fake.bodies
    assert body["system"] == [{"type": "text", "text": "Be brief.\n\nUse French.",
                               "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [{"role": "user", "content": "Greet me."}]
    assert (body["max_tokens"], body["stop_sequences"]) == (50, ["END"])
    assert "temperature" not in body  # the Messages API has no sampling parameters


@pytest.mark.parametrize(("choice", "expected"), [
    ("auto", {"type": "auto"}), ("required", {"type": "any"}), ("none", {"type": "none"}),
    ("get_weather", {"type": "tool", "name": "get_weather"})])
def test_tool_definitions_and_tool_choice(fake: FakeAnthropic, choice: str,
                                          expected: dict[str, Any]) -> None:
    fake.script(Reply.text("ok"))
    ask(fake.base_url, user("Weather?", tools=(WEATHER,), tool_choice=choice))
    (body,) = fake.bodies
    assert body["tools"] == [{"name": "get_weather", "description": "Current weather in a city.",
                              "input_schema": WEATHER.parameters}]
    assert body["tool_choice"] == expected


@pytest.mark.parametrize("stream", [False, True])
def test_tool_use_answer_becomes_tool_calls(fake: FakeAnthropic, stream: bool) -> None:
    fake.script(dataclasses.replace(Reply.tools(
        tool_use("get_weather", {"city": "Paris", "unit": "C"}, id="toolu_1"),
        tool_use("get_weather", {"city": "Rome"}, id="toolu_2"),
        text="Let me look that up."), chunk=3))
    response, pieces = ask(fake.base_url, user("Weather?", tools=(WEATHER,)), stream=stream)
    assert response.text == "Let me look that up."
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == (
        ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Paris", "unit": "C"}),
        ToolCall(id="toolu_2", name="get_weather", arguments={"city": "Rome"}))
    if stream:  # text deltas only: tool arguments are not text
        assert "".join(pieces) == "Let me look that up." and len(pieces) > 1


def test_multi_turn_tool_use_alternates_roles(fake: FakeAnthropic) -> None:
    fake.script(Reply.text("Sunny in both."))
    paris = ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Paris"})
    rome = ToolCall(id="toolu_2", name="get_weather", arguments={"city": "Rome"})
    request = Request(messages=(
        Message.system("You are a weather bot."), Message.user("Paris and Rome?"),
        Message.assistant("Checking.", (paris, rome)),
        Message.tool(paris, "18C sunny"), Message.tool(rome, "24C sunny"),
        Message.user("Summarize."),
        Message.assistant("", (paris,)), Message.tool(paris, "19C")), tools=(WEATHER,))
    ask(fake.base_url, request)
    (body,) = fake.bodies
    assert body["messages"] == [
        {"role": "user", "content": "Paris and Rome?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
             "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_2", "name": "get_weather",
             "input": {"city": "Rome"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C sunny"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "24C sunny"},
            {"type": "text", "text": "Summarize."}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
             "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "19C"}]}]
    roles = [m["role"] for m in body["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles))
    assert body["system"][0]["text"] == "You are a weather bot."


def test_consecutive_turns_are_merged_and_empty_assistant_turns_dropped(
        fake: FakeAnthropic) -> None:
    fake.script(Reply.text("ok"))
    ask(fake.base_url, Request(messages=(Message.user("a"), Message.assistant(""),
                                         Message.user("b"))))
    (body,) = fake.bodies
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                             {"type": "text", "text": "b"}]}]


def test_a_tool_result_without_a_call_id_is_rejected_before_sending(
        fake: FakeAnthropic) -> None:
    request = Request(messages=(Message.user("a"), Message(role="tool", content="18C")))
    error = fails(fake.base_url, request)
    assert isinstance(error, ModelRejected) and not error.retryable
    assert fake.requests == []


@pytest.mark.parametrize("stream", [False, True])
def test_structured_output_is_a_forced_tool_whose_input_is_the_text(
        fake: FakeAnthropic, stream: bool) -> None:
    answer = {"name": "Paris", "population": 2100000}
    fake.script(Reply.tools(tool_use("City", answer)))
    output = OutputSpec(name="City", schema=CITY_SCHEMA)
    response, pieces = ask(fake.base_url, user("Capital of France?", output=output),
                           stream=stream)
    assert json.loads(response.text) == answer
    assert response.tool_calls == () and response.finish_reason == "stop"
    if stream:  # the answer's JSON is streamed as the text
        assert "".join(pieces) == response.text
    (body,) = fake.bodies
    assert body["tools"] == [{"name": "City", "description": body["tools"][0]["description"],
                              "input_schema": CITY_SCHEMA}]
    assert body["tool_choice"] == {"type": "tool", "name": "City"}


def test_structured_output_alongside_tools_lets_the_model_pick_a_tool(
        fake: FakeAnthropic) -> None:
    fake.script(Reply.tools(tool_use("get_weather", {"city": "Paris"})))
    output = OutputSpec(name="City", schema=CITY_SCHEMA)
    response, _ = ask(fake.base_url, user("?", tools=(WEATHER,), output=output))
    assert [c.name for c in response.tool_calls] == ["get_weather"]
    (body,) = fake.bodies
    assert [t["name"] for t in body["tools"]] == ["get_weather", "City"]
    assert body["tool_choice"] == {"type": "any"}


# ------------------------------------------------------------------------------------ errors
def test_429_is_rate_limited_with_retry_after(fake: FakeAnthropic) -> None:
    fake.script(Reply.rate_limited("7"))
    error = fails(fake.base_url, user())
    assert isinstance(error, RateLimited)
    assert error.retryable and error.retry_after == 7.0 and error.status == 429
    assert error.model == "anthropic:claude-test"
    assert "rate limit" in str(error)


@pytest.mark.parametrize("stream", [False, True])
def test_529_overloaded_is_rate_limited_and_retryable(fake: FakeAnthropic,
                                                      stream: bool) -> None:
    fake.script(Reply.overloaded())
    error = fails(fake.base_url, user(), stream=stream)
    assert isinstance(error, RateLimited) and error.retryable and error.status == 529


def test_an_error_event_inside_a_stream_is_classified_by_its_type(fake: FakeAnthropic) -> None:
    fake.script(Reply.error_event("overloaded_error"), Reply.error_event("invalid_request_error",
                                                                         "bad tool schema"))
    error = fails(fake.base_url, user(), stream=True)
    assert isinstance(error, RateLimited) and error.retryable and error.status == 529
    error = fails(fake.base_url, user(), stream=True)
    assert isinstance(error, ModelRejected) and not error.retryable
    assert "bad tool schema" in str(error)


def test_400_is_rejected_and_not_retryable(fake: FakeAnthropic) -> None:
    fake.script(Reply.error(400, "messages.0.content: Field required"))
    error = fails(fake.base_url, user())
    assert type(error) is ModelRejected and not error.retryable and error.status == 400
    assert "messages.0.content: Field required" in str(error)


def test_401_advises_checking_the_api_key_variable(fake: FakeAnthropic) -> None:
    fake.script(Reply.error(401, "invalid x-api-key"))
    error = fails(fake.base_url, user())
    assert isinstance(error, ModelRejected) and not error.retryable and error.status == 401
    assert "check the API key variable" in str(error)


def test_a_prompt_too_long_is_context_too_long(fake: FakeAnthropic) -> None:
    fake.script(Reply.error(400, "prompt is too long: 210000 tokens > 200000 maximum"))
    assert isinstance(fails(fake.base_url, user()), ContextTooLong)


@pytest.mark.parametrize("abort", [True, False], ids=["connection-dropped", "body-ended"])
def test_a_truncated_stream_is_unavailable(fake: FakeAnthropic, abort: bool) -> None:
    fake.script(Reply.truncated("This answer never finishes.", after=5, abort=abort))
    pieces: list[str] = []
    error = fails(fake.base_url, user(), stream=True, pieces=pieces)
    assert isinstance(error, ModelUnavailable) and error.retryable
    assert "stream ended before the answer was complete" in str(error)
    assert "".join(pieces) == "This ans"  # start, ping, block start, two deltas, cut


def test_a_refusal_raises_model_refused(fake: FakeAnthropic) -> None:
    fake.script(Reply.text("I can't help with that.", stop_reason="refusal"),
                Reply.text("I can't help with that.", stop_reason="refusal"))
    for stream in (False, True):
        error = fails(fake.base_url, user(), stream=stream)
        assert isinstance(error, ModelRefused) and not error.retryable
        assert "I can't help with that." in str(error)


def test_an_unparseable_answer_is_malformed(fake: FakeAnthropic) -> None:
    fake.script(Reply.malformed())
    error = fails(fake.base_url, user())
    assert isinstance(error, MalformedResponse) and error.retryable


@pytest.mark.parametrize("event", [
    b'event: message_start\ndata: {"type": "message_start", "message": {"content": [\n\n',
    b'event: content_block_start\ndata: {"type": "content_block_start", "index": 0}\n\n'],
    ids=["broken-json", "missing-field"])
def test_an_unreadable_stream_event_is_malformed(fake: FakeAnthropic, event: bytes) -> None:
    fake.script(Reply.malformed(event))
    error = fails(fake.base_url, user(), stream=True)
    assert isinstance(error, MalformedResponse) and error.retryable


def test_a_slow_answer_times_out(fake: FakeAnthropic) -> None:
    fake.script(dataclasses.replace(Reply.text("late"), delay=1.0))
    error = fails(fake.base_url, user(), time_limit=0.3)
    assert isinstance(error, ModelUnavailable) and error.retryable
    assert "timeout" in str(error)


def test_connection_refused_is_unavailable() -> None:
    error = fails(f"http://127.0.0.1:{free_port()}", user())
    assert isinstance(error, ModelUnavailable) and error.retryable
    assert "cannot connect" in str(error)


def test_check_lists_models(fake: FakeAnthropic) -> None:
    async def check(base_url: str) -> str | None:
        the_provider = provider(base_url)
        try:
            return await the_provider.check()
        finally:
            await the_provider.aclose()

    assert asyncio.run(check(fake.base_url)) is None
    assert [(r.method, r.path.split("?")[0]) for r in fake.requests] == [("GET", "/v1/models")]
    fake.models_reply = Reply.error(401, "invalid x-api-key")
    reason = asyncio.run(check(fake.base_url))
    assert reason is not None and "401" in reason and "\n" not in reason
    reason = asyncio.run(check(f"http://127.0.0.1:{free_port()}"))
    assert reason is not None and reason.startswith("cannot connect")


# ------------------------------------------------------------------------------ the facade
@pytest.mark.parametrize("stream", [False, True])
def test_the_facade_validates_structured_output_and_retries_a_429(fake: FakeAnthropic,
                                                                  stream: bool) -> None:
    fake.script(Reply.rate_limited("0.05"),
                Reply.tools(tool_use("City", {"name": "Paris", "population": 2100000})))
    pieces: list[str] = []

    async def go() -> Any:
        the_provider = provider(fake.base_url, name="anthropic:facade-test")
        try:
            model = Model(the_provider, retries=1,
                          backoff=Backoff(initial=0.01, factor=1.0, jitter=0.0))
            return await model.generate("Capital of France?", output=City,
                                        stream=pieces.append if stream else False)
        finally:
            await the_provider.aclose()

    generation = asyncio.run(go())
    assert generation.output == City(name="Paris", population=2100000)
    assert "".join(pieces) == (generation.text if stream else "")
    assert generation.calls == 2 and generation.tool_calls == ()
    assert generation.usage.calls == 1  # failed attempts carry no usage
    assert fake.pending == 0
    first, second = fake.bodies
    assert first == second and first.get("stream", False) is stream
    assert second["tool_choice"] == {"type": "tool", "name": "City"}
    assert second["messages"] == [{"role": "user", "content": "Capital of France?"}]
