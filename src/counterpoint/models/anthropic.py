"""Anthropic's Messages API, through the official ``anthropic`` SDK.

This module's one job is translation across the provider seam: a
:class:`~counterpoint.models.types.Request` becomes one ``POST /v1/messages``
(system prompt at the top level, tool calls and results as content blocks,
structured output as a forced tool), and the answer (whole or streamed) becomes
a :class:`~counterpoint.models.types.Response` or a
:class:`~counterpoint.errors.ModelError`. The SDK's own retries are switched off:
retrying, rate limiting and fallbacks happen once, above the seam.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import anthropic
import httpx2  # the SDK's HTTP client: its errors can surface while a stream is read

from ..errors import MalformedResponse, ModelError, ModelRefused, ModelRejected, ModelUnavailable
from ..secrets import register_secret
from . import classify
from .provider import Capabilities, Provider, TextSink
from .types import FinishReason, Message, Request, Response, ToolCall, Usage

if TYPE_CHECKING:
    from .config import ModelConfig

CAPABILITIES = Capabilities(tools=True, forced_tool=True, parallel_tool_calls=True,
                            json_schema=False, json_object_schema=False, streaming=True,
                            tool_output=True, streaming_usage=True, system_messages=True)

DEFAULT_MAX_TOKENS = 1024
"""``max_tokens`` sent when the request sets none (Anthropic requires one)."""

_FINISH: dict[str, FinishReason] = {"end_turn": "stop", "stop_sequence": "stop",
                                    "max_tokens": "length", "tool_use": "tool_calls",
                                    "model_context_window_exceeded": "length",
                                    "pause_turn": "length", "refusal": "refusal"}

_ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401,
                 "billing_error": 402, "permission_error": 403, "not_found_error": 404,
                 "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
                 "timeout_error": 504, "overloaded_error": 529}
"""HTTP status for an error ``type``, for errors sent inside a 200 stream."""

_CACHE = {"type": "ephemeral"}


class AnthropicProvider(Provider):
    """A Claude model (or an Anthropic-compatible endpoint) reached through ``anthropic``."""

    def __init__(self, name: str, model: str, *, base_url: str | None = None,
                 api_key: str | None = None, capabilities: Capabilities | None = None,
                 timeout: float = 120.0, headers: dict[str, str] | None = None) -> None:
        self.name = name
        self.model = model
        self.capabilities = capabilities or CAPABILITIES
        self.timeout = timeout
        if api_key:
            register_secret(api_key)
        # A placeholder key keeps the SDK from searching the environment and disk for
        # credentials; a missing key then shows up as a 401 naming the key variable.
        self._client = anthropic.AsyncAnthropic(  # a client that closes only when told to,
            api_key=api_key or "not-set", base_url=_root(base_url), max_retries=0, timeout=timeout,
            default_headers=headers,  # as in openai_compat
            http_client=anthropic.DefaultAsyncHttpxClient(timeout=timeout))

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    @property
    def identity(self) -> str:
        return f"anthropic:{self.base_url.rstrip('/')}:{self.model}"

    async def complete(self, request: Request, *, on_text: TextSink | None = None,
                       time_limit: float | None = None) -> Response:
        kwargs = self._body(request)
        stream = on_text is not None and self.capabilities.streaming
        limit = time_limit or self.timeout
        try:
            async with asyncio.timeout(limit):  # bounds a whole stream, not each read
                if stream:
                    assert on_text is not None
                    return await self._stream(kwargs, request, on_text, limit)
                raw = await self._client.messages.create(**kwargs, timeout=limit)
        except anthropic.APIStatusError as exc:
            raise classify.from_status(self.name, _status(exc), _message(exc),
                                       dict(exc.response.headers)) from exc
        except (anthropic.APITimeoutError, httpx2.TimeoutException, TimeoutError) as exc:
            raise classify.timed_out(self.name, limit) from exc
        except anthropic.APIConnectionError as exc:
            raise classify.unreachable(self.name, exc.__cause__ or exc, self.base_url) from exc
        except httpx2.TransportError as exc:
            raise ModelUnavailable(f"model {self.name}: the stream ended before the answer "
                                   f"was complete: {exc}", model=self.name) from exc
        except (anthropic.APIResponseValidationError, json.JSONDecodeError, ValueError) as exc:
            raise MalformedResponse(f"model {self.name}: the answer could not be parsed: "
                                    f"{exc}", model=self.name) from exc
        return self._response(raw, request)

    # ------------------------------------------------------------------ request
    def _body(self, request: Request) -> dict[str, Any]:
        # No temperature or seed: this Messages API has no sampling parameters.
        body: dict[str, Any] = {"model": self.model,
                                "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
                                "messages": self._turns(request.messages)}
        system = "\n\n".join(m.content for m in request.messages
                             if m.role == "system" and m.content)
        if system:
            # one block, marked as the end of the cacheable prefix
            body["system"] = [{"type": "text", "text": system, "cache_control": _CACHE}]
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        tools = [_tool_json(t.name, t.description, t.parameters) for t in request.tools]
        choice: dict[str, Any] | None = None
        if request.tools:
            named = request.tool_choice
            choice = {"auto": {"type": "auto"}, "required": {"type": "any"},
                      "none": {"type": "none"}}.get(named) or {"type": "tool", "name": named}
        if request.output is not None:
            output = request.output
            tools.append(_tool_json(output.name, "Give the final answer as this tool's "
                                    "input, matching its schema exactly.", output.schema_))
            if choice is None or choice["type"] == "none":
                choice = {"type": "tool", "name": output.name}
            elif choice["type"] == "auto":
                choice = {"type": "any"}  # a real tool or the answer, but never prose
        if tools:
            body["tools"] = tools
            body["tool_choice"] = choice
        return body

    def _turns(self, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
        """User and assistant turns, alternating: consecutive same-role turns are merged."""
        turns: list[tuple[str, list[dict[str, Any]]]] = []
        for message in messages:
            if message.role == "system":
                continue
            blocks: list[dict[str, Any]] = []
            if message.role == "tool":
                if not message.tool_call_id:
                    raise ModelRejected(f"model {self.name}: a tool result ({message.name}) "
                                        "names no tool call id", model=self.name)
                blocks.append({"type": "tool_result", "tool_use_id": message.tool_call_id,
                               "content": message.content})
            elif message.content:
                blocks.append({"type": "text", "text": message.content})
            if message.role == "assistant":
                blocks.extend({"type": "tool_use", "id": c.id, "name": c.name,
                               "input": c.arguments} for c in message.tool_calls)
            role = "assistant" if message.role == "assistant" else "user"
            if role == "assistant" and not blocks:
                continue  # an empty assistant turn says nothing, and Anthropic rejects it
            if turns and turns[-1][0] == role:
                turns[-1][1].extend(blocks)
            else:
                turns.append((role, blocks))
        out: list[dict[str, Any]] = []
        for role, blocks in turns:
            if len(blocks) == 1 and blocks[0]["type"] == "text":
                out.append({"role": role, "content": blocks[0]["text"]})
            else:
                out.append({"role": role, "content": blocks or ""})
        return out

    # ----------------------------------------------------------------- response
    def _response(self, raw: Any, request: Request) -> Response:
        try:
            blocks = [(b.type, getattr(b, "text", None), getattr(b, "id", None),
                       getattr(b, "name", None), getattr(b, "input", None))
                      for b in raw.content]
            stop = raw.stop_reason
            usage = _usage(raw.usage)
            model = raw.model
        except (AttributeError, TypeError) as exc:
            raise MalformedResponse(f"model {self.name}: the answer is not a message: "
                                    f"{str(raw)[:200]}", model=self.name) from exc
        if stop == "refusal":
            raise ModelRefused(f"model {self.name} refused: {_refusal(raw)}", model=self.name)
        output = request.output.name if request.output is not None else None
        text = "".join(t for kind, t, *_ in blocks if kind == "text" and isinstance(t, str))
        answer: str | None = None
        calls: list[ToolCall] = []
        for kind, _, call_id, name, arguments in blocks:
            if kind != "tool_use":
                continue
            if name == output and answer is None:
                answer = json.dumps(arguments)  # validated above the seam, like any output
                continue
            if not isinstance(name, str) or not isinstance(arguments, dict):
                raise MalformedResponse(f"model {self.name}: a tool_use block has no name or "
                                        f"an input that is not an object: {arguments!r}",
                                        model=self.name)
            calls.append(ToolCall(id=call_id or f"toolu_{name}", name=name,
                                  arguments=arguments))
        return self._answer(text, answer, calls, stop, usage, model)

    def _answer(self, text: str, answer: str | None, calls: list[ToolCall], stop: str | None,
                usage: Usage, model: str | None) -> Response:
        """The response; ``answer`` (the structured-output tool's input) becomes its text."""
        if answer is not None:
            text = answer
            if stop == "tool_use" and not calls:
                stop = "end_turn"
        finish = _FINISH.get(stop or "end_turn", "stop")
        return Response(text=text, tool_calls=tuple(calls),
                        finish_reason="tool_calls" if calls else finish,
                        usage=usage, model=model or self.model)

    def _call(self, call_id: str | None, name: str, start: Any, pieces: list[str]) -> ToolCall:
        arguments = "".join(pieces)
        call_id = call_id or f"toolu_{name}"
        try:
            args = json.loads(arguments) if arguments else start
        except json.JSONDecodeError:
            return ToolCall(id=call_id, name=name, unreadable=arguments)
        if args is None:
            args = {}
        if not isinstance(args, dict):  # the model's mistake: it is told and asked again
            return ToolCall(id=call_id, name=name, unreadable=arguments)
        return ToolCall(id=call_id, name=name, arguments=args)

    async def _stream(self, kwargs: dict[str, Any], request: Request, on_text: TextSink,
                      limit: float) -> Response:
        stream = await self._client.messages.create(**kwargs, stream=True, timeout=limit)
        answer = _Assembly(request.output.name if request.output is not None else None,
                           on_text)
        async with stream:
            async for event in stream:
                try:
                    answer.feed(event)
                except (AttributeError, TypeError, KeyError) as exc:
                    # events are built without validation: a missing field lands here
                    raise MalformedResponse(f"model {self.name}: a stream event could not "
                                            f"be read: {exc}", model=self.name) from exc
        text = "".join(answer.text)
        if answer.stop == "refusal":
            why = answer.refusal or text[:500] or "no explanation given"
            raise ModelRefused(f"model {self.name} refused: {why}", model=self.name)
        if not answer.complete:
            raise ModelUnavailable(f"model {self.name}: the stream ended before the answer "
                                   f"was complete ({len(text)} characters received)",
                                   model=self.name)
        output: str | None = None
        if answer.output_index is not None:
            # the JSON exactly as streamed: invalid JSON is re-asked above the seam
            _, _, start, pieces = answer.blocks.pop(answer.output_index)
            output = "".join(pieces) if pieces else json.dumps(start or {})
        calls = [self._call(slot[0], slot[1], slot[2], slot[3])
                 for _, slot in sorted(answer.blocks.items())]
        return self._answer(text, output, calls, answer.stop, _usage_of(answer.usage),
                            answer.model)

    async def check(self) -> str | None:
        try:
            await self._client.models.list(timeout=min(self.timeout, 10.0))
        except anthropic.APIStatusError as exc:
            if exc.status_code == 404:
                return None  # some compatible servers have no /models; the endpoint answers
            return str(classify.from_status(self.name, exc.status_code, _message(exc)))
        except (anthropic.APIConnectionError, anthropic.APITimeoutError) as exc:
            return f"cannot connect to {classify.shown_url(self.base_url)}: {exc.__cause__ or exc}"
        except ModelError as exc:
            return str(exc)
        return None

    async def aclose(self) -> None:
        await self._client.close()


def from_config(config: ModelConfig) -> AnthropicProvider:
    """The ``anthropic`` kind's factory."""
    return AnthropicProvider(config.name, config.model, base_url=config.endpoint(),
                             api_key=config.api_key(), timeout=config.timeout)


class _Assembly:
    """A streamed answer, put together event by event."""

    def __init__(self, output: str | None, on_text: TextSink) -> None:
        self.output = output
        """The structured-output tool's name, if the request asked for one."""
        self.on_text = on_text
        self.text: list[str] = []
        self.blocks: dict[int, list[Any]] = {}  # index -> [id, name, start input, pieces]
        self.output_index: int | None = None
        """The block that calls the structured-output tool."""
        self.stop: str | None = None
        self.usage: dict[str, int] = {}
        self.model: str | None = None
        self.refusal: str | None = None
        self.complete = False

    def feed(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.model = event.message.model
            _merge_usage(self.usage, event.message.usage)
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "text" and block.text:
                self.emit(block.text)
            elif block.type == "tool_use":
                self.blocks[event.index] = [block.id, block.name, block.input, []]
                if block.name == self.output and self.output_index is None:
                    self.output_index = event.index
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                self.emit(delta.text)
            elif delta.type == "input_json_delta" and event.index in self.blocks:
                self.blocks[event.index][3].append(delta.partial_json)
                if event.index == self.output_index and delta.partial_json:
                    self.on_text(delta.partial_json)  # the structured answer is the text
        elif kind == "message_delta":
            self.stop = event.delta.stop_reason or self.stop
            details = getattr(event.delta, "stop_details", None)
            self.refusal = getattr(details, "explanation", None) or self.refusal
            _merge_usage(self.usage, event.usage)
        elif kind == "message_stop":
            self.complete = True

    def emit(self, piece: str) -> None:
        self.text.append(piece)
        self.on_text(piece)


def _tool_json(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": name, "input_schema": schema}
    if description:
        tool["description"] = description
    return tool


def _merge_usage(into: dict[str, int], raw: Any) -> None:
    """Stream usage: ``message_delta`` counts are cumulative and replace earlier ones."""
    for field in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                  "cache_read_input_tokens"):
        value = getattr(raw, field, None)
        if isinstance(value, int):
            into[field] = value


def _usage_of(counts: dict[str, int]) -> Usage:
    read = counts.get("cache_read_input_tokens", 0)
    # Anthropic's input_tokens excludes cache reads and writes; ours includes them so
    # that cached_tokens is a subset of input_tokens.
    total = counts.get("input_tokens", 0) + counts.get("cache_creation_input_tokens", 0) + read
    return Usage(input_tokens=total, output_tokens=counts.get("output_tokens", 0),
                 cached_tokens=read, calls=1)


def _usage(raw: Any) -> Usage:
    counts: dict[str, int] = {}
    _merge_usage(counts, raw)
    return _usage_of(counts)


def _refusal(raw: Any) -> str:
    details = getattr(raw, "stop_details", None)
    explanation = getattr(details, "explanation", None)
    if explanation:
        return str(explanation)
    text = "".join(getattr(b, "text", "") or "" for b in getattr(raw, "content", ()) or ())
    return text[:500] or "no explanation given"


def _status(exc: anthropic.APIStatusError) -> int:
    """The HTTP status, or for an error event inside a 200 stream, its type's status."""
    if exc.status_code >= 400:
        return exc.status_code
    body = exc.body
    kind = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        kind = inner.get("type") if isinstance(inner, dict) else None
    return _ERROR_STATUS.get(str(kind), 500)


def _message(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        return json.dumps(body)[:500]
    return exc.message


def _root(base_url: str | None) -> str | None:
    """The SDK adds ``/v1`` itself; accept URLs written OpenAI-style, with it."""
    if base_url is None:
        return None
    trimmed = base_url.rstrip("/")
    return trimmed[:-3] if trimmed.endswith("/v1") else trimmed
