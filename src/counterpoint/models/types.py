"""One representation of a model call, whatever the provider.

Messages, tool definitions, tool calls, structured-output requests, usage and
responses. Adapters translate these to and from their provider's wire format;
nothing outside an adapter sees a provider's own types. They are frozen pydantic
models because they cross edges: they are hashed for the response cache and
stored in the run log.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Frozen):
    """A model's request to call one tool."""

    id: str
    """The provider's call id (made up by adapters whose provider has none)."""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    unreadable: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The arguments as the model wrote them when they are not a JSON object (then
    ``arguments`` is empty): the call is answered with that error and the model asked
    again, as for a call of an unknown tool, instead of failing the whole answer."""


class Message(_Frozen):
    """One message of a conversation."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    """Calls the assistant asked for (``role="assistant"`` only)."""
    tool_call_id: str | None = None
    """The call this message answers (``role="tool"`` only)."""
    name: str | None = None
    """The tool's name (``role="tool"``) or a participant's name."""

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: tuple[ToolCall, ...] = ()) -> Message:
        return cls(role="assistant", content=content, tool_calls=tool_calls)

    @classmethod
    def tool(cls, call: ToolCall, content: str) -> Message:
        """The result of ``call``, to send back to the model."""
        return cls(role="tool", content=content, tool_call_id=call.id, name=call.name)


class ToolSpec(_Frozen):
    """A tool the model may call: a name, what it does, and its arguments' JSON schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}})


ToolChoice = Literal["auto", "required", "none"] | str
"""``auto`` (the model decides), ``required`` (at least one call), ``none``, or a tool name."""


class OutputSpec(_Frozen):
    """Structured output: the answer must be JSON matching ``schema``."""

    name: str
    schema_: dict[str, Any] = Field(alias="schema")

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Request(_Frozen):
    """Everything one call sends. Messages come first and in a stable order (see ``prompt``)."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = "auto"
    output: OutputSpec | None = None
    temperature: float = 0.0
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    session: str | None = None
    """A per-run session id for providers that route a session to one replica.
    Not part of the cache key."""

    def cache_key(self, model: str) -> str:
        """SHA-256 over the model and everything that shapes the answer."""
        body = self.model_dump(mode="json", by_alias=True, exclude={"session"})
        return hashlib.sha256(orjson.dumps([model, body], option=orjson.OPT_SORT_KEYS)
                              ).hexdigest()


class Usage(_Frozen):
    """Tokens used by one call or a sum of calls, and their cost when prices are known."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    """Input tokens served from the provider's prompt cache (a subset of ``input_tokens``)."""
    cost: float | None = None
    """US dollars; ``None`` when the model has no configured price."""
    calls: int = 0
    """Model calls summed into this usage (1 for a single call)."""
    estimated: bool = False
    """Counted by counterpoint, not reported by the provider (a stream without usage):
    output tokens are the streamed chunks, input tokens characters / 4."""

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost is None and other.cost is None else \
            (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(input_tokens=self.input_tokens + other.input_tokens,
                     output_tokens=self.output_tokens + other.output_tokens,
                     cached_tokens=self.cached_tokens + other.cached_tokens,
                     cost=cost, calls=self.calls + other.calls,
                     estimated=self.estimated or other.estimated)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


FinishReason = Literal["stop", "length", "tool_calls", "refusal", "error"]


class Response(_Frozen):
    """One answer from a model."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason = "stop"
    usage: Usage = Usage()
    model: str = ""
    """The model id the provider reports having used."""
    refusal: str | None = None

    def message(self) -> Message:
        """This answer as an assistant message, to continue the conversation."""
        return Message.assistant(self.text, self.tool_calls)
