"""One contract every provider adapter passes.

Subjects: the OpenAI-compatible adapter against a real llama-cpp-python server
running the embedded model on 127.0.0.1, the embedded in-process adapter, the
OpenAI-compatible adapter against the scripted OpenAI server, the Anthropic
adapter against the scripted Anthropic server, and the scripted model. Scripted
subjects are told what kind of answer the next call needs; real models answer
for themselves, so the assertions are about structure (a valid instance, a tool
name from the allowed set, usage counted), never wording.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest
from anthropic_fake import FakeAnthropic, tool_use
from anthropic_fake import Reply as AReply
from pydantic import BaseModel, Field

from counterpoint.models import Message, Model, Provider, ScriptedModel, ToolCall, ToolSpec
from counterpoint.models.anthropic import AnthropicProvider
from counterpoint.models.local import LocalProvider
from counterpoint.models.openai_compat import PROFILES, OpenAIProvider
from counterpoint.testing import OpenAIServer, Reply

WEATHER = ToolSpec(name="get_weather", description="Current weather for a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]})
TIME = ToolSpec(name="get_time", description="Current local time in a city.",
                parameters={"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]})
MAX_TOKENS = 48  # the embedded model decodes ~100 tokens/s on 2 cores


class Capital(BaseModel):
    country: str = Field(max_length=60)
    capital: str = Field(max_length=60)


@dataclass
class Subject:
    provider: Provider
    expect: Callable[[str], None]
    """Script the answer the next call needs: ``text``, ``capital`` or ``tools``."""


def _nothing(_kind: str) -> None:
    return None


def _openai_script(server: OpenAIServer) -> Callable[[str], None]:
    def expect(kind: str) -> None:
        if kind == "text":
            server.script(Reply.text("Hello there, traveller."))
        elif kind == "capital":
            server.script(Reply.json({"country": "France", "capital": "Paris"}))
        else:
            server.script(Reply.tool_calls([("get_weather", {"city": "Paris"})]))
    return expect


def _anthropic_script(fake: FakeAnthropic) -> Callable[[str], None]:
    def expect(kind: str) -> None:
        if kind == "text":
            fake.script(AReply.text("Hello there, traveller."))
        elif kind == "capital":
            fake.script(AReply.tools(tool_use("Capital", {"country": "France",
                                                          "capital": "Paris"})))
        else:
            fake.script(AReply.tools(tool_use("get_weather", {"city": "Paris"})))
    return expect


def _scripted_script(model: ScriptedModel) -> Callable[[str], None]:
    def expect(kind: str) -> None:
        if kind == "text":
            model.add("Hello there, traveller.")
        elif kind == "capital":
            model.add({"country": "France", "capital": "Paris"})
        else:
            model.add([ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})])
    return expect


SUBJECTS = ["llama-server", "embedded", "openai-scripted", "anthropic-scripted", "scripted"]


@pytest.fixture(params=SUBJECTS)
async def subject(request: pytest.FixtureRequest) -> AsyncIterator[Subject]:
    async with contextlib.AsyncExitStack() as stack:
        made = _subject(request, request.param, stack)
        stack.push_async_callback(made.provider.aclose)
        yield made


def _subject(request: pytest.FixtureRequest, kind: str,
             stack: contextlib.AsyncExitStack) -> Subject:
    if kind == "llama-server":
        base_url = request.getfixturevalue("llama_server")
        return Subject(OpenAIProvider("llama-server", "smollm2", base_url=base_url,
                                      capabilities=PROFILES["llama-cpp-python"]), _nothing)
    if kind == "embedded":
        return Subject(LocalProvider(), _nothing)
    if kind == "openai-scripted":
        server = stack.enter_context(OpenAIServer())
        stack.callback(_no_unscripted, server)
        return Subject(OpenAIProvider("openai-scripted", "gpt-test", base_url=server.base_url),
                       _openai_script(server))
    if kind == "anthropic-scripted":
        fake = stack.enter_context(FakeAnthropic())
        stack.callback(_all_used, fake)
        return Subject(AnthropicProvider("anthropic-scripted", "claude-test",
                                         base_url=fake.base_url, api_key="test"),
                       _anthropic_script(fake))
    scripted = ScriptedModel()
    stack.callback(scripted.verify)
    return Subject(scripted, _scripted_script(scripted))


def _no_unscripted(server: OpenAIServer) -> None:
    assert not server.unscripted, "the provider made a call nobody scripted"
    assert server.pending == 0, "a scripted reply was never asked for"


def _all_used(fake: FakeAnthropic) -> None:
    assert fake.pending == 0, "a scripted reply was never asked for"


async def test_chat_returns_text_and_usage(subject: Subject) -> None:
    subject.expect("text")
    result = await Model(subject.provider, cache=False).generate(
        "Say hello to a traveller in one short sentence.", max_tokens=MAX_TOKENS)
    assert result.text.strip()
    assert result.response.finish_reason in ("stop", "length")
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert result.usage.calls == 1


async def test_streamed_deltas_add_up_to_the_answer(subject: Subject) -> None:
    subject.expect("text")
    pieces: list[str] = []
    result = await Model(subject.provider, cache=False).generate(
        "Say hello to a traveller in one short sentence.", max_tokens=MAX_TOKENS,
        stream=pieces.append)
    assert len(pieces) >= 1
    assert "".join(pieces) == result.text
    assert result.usage.output_tokens > 0


async def test_structured_output_validates(subject: Subject) -> None:
    subject.expect("capital")
    result = await Model(subject.provider, cache=False, output_retries=0).generate(
        "What is the capital of France?", output=Capital, max_tokens=MAX_TOKENS)
    assert isinstance(result.output, Capital)
    assert result.output.capital.strip() and result.output.country.strip()


async def test_required_tool_call_names_an_allowed_tool(subject: Subject) -> None:
    subject.expect("tools")
    result = await Model(subject.provider, cache=False, output_retries=0).generate(
        "What is the weather in Paris right now?", tools=[WEATHER, TIME],
        tool_choice="required", max_tokens=MAX_TOKENS)
    assert result.tool_calls
    for call in result.tool_calls:
        assert call.name in {"get_weather", "get_time"}
        assert isinstance(call.arguments.get("city"), str)


async def test_named_tool_choice_calls_that_tool(subject: Subject) -> None:
    subject.expect("tools")
    result = await Model(subject.provider, cache=False, output_retries=0).generate(
        "Weather in Paris?", tools=[WEATHER, TIME], tool_choice="get_weather",
        max_tokens=MAX_TOKENS)
    assert [c.name for c in result.tool_calls][:1] == ["get_weather"]


async def test_a_tool_result_turn_is_accepted(subject: Subject) -> None:
    subject.expect("text")
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})
    conversation = [Message.user("What is the weather in Paris?"),
                    Message.assistant("", (call,)),
                    Message.tool(call, '{"sky": "clear", "celsius": 21}')]
    result = await Model(subject.provider, cache=False).generate(
        conversation, tools=[WEATHER], tool_choice="none", max_tokens=MAX_TOKENS)
    assert result.text.strip()


async def test_identity_is_a_stable_string_the_cache_can_key_by(subject: Subject) -> None:
    identity = subject.provider.identity
    assert isinstance(identity, str) and identity
    assert subject.provider.identity == identity
    assert subject.provider.name not in ("", identity)
