"""What a scripted OpenAI server answers: `Reply` kinds, and the JSON they render to.

A `Reply` is immutable data; the functions here turn one into the bodies the
OpenAI Chat Completions API would send (`completion`, `stream_chunks`,
`error_body`). They are pure: ids and timestamps come in as arguments, so the
same reply and request always render to the same JSON. The HTTP side (framing,
delays, cutting a connection) lives in `openai_server`.

Token counts are estimates (about four characters a token) unless a reply
carries an explicit `Usage`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

__all__ = [
    "DynamicReply", "HangReply", "MalformedReply", "RecordedRequest", "RefusalReply", "Reply",
    "StatusReply", "TextReply", "ToolCall", "ToolCallsReply", "TruncatedReply", "Usage",
    "completion", "error_body", "estimate_prompt_tokens", "split_text", "stream_chunks",
]

JSONObject: TypeAlias = dict[str, Any]
FinishReason: TypeAlias = Literal["stop", "tool_calls"]


@dataclass(frozen=True, kw_only=True)
class RecordedRequest:
    """One HTTP request as the server received it."""

    method: str
    """``GET`` or ``POST``."""
    path: str
    """The request target without its query string, e.g. ``/v1/chat/completions``."""
    headers: Mapping[str, str]
    """Header names lower-cased; a repeated header keeps its last value."""
    body: JSONObject
    """The parsed JSON body; ``{}`` when there was none or it was not a JSON object."""
    raw: bytes = b""
    """The body exactly as received."""
    at: float = 0.0
    """``time.monotonic()`` when the request was fully read."""

    @property
    def stream(self) -> bool:
        """Whether the client asked for a streamed (SSE) answer."""
        return self.body.get("stream") is True

    @property
    def include_usage(self) -> bool:
        """Whether a streamed answer must end with a usage chunk."""
        options = self.body.get("stream_options")
        return isinstance(options, dict) and options.get("include_usage") is True

    @property
    def model(self) -> str:
        """The requested model, echoed back in the answer (``gpt-4o-mini`` if absent)."""
        model = self.body.get("model")
        return model if isinstance(model, str) else "gpt-4o-mini"

    @property
    def last_user_text(self) -> str:
        """The text of the last ``user`` message (text parts joined), or ``""``."""
        messages = self.body.get("messages")
        if not isinstance(messages, list):
            return ""
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return _text_of(message.get("content"))
        return ""


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Token usage reported with an answer."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    """Reported as ``usage.prompt_tokens_details.cached_tokens``."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> JSONObject:
        return {"prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.total_tokens,
                "prompt_tokens_details": {"cached_tokens": self.cached_tokens, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                              "accepted_prediction_tokens": 0,
                                              "rejected_prediction_tokens": 0}}


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One function call the assistant asks for."""

    name: str
    arguments: str
    """The arguments as JSON text, exactly as sent (it need not be valid JSON)."""
    id: str | None = None
    """The call id; ``None`` gives ``call_<completion>_<index>``."""


@dataclass(frozen=True, kw_only=True)
class Reply:
    """An answer to one chat completion request. Build one with the static constructors.

    Every kind can be delayed with `after`. Kinds that describe a message (`text`,
    `json`, `tool_calls`, `refusal`) are sent as SSE chunks when the request has
    ``"stream": true`` and as one JSON body otherwise.
    """

    delay: float = 0.0
    """Seconds to wait (without blocking other connections) before answering."""

    def after(self, seconds: float) -> Reply:
        """The same reply, sent ``seconds`` later (delays add up)."""
        return replace(self, delay=self.delay + seconds)

    @staticmethod
    def text(content: str, *, usage: Usage | None = None) -> TextReply:
        """A normal assistant message (``finish_reason`` ``"stop"``)."""
        return TextReply(content=content, usage=usage)

    @staticmethod
    def json(value: Any, *, usage: Usage | None = None) -> TextReply:
        """`text` with ``json.dumps(value)`` as the content."""
        return TextReply(content=json.dumps(value), usage=usage)

    @staticmethod
    def tool_calls(calls: Sequence[tuple[str, str | Mapping[str, Any]] | ToolCall], *,
                   usage: Usage | None = None) -> ToolCallsReply:
        """Function calls (``finish_reason`` ``"tool_calls"``, content ``null``).

        Each call is a `ToolCall` or ``(name, arguments)``, where arguments are JSON text
        or a mapping that is serialised with ``json.dumps``.
        """
        built = tuple(call if isinstance(call, ToolCall)
                      else ToolCall(name=call[0], arguments=call[1] if isinstance(call[1], str)
                                    else json.dumps(dict(call[1])))
                      for call in calls)
        return ToolCallsReply(calls=built, usage=usage)

    @staticmethod
    def refusal(text: str, *, usage: Usage | None = None) -> RefusalReply:
        """The model declines: ``message.refusal`` set, content ``null``, finish ``"stop"``."""
        return RefusalReply(reason=text, usage=usage)

    @staticmethod
    def status(code: int, body: Any = None,
               headers: Mapping[str, str] | None = None) -> StatusReply:
        """An HTTP error (or any status) instead of a completion.

        ``body`` is sent as-is if it is ``str``/``bytes``, JSON-encoded otherwise; ``None``
        gives an OpenAI-style ``{"error": {...}}`` for the code. ``headers=None`` sends
        ``Retry-After: 1`` for 429 and 503 and nothing extra otherwise; pass ``{}`` for none.
        """
        if headers is None:
            headers = {"retry-after": "1"} if code in (429, 503) else {}
        if body is None:
            raw = json.dumps(error_body(code)).encode()
        elif isinstance(body, bytes):
            raw = body
        elif isinstance(body, str):
            raw = body.encode()
        else:
            raw = json.dumps(body).encode()
        return StatusReply(code=code, body=raw,
                           headers=tuple((k.lower(), v) for k, v in headers.items()))

    @staticmethod
    def hang(seconds: float) -> HangReply:
        """Read the request, then send nothing for ``seconds`` and close the connection.

        The wait ends early if the client gives up and closes its side.
        """
        return HangReply(seconds=seconds)

    @staticmethod
    def truncated_stream(content: str, *, chunks: int = 2, abort: bool = True,
                         stall: float = 0.0) -> TruncatedReply:
        """Start answering ``content``, then stop after ``chunks`` content pieces.

        With ``abort`` (the default) the connection is closed mid-body: a streamed answer
        ends without its terminating chunk, a plain one short of its ``Content-Length``, so
        the client sees a protocol error. With ``abort=False`` a streamed answer is framed
        correctly but never sends a ``finish_reason`` nor ``[DONE]``. With ``stall``, a
        streamed answer first sends nothing more for that many seconds, as a server stuck
        mid-answer does (the wait ends early if the client gives up and closes its side).
        """
        return TruncatedReply(content=content, chunks=chunks, abort=abort, stall=stall)

    @staticmethod
    def malformed() -> MalformedReply:
        """A 200 whose body is not valid JSON (an SSE event with broken JSON when streaming)."""
        return MalformedReply()

    @staticmethod
    def dynamic(respond: Callable[[RecordedRequest], Reply]) -> DynamicReply:
        """Decide the answer from the request. ``respond`` runs on the server's thread."""
        return DynamicReply(respond=respond)

    @staticmethod
    def echo() -> DynamicReply:
        """`text` repeating the last user message (``"echo: "`` prefixed)."""
        return DynamicReply(respond=lambda request: TextReply(
            content=f"echo: {request.last_user_text}"))


@dataclass(frozen=True, kw_only=True)
class TextReply(Reply):
    """See `Reply.text`."""

    content: str
    usage: Usage | None = None


@dataclass(frozen=True, kw_only=True)
class ToolCallsReply(Reply):
    """See `Reply.tool_calls`."""

    calls: tuple[ToolCall, ...]
    usage: Usage | None = None


@dataclass(frozen=True, kw_only=True)
class RefusalReply(Reply):
    """See `Reply.refusal`."""

    reason: str
    """The refusal message."""
    usage: Usage | None = None


@dataclass(frozen=True, kw_only=True)
class StatusReply(Reply):
    """See `Reply.status`."""

    code: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class HangReply(Reply):
    """See `Reply.hang`."""

    seconds: float


@dataclass(frozen=True, kw_only=True)
class TruncatedReply(Reply):
    """See `Reply.truncated_stream`."""

    content: str
    chunks: int = 2
    abort: bool = True
    stall: float = 0.0


@dataclass(frozen=True, kw_only=True)
class MalformedReply(Reply):
    """See `Reply.malformed`."""

    body: bytes = b'{"id": "chatcmpl-broken", "choices": [{"message": '


@dataclass(frozen=True, kw_only=True)
class DynamicReply(Reply):
    """See `Reply.dynamic`."""

    respond: Callable[[RecordedRequest], Reply]


MessageReply: TypeAlias = TextReply | ToolCallsReply | RefusalReply | TruncatedReply

_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "The request was invalid (scripted 400)."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided (scripted)."),
    403: ("invalid_request_error", "unsupported_country_region_territory",
          "Forbidden (scripted 403)."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist (scripted)."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests (scripted)."),
    500: ("server_error", None, "The server had an error processing your request (scripted)."),
    503: ("server_error", None, "The engine is currently overloaded (scripted)."),
}


def error_body(code: int, message: str | None = None, *, kind: str | None = None,
               error_code: str | None = None) -> JSONObject:
    """An OpenAI-style error object for an HTTP status (defaults chosen per status)."""
    default_kind, default_code, default_message = _ERRORS.get(
        code, ("server_error" if code >= 500 else "invalid_request_error", None,
               f"Scripted HTTP {code}."))
    return {"error": {"message": message or default_message, "type": kind or default_kind,
                      "param": None, "code": error_code or default_code}}


def split_text(text: str) -> list[str]:
    """Stream pieces of ``text``: one word with its trailing whitespace each (never empty)."""
    return re.findall(r"\s*\S+\s*", text) or [text]


def estimate_tokens(text: str) -> int:
    """About four characters a token, at least one for non-empty text."""
    return (len(text) + 3) // 4


def estimate_prompt_tokens(body: Mapping[str, Any]) -> int:
    """A rough prompt size: message texts plus a few tokens of overhead per message."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    return sum(4 + estimate_tokens(_text_of(m.get("content")))
               for m in messages if isinstance(m, dict))


def completion(reply: MessageReply, request: RecordedRequest, *, completion_id: str,
               created: int) -> JSONObject:
    """The ``chat.completion`` object for a non-streamed answer."""
    message: JSONObject = {"role": "assistant", "content": None, "refusal": None,
                           "annotations": []}
    finish: FinishReason = "stop"
    match reply:
        case TextReply() | TruncatedReply():
            message["content"] = reply.content
        case RefusalReply():
            message["refusal"] = reply.reason
        case ToolCallsReply():
            message["tool_calls"] = [
                {"id": _call_id(call, completion_id, i), "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments}}
                for i, call in enumerate(reply.calls)]
            finish = "tool_calls"
    return {"id": completion_id, "object": "chat.completion", "created": created,
            "model": request.model, "system_fingerprint": "fp_counterpoint",
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish}],
            "usage": _usage(reply, request).to_json(), "service_tier": "default"}


def stream_chunks(reply: MessageReply, request: RecordedRequest, *, completion_id: str,
                  created: int) -> list[JSONObject]:
    """The ``chat.completion.chunk`` objects of a streamed answer, in order, without ``[DONE]``.

    The first chunk carries the role, then one chunk per piece (content, refusal, or
    each tool call's name and then its argument pieces, with OpenAI's ``index``), then
    one with ``finish_reason`` and an empty delta, then, if the request set
    ``stream_options.include_usage``, one with no choices and the usage. A
    `TruncatedReply` gives the role chunk and its first ``chunks`` pieces only.
    """
    with_usage = request.include_usage

    def chunk(delta: JSONObject, finish: FinishReason | None = None) -> JSONObject:
        out: JSONObject = {"id": completion_id, "object": "chat.completion.chunk",
                           "created": created, "model": request.model,
                           "system_fingerprint": "fp_counterpoint", "service_tier": "default",
                           "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                        "finish_reason": finish}]}
        if with_usage:
            out["usage"] = None
        return out

    chunks: list[JSONObject] = []
    finish: FinishReason = "stop"
    match reply:
        case TextReply() | TruncatedReply():
            chunks.append(chunk({"role": "assistant", "content": "", "refusal": None}))
            chunks.extend(chunk({"content": piece}) for piece in split_text(reply.content))
        case RefusalReply():
            chunks.append(chunk({"role": "assistant", "content": None, "refusal": ""}))
            chunks.extend(chunk({"refusal": piece}) for piece in split_text(reply.reason))
        case ToolCallsReply():
            chunks.append(chunk({"role": "assistant", "content": None, "refusal": None}))
            for i, call in enumerate(reply.calls):
                chunks.append(chunk({"tool_calls": [
                    {"index": i, "id": _call_id(call, completion_id, i), "type": "function",
                     "function": {"name": call.name, "arguments": ""}}]}))
                chunks.extend(chunk({"tool_calls": [
                    {"index": i, "function": {"arguments": piece}}]})
                    for piece in _split_arguments(call.arguments))
            finish = "tool_calls"
    if isinstance(reply, TruncatedReply):
        return chunks[:1 + reply.chunks]
    chunks.append(chunk({}, finish))
    if with_usage:
        chunks.append({"id": completion_id, "object": "chat.completion.chunk",
                       "created": created, "model": request.model,
                       "system_fingerprint": "fp_counterpoint", "service_tier": "default",
                       "choices": [], "usage": _usage(reply, request).to_json()})
    return chunks


def _usage(reply: MessageReply, request: RecordedRequest) -> Usage:
    explicit = reply.usage if not isinstance(reply, TruncatedReply) else None
    if explicit is not None:
        return explicit
    if isinstance(reply, RefusalReply):
        out = reply.reason
    elif isinstance(reply, ToolCallsReply):
        out = "".join(call.name + call.arguments for call in reply.calls)
    else:
        out = reply.content
    return Usage(prompt_tokens=estimate_prompt_tokens(request.body),
                 completion_tokens=estimate_tokens(out))


def _call_id(call: ToolCall, completion_id: str, index: int) -> str:
    return call.id if call.id is not None else f"call_{completion_id.split('-')[-1]}_{index}"


def _split_arguments(arguments: str, size: int = 8) -> list[str]:
    # OpenAI streams arguments in small fragments that are not valid JSON on their own.
    return [arguments[i:i + size] for i in range(0, len(arguments), size)] or [""]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content
                       if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""
