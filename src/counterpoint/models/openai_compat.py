"""OpenAI and every OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, OpenRouter).

Uses the official ``openai`` SDK with its own retries switched off: retrying,
rate limiting and fallbacks happen once, above the provider seam.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import openai

from ..errors import ConfigError, MalformedResponse, ModelError, ModelRefused, ModelUnavailable
from ..secrets import register_secret
from . import classify
from .provider import Capabilities, Provider, TextSink
from .types import FinishReason, Message, Request, Response, ToolCall, Usage

if TYPE_CHECKING:
    from .config import ModelConfig

PROFILES: dict[str, Capabilities] = {
    "openai": Capabilities(json_schema=True, streaming_usage=True,
                           session_field="prompt_cache_key"),
    "vllm": Capabilities(json_schema=True, streaming_usage=True, session_header="X-Session-Id"),
    "sglang": Capabilities(json_schema=True, streaming_usage=True,
                           session_header="X-Session-Id"),
    "ollama": Capabilities(json_schema=True, streaming_usage=True),
    "llama.cpp": Capabilities(json_schema=True, streaming_usage=True),
    "llama-cpp-python": Capabilities(tools=False, parallel_tool_calls=False,
                                     json_object_schema=True),
    "generic": Capabilities(tools=True, json_schema=False, streaming_usage=False),
}
"""Capability profiles of known server kinds, chosen by a model's ``profile`` setting."""

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length",
                                    "tool_calls": "tool_calls", "function_call": "tool_calls",
                                    "content_filter": "refusal"}


class OpenAIProvider(Provider):
    """A chat-completions endpoint reached through the ``openai`` SDK."""

    def __init__(self, name: str, model: str, *, base_url: str | None = None,
                 api_key: str | None = None, capabilities: Capabilities | None = None,
                 timeout: float = 120.0, headers: dict[str, str] | None = None) -> None:
        self.name = name
        self.model = model
        self.capabilities = capabilities or PROFILES["openai"]
        self.timeout = timeout
        if api_key:
            register_secret(api_key)
        # the SDK's default HTTP client closes itself when collected, on whatever loop runs
        # then (its own may be closed: "Event loop is closed"); this one is closed by aclose
        self._client = openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key or "not-needed", max_retries=0,
            timeout=timeout, default_headers=headers,
            http_client=openai.DefaultAsyncHttpxClient(timeout=timeout))

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    @property
    def identity(self) -> str:
        return f"openai:{self.base_url.rstrip('/')}:{self.model}"

    async def complete(self, request: Request, *, on_text: TextSink | None = None,
                       time_limit: float | None = None) -> Response:
        kwargs = self._body(request)
        stream = on_text is not None and self.capabilities.streaming
        limit = time_limit or self.timeout
        progress: list[str] = []  # text received so far when streaming
        try:
            async with asyncio.timeout(limit):  # the whole attempt, not only each read
                if stream:
                    assert on_text is not None
                    return await self._stream(kwargs, on_text, limit, progress)
                raw = await self._client.chat.completions.create(**kwargs, timeout=limit)
        except openai.APIStatusError as exc:
            raise classify.from_status(self.name, exc.status_code, _message(exc),
                                       dict(exc.response.headers)) from exc
        except (openai.APITimeoutError, TimeoutError) as exc:
            raise classify.timed_out(self.name, limit, self.base_url,
                                     received=len("".join(progress))) from exc
        except openai.APIConnectionError as exc:
            if progress:
                raise ModelUnavailable(
                    f"model {self.name}: the stream was cut off after "
                    f"{len(''.join(progress))} characters ({exc.__cause__ or exc})",
                    model=self.name) from exc
            raise classify.unreachable(self.name, exc.__cause__ or exc, self.base_url) from exc
        except (openai.APIResponseValidationError, json.JSONDecodeError, ValueError) as exc:
            raise MalformedResponse(f"model {self.name}: the answer could not be parsed: "
                                    f"{exc}", model=self.name) from exc
        return self._response(raw)

    # ------------------------------------------------------------------ request
    def _body(self, request: Request) -> dict[str, Any]:
        caps = self.capabilities
        body: dict[str, Any] = {"model": self.model,
                                "messages": [_message_json(m) for m in request.messages],
                                "temperature": request.temperature}
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        if request.tools:
            body["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in request.tools]
            choice = request.tool_choice
            body["tool_choice"] = choice if choice in ("auto", "required", "none") else \
                {"type": "function", "function": {"name": choice}}
            if caps.parallel_tool_calls and choice in ("auto", "required"):
                body["parallel_tool_calls"] = True
        if request.output is not None:
            if caps.json_schema:
                body["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": request.output.name, "schema": request.output.schema_}}
            elif caps.json_object_schema:
                body["response_format"] = {"type": "json_object",
                                           "schema": request.output.schema_}
            else:
                body["response_format"] = {"type": "json_object"}
        if request.session and caps.session_header:
            body["extra_headers"] = {caps.session_header: request.session}
        if request.session and caps.session_field:
            body["extra_body"] = {caps.session_field: request.session}
        return body

    # ----------------------------------------------------------------- response
    def _response(self, raw: Any) -> Response:
        try:
            choice = raw.choices[0]
            message = choice.message
        except (AttributeError, IndexError, TypeError) as exc:
            raise MalformedResponse(f"model {self.name}: {_no_choices(raw)}",
                                    model=self.name) from exc
        refusal = getattr(message, "refusal", None)
        if refusal:
            raise ModelRefused(f"model {self.name} refused: {refusal}", model=self.name)
        calls = tuple(self._call(c.id, c.function.name, c.function.arguments)
                      for c in (message.tool_calls or ()))
        finish = _FINISH.get(choice.finish_reason or "stop", "stop")
        if finish == "refusal":
            raise ModelRefused(f"model {self.name}: the answer was withheld by a content "
                               "filter", model=self.name)
        return Response(text=message.content or "", tool_calls=calls,
                        finish_reason="tool_calls" if calls else finish,
                        usage=_usage(raw.usage), model=raw.model or self.model)

    def _call(self, call_id: str | None, name: str, arguments: str | None) -> ToolCall:
        call_id = call_id or f"call_{name}"
        try:
            args = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            args = None
        if not isinstance(args, dict):  # the model's mistake: it is told and asked again
            return ToolCall(id=call_id, name=name, unreadable=arguments or "")
        return ToolCall(id=call_id, name=name, arguments=args)

    async def _stream(self, kwargs: dict[str, Any], on_text: TextSink, limit: float,
                      text: list[str]) -> Response:
        if self.capabilities.streaming_usage:
            kwargs["stream_options"] = {"include_usage": True}
        stream = await self._client.chat.completions.create(**kwargs, stream=True,
                                                            timeout=limit)
        calls: dict[int, list[Any]] = {}  # index -> [id, name, argument pieces]
        chunks = 0
        finish: str | None = None
        usage: Any = None
        model = self.model
        refusal: list[str] = []
        async with stream:
            async for chunk in stream:
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices or ():
                    delta = choice.delta
                    if delta is None:
                        continue
                    if delta.content:
                        chunks += 1
                        text.append(delta.content)
                        on_text(delta.content)
                    if getattr(delta, "refusal", None):
                        refusal.append(delta.refusal)
                    for part in delta.tool_calls or ():
                        slot = calls.setdefault(part.index, [None, "", []])
                        if part.id:
                            slot[0] = part.id
                        if part.function is not None:
                            if part.function.name:
                                slot[1] += part.function.name
                            if part.function.arguments:
                                slot[2].append(part.function.arguments)
                    if choice.finish_reason:
                        finish = choice.finish_reason
        if refusal:
            raise ModelRefused(f"model {self.name} refused: {''.join(refusal)}",
                               model=self.name)
        if finish is None:
            raise ModelUnavailable(f"model {self.name}: the stream ended before the answer "
                                   f"was complete ({len(''.join(text))} characters received)",
                                   model=self.name)
        tool_calls = tuple(self._call(slot[0], slot[1], "".join(slot[2]))
                           for _, slot in sorted(calls.items()))
        reason = _FINISH.get(finish, "stop")
        if reason == "refusal":
            raise ModelRefused(f"model {self.name}: the answer was withheld by a content "
                               "filter", model=self.name)
        counted = _usage(usage) if usage is not None else Usage(
            input_tokens=sum(len(str(m.get("content") or "")) for m in kwargs["messages"]) // 4,
            output_tokens=chunks, calls=1, estimated=True)
        return Response(text="".join(text), tool_calls=tool_calls,
                        finish_reason="tool_calls" if tool_calls else reason,
                        usage=counted, model=model)

    async def check(self) -> str | None:
        try:
            await self._client.models.list(timeout=min(self.timeout, 10.0))
        except openai.APIStatusError as exc:
            if exc.status_code == 404:
                return None  # some servers have no /models; the endpoint itself answers
            return str(classify.from_status(self.name, exc.status_code, _message(exc)))
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            return f"cannot connect to {classify.shown_url(self.base_url)}: {exc.__cause__ or exc}"
        except ModelError as exc:
            return str(exc)
        return None

    async def aclose(self) -> None:
        await self._client.close()


def from_config(config: ModelConfig) -> OpenAIProvider:
    """The ``openai`` kind's factory: any OpenAI-compatible endpoint."""
    profile = config.profile or ("generic" if config.base_url else "openai")
    if profile not in PROFILES:
        raise ConfigError(f"model {config.name} ({config.source or 'built in'}): unknown "
                          f"profile {profile!r}; known: {', '.join(sorted(PROFILES))}")
    return OpenAIProvider(config.name, config.model, base_url=config.endpoint(),
                          api_key=config.api_key(), capabilities=PROFILES[profile],
                          timeout=config.timeout)


def _message_json(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        out["content"] = message.content or None
        out["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.name, "arguments": json.dumps(c.arguments)}} for c in message.tool_calls]
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    return out


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage(calls=1)
    details = getattr(raw, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    return Usage(input_tokens=raw.prompt_tokens or 0, output_tokens=raw.completion_tokens or 0,
                 cached_tokens=cached, calls=1)


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        return json.dumps(body)[:500]
    return exc.message


def _no_choices(raw: Any) -> str:
    """What an answer without choices said: a server that reports an error with HTTP 200
    (``{"error": {"message": ...}}``) gets its message quoted, not the SDK object's repr."""
    error = getattr(raw, "error", None)
    if isinstance(error, dict):
        error = error.get("message") or error
    if error:
        return f"the server answered HTTP 200 with an error instead of an answer: {error}"[:300]
    return f"the answer has no choices: {str(raw)[:200]}"
