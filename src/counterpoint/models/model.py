"""The model facade: one call = layout, cache, rate limits, retries, validation, fallbacks.

``Model("openai:gpt-4.1-mini")`` (or any configured name, or a
:class:`~counterpoint.models.provider.Provider` instance) gives an object whose
:meth:`Model.generate` does everything above the provider seam, the same way for
every provider:

1. lays the prompt out for prefix caching and passes the run id as session id;
2. answers from the response cache when the same call was made before to the
   same provider (keyed by :attr:`Provider.identity`, never by name; on by default
   at temperature 0; the cache lives in the run store);
3. waits for the model's rate limits (shared process-wide; a 429 pauses and
   paces every caller, see ``limits``);
4. makes the attempt, retrying retryable failures with exponential backoff and
   jitter, honouring ``Retry-After``;
5. for structured output, validates the answer and re-asks with the validation
   errors a bounded number of times, then raises ``InvalidOutput`` with the raw
   answer attached;
6. if the model still fails, tries each fallback model in turn.

Inside a running node every attempt is a ``model_call`` event in the run's log
(model, tokens, cost, latency, time to first token, and the request and response
stored once by content hash); streamed text is published to the run's
subscribers as ``model_delta`` events. A failure's message (and its causes') is
redacted (``counterpoint.secrets``) before it is logged or raised.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
import weakref
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import pydantic

from ..errors import ConfigError, InvalidOutput, ModelError
from ..events import EventKind
from ..policy import Backoff
from ..secrets import redact_exception
from . import prompt
from .config import ModelConfig, ModelRegistry, load_registry
from .limits import RateLimiter, limiter_for
from .provider import Provider, TextSink
from .provider_registry import build_provider
from .types import Message, Request, Response, ToolCall, ToolSpec, Usage

if TYPE_CHECKING:
    from ..context import NodeContext
    from ..store import RunStore

T = TypeVar("T")

DEFAULT_BACKOFF = Backoff(initial=0.5, factor=2.0, maximum=30.0, jitter=0.5)


@dataclass(frozen=True, kw_only=True, slots=True)
class Generation(Generic[T]):
    """The result of :meth:`Model.generate`."""

    text: str
    """The answer's text (for structured output: the JSON that validated)."""
    output: T | None
    """The validated instance, when an output type was asked for."""
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    """Summed over every call this generation made (retries and re-asks included);
    cache hits add nothing."""
    model: str
    """The name of the model that answered (a fallback's, if it came to that)."""
    response: Response
    """The last raw response."""
    calls: int
    """Provider calls made (0 when the cache answered)."""
    cache_hit: bool = False
    messages: tuple[Message, ...] = field(default=())
    """The conversation as sent, plus the answer: continue it for a next turn."""


class _Binding:
    """A resolved model: its configuration, provider and rate limiter."""

    def __init__(self, config: ModelConfig, provider: Provider, limiter: RateLimiter) -> None:
        self.config = config
        self.provider = provider
        self.limiter = limiter


_PROVIDERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop,
                                      dict[Hashable, Provider]] = weakref.WeakKeyDictionary()
"""Providers per event loop (HTTP clients' connection pools belong to one loop), keyed
by everything they were built from (see ``_provider_key``)."""


def _provider_key(config: ModelConfig) -> Hashable:
    """What a provider built for ``config`` depends on: the whole configuration, the
    endpoint it resolves to now (``OPENAI_BASE_URL``...) and the key it reads now.

    The key enters as a hash only, so this cache never holds it in the clear.
    """
    key = config.api_key()
    fingerprint = hashlib.sha256(key.encode()).hexdigest() if key else None
    return (config, config.endpoint(), fingerprint)


class Model:
    """A model to call, with everything above the provider seam. See the module docstring.

    Cheap to create; safe to share between concurrent nodes and runs (it holds no
    per-call state).
    """

    def __init__(self, model: str | Provider | None = None, *,
                 fallbacks: Sequence[str | Provider] = (), registry: ModelRegistry | None = None,
                 cache: bool | None = None, retries: int | None = None,
                 output_retries: int = 2, backoff: Backoff = DEFAULT_BACKOFF,
                 max_concurrency: int | None = None, rpm: float | None = None,
                 tpm: float | None = None, timeout: float | None = None) -> None:
        self._registry = registry
        self._spec = model
        self._fallbacks = tuple(fallbacks)
        self.cache = cache
        """Use the response cache: ``None`` = only at temperature 0."""
        self.retries = retries
        self.output_retries = output_retries
        self.backoff = backoff
        self.timeout = timeout
        self._limits = (max_concurrency, rpm, tpm)
        self._given: dict[Provider, ModelConfig] = {}
        """Configurations of the provider objects in the chain (see ``_bind``)."""
        self.rng = random.Random()
        """Jitter source for backoff delays."""
        self.name = model.name if isinstance(model, Provider) else \
            (model or self.registry.default)
        """The name calls are recorded under."""

    @property
    def registry(self) -> ModelRegistry:
        if self._registry is None:
            self._registry = load_registry()
        return self._registry

    def __repr__(self) -> str:
        return f"Model({self.name!r})"

    # ---------------------------------------------------------------- resolving
    def _bind(self, spec: str | Provider) -> _Binding:
        if isinstance(spec, Provider):
            # a provider object's configuration never changes: build it once per Model
            config = self._given.get(spec)
            if config is None:
                config = self._given[spec] = ModelConfig(
                    name=spec.name, provider=type(spec).__name__,
                    retries=3 if self.retries is None else self.retries,
                    max_concurrency=self._limits[0], rpm=self._limits[1], tpm=self._limits[2])
            limiter = limiter_for(config.name, max_concurrency=config.max_concurrency,
                                  rpm=config.rpm, tpm=config.tpm, owner=spec)
            return _Binding(config, spec, limiter)
        config = self.registry.resolve(spec)
        updates = {k: v for k, v in zip(("max_concurrency", "rpm", "tpm"), self._limits,
                                        strict=True) if v is not None}
        if self.retries is not None:
            updates["retries"] = self.retries
        if updates:
            config = config.model_copy(update=updates)
        cached = _PROVIDERS.setdefault(asyncio.get_running_loop(), {})
        key = _provider_key(config)
        provider = cached.get(key)
        if provider is None:
            provider = cached[key] = build_provider(config)
        # limits are shared per configured name, apart for each endpoint it points at
        limiter = limiter_for(f"{config.name}|{provider.identity}",
                              max_concurrency=config.max_concurrency, rpm=config.rpm,
                              tpm=config.tpm)
        return _Binding(config, provider, limiter)

    def _chain(self) -> list[str | Provider]:
        chain: list[str | Provider] = [self._spec if self._spec is not None else self.name]
        if not isinstance(self._spec, Provider):
            chain.extend(self.registry.resolve(self.name).fallbacks)
        chain.extend(self._fallbacks)
        return chain

    # --------------------------------------------------------------- generating
    @overload
    async def generate(self, prompt_text: str | Sequence[Message] | None = None, *,
                       output: type[T], system: str | None = ..., context: Sequence[str] = ...,
                       tools: Sequence[ToolSpec] = ..., tool_choice: str = ...,
                       temperature: float = ..., max_tokens: int | None = ...,
                       stop: Sequence[str] = ..., seed: int | None = ...,
                       stream: bool | TextSink = ..., ctx: NodeContext | None = ...,
                       store: RunStore | None = ..., cache: bool | None = ...,
                       purpose: str = ...) -> Generation[T]: ...

    @overload
    async def generate(self, prompt_text: str | Sequence[Message] | None = None, *,
                       output: None = None, system: str | None = ...,
                       context: Sequence[str] = ..., tools: Sequence[ToolSpec] = ...,
                       tool_choice: str = ..., temperature: float = ...,
                       max_tokens: int | None = ..., stop: Sequence[str] = ...,
                       seed: int | None = ..., stream: bool | TextSink = ...,
                       ctx: NodeContext | None = ..., store: RunStore | None = ...,
                       cache: bool | None = ..., purpose: str = ...) -> Generation[Any]: ...

    async def generate(self, prompt_text: str | Sequence[Message] | None = None, *,
                       output: type[Any] | None = None, system: str | None = None,
                       context: Sequence[str] = (), tools: Sequence[ToolSpec] = (),
                       tool_choice: str = "auto", temperature: float = 0.0,
                       max_tokens: int | None = None, stop: Sequence[str] = (),
                       seed: int | None = None, stream: bool | TextSink = False,
                       ctx: NodeContext | None = None, store: RunStore | None = None,
                       cache: bool | None = None, purpose: str = "") -> Generation[Any]:
        """Call the model once (plus retries, re-asks and fallbacks); see the module docstring.

        ``prompt_text`` is the user's message (or the whole conversation as
        messages). ``system`` and ``context`` are the stable prefix. ``output``
        asks for structured output and returns a validated instance. ``stream``
        publishes text deltas to the run's subscribers (and to a callable, if
        given). ``ctx`` defaults to the running node's context, if any.
        """
        from ..context import current_context
        ctx = ctx if ctx is not None else current_context()
        if store is None and ctx is not None:
            store = ctx.store
        messages: list[Message] = []
        if isinstance(prompt_text, str):
            messages.append(Message.user(prompt_text))
        elif prompt_text is not None:
            messages.extend(prompt_text)
        if not messages:
            raise ConfigError(f"model {self.name}: nothing to send (give a prompt or messages)")
        if tool_choice not in ("auto", "required", "none") and \
                tool_choice not in {t.name for t in tools}:
            raise ConfigError(f"model {self.name}: tool_choice {tool_choice!r} names no given "
                              f"tool (tools: {sorted(t.name for t in tools)})")
        call = _Call(model=self, messages=messages, system=system, context=tuple(context),
                     tools=tuple(tools), tool_choice=tool_choice,
                     shape=prompt.OutputShape(output) if output is not None else None,
                     temperature=temperature, max_tokens=max_tokens, stop=tuple(stop),
                     seed=seed, stream=stream, ctx=ctx, store=store,
                     cache=cache if cache is not None else self.cache, purpose=purpose)
        errors: list[str] = []
        chain = self._chain()
        for index, spec in enumerate(chain):
            binding = self._bind(spec)
            try:
                return await call.run(binding)
            except ModelError as exc:
                redact_exception(exc)
                if index == len(chain) - 1:
                    if errors:
                        exc.add_note("earlier in the fallback chain: " + "; ".join(errors))
                    raise
                errors.append(f"{binding.config.name}: {exc}")
        raise AssertionError("unreachable: the chain is never empty")


class _Call:
    """One :meth:`Model.generate` call in progress (state shared across its attempts)."""

    def __init__(self, *, model: Model, messages: list[Message], system: str | None,
                 context: tuple[str, ...], tools: tuple[ToolSpec, ...], tool_choice: str,
                 shape: prompt.OutputShape | None, temperature: float, max_tokens: int | None,
                 stop: tuple[str, ...], seed: int | None, stream: bool | TextSink,
                 ctx: NodeContext | None, store: RunStore | None, cache: bool | None,
                 purpose: str) -> None:
        self.model = model
        self.messages = messages
        self.system = system
        self.context = context
        self.tools = tools
        self.tool_choice = tool_choice
        self.shape = shape
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.stop = stop
        self.seed = seed
        self.stream = stream
        self.ctx = ctx
        self.store = store
        self.use_cache = cache if cache is not None else temperature == 0
        self.purpose = purpose
        self.usage = Usage()
        self.calls = 0

    def request(self, binding: _Binding, conversation: list[Message]) -> tuple[Request, bool]:
        """The request for ``binding``'s provider; and whether tools are emulated."""
        caps = binding.provider.capabilities
        extra: list[str] = []
        output = self.shape.spec if self.shape is not None else None
        emulated = bool(self.tools) and self.tool_choice != "none" and (
            not caps.tools if self.tool_choice in ("auto", "required") else
            not caps.forced_tool)
        if emulated:
            output = prompt.emulate_tools(self.tools, self.tool_choice)
            extra.append(prompt.tools_instruction(self.tools, self.tool_choice))
        if output is not None and not (caps.json_schema or caps.json_object_schema or
                                       caps.tool_output):
            extra.append(prompt.schema_instruction(output))
        system = "\n\n".join(s for s in (self.system, *extra) if s) or None
        messages, tools = prompt.layout(system=system, context=self.context,
                                        messages=conversation, tools=self.tools)
        session = str(self.ctx.run_id) if self.ctx is not None else None
        return Request(messages=prompt.adapt(messages, caps),
                       tools=() if emulated else tools,
                       tool_choice="auto" if emulated else self.tool_choice,
                       output=output, temperature=self.temperature,
                       max_tokens=self.max_tokens, stop=self.stop, seed=self.seed,
                       session=session), emulated

    async def run(self, binding: _Binding) -> Generation[Any]:
        conversation = list(self.messages)
        re_asks = self.model.output_retries if self.shape is not None or self.tools else 0
        for ask in range(re_asks + 1):
            request, emulated = self.request(binding, conversation)
            response, hit = await self.answer(binding, request, ask)
            try:
                return self.finish(binding, request, response, emulated, hit)
            except (pydantic.ValidationError, ValueError) as exc:
                problems = _problems(exc)
                raw = response.text
                self.record_invalid(binding, ask, problems)
                native_tools = bool(response.tool_calls) and not emulated
                cut = response.finish_reason == "length"  # the token limit ended it
                if ask == re_asks:
                    what = "tool calls" if native_tools or emulated else "output schema"
                    hint = (f"; the last answer was cut off at the token limit (max_tokens="
                            f"{request.max_tokens}): raise max_tokens or ask for less"
                            if cut else "")
                    raise InvalidOutput(
                        f"model {binding.config.name}: the answer did not match the "
                        f"{what} after {re_asks + 1} attempt(s): {problems}{hint}",
                        model=binding.config.name, raw=raw or _calls_text(response),
                        errors=problems, finish_reason=response.finish_reason) from exc
                if native_tools:
                    # answer every call (a provider rejects calls left unanswered), then ask
                    conversation = [*conversation, response.message(), *(
                        Message.tool(call, f"error: {problems}") for call in
                        response.tool_calls)]
                elif cut:  # asking again for the same would be cut off again
                    conversation = [*conversation, Message.assistant(raw), Message.user(
                        "Your answer was cut off at the length limit before it was "
                        f"complete: {problems}\nReply again with shorter JSON only, matching "
                        "the schema exactly.")]
                else:
                    conversation = [*conversation, Message.assistant(raw), Message.user(
                        f"Your answer was invalid: {problems}\nReply again with JSON only, "
                        "matching the schema exactly.")]
        raise AssertionError("unreachable")

    def finish(self, binding: _Binding, request: Request, response: Response, emulated: bool,
               hit: bool) -> Generation[Any]:
        text, calls = response.text, response.tool_calls
        output = None
        if emulated:
            text, calls = prompt.read_emulated(response.text, self.tools)
            if self.tool_choice not in ("auto",) and not calls:
                raise ValueError("at least one tool call is required")
        elif self.tools and self.tool_choice != "none":
            names = {t.name for t in self.tools}
            wrong = [c.name for c in calls if c.name not in names]
            if wrong:
                raise ValueError(f"called unknown tool(s) {wrong}; known: {sorted(names)}")
            if self.tool_choice == "required" and not calls:
                raise ValueError("at least one tool call is required")
        if self.shape is not None and not calls:
            output = self.shape.parse(response.text)
        final = response.model_copy(update={"text": text, "tool_calls": calls})
        return Generation(text=text, output=output, tool_calls=calls, usage=self.usage,
                          model=binding.config.name, response=final, calls=self.calls,
                          cache_hit=hit and self.calls == 0,
                          messages=(*request.messages, final.message()))

    # ------------------------------------------------------------ one answer
    async def answer(self, binding: _Binding, request: Request,
                     ask: int) -> tuple[Response, bool]:
        """An answer from the cache or the provider (with retries)."""
        config = binding.config
        key = request.cache_key(binding.provider.identity) \
            if self.use_cache and self.store else None
        if key is not None and self.store is not None:
            hit = self.store.cache_get(key)
            if hit is not None:
                response = Response.model_validate_json(hit)
                self.record(binding, request, response, latency=0.0, ttft=None, attempt=0,
                            cache_hit=True)
                if response.text:
                    self.publish(binding, response.text)
                return response, True
        attempts = config.retries + 1
        for attempt in range(1, attempts + 1):
            started = time.perf_counter()
            first: list[float] = []

            def on_text(piece: str, _first: list[float] = first,
                        _started: float = started) -> None:
                if not _first:
                    _first.append(time.perf_counter() - _started)
                self.publish(binding, piece)

            estimate = _estimate_tokens(request)
            try:
                async with binding.limiter.slot(estimate):
                    started = time.perf_counter()
                    response = await binding.provider.complete(
                        request, on_text=on_text if self.stream else None,
                        time_limit=self.model.timeout or config.timeout)
            except ModelError as exc:
                redact_exception(exc)  # before it is logged: a provider may echo the key
                latency = time.perf_counter() - started
                self.calls += 1
                wait = None
                if exc.retryable and attempt < attempts:
                    wait = max(exc.retry_after or 0.0,
                               self.model.backoff.delay(attempt, self.model.rng))
                self.record_error(binding, request, exc, latency, attempt, wait)
                if wait is None:
                    raise
                await asyncio.sleep(wait)  # a 429 also paused and paced the limiter
                continue
            latency = time.perf_counter() - started
            binding.limiter.settle(estimate, response.usage.total_tokens)
            response = response.model_copy(update={"usage": config.cost(response.usage)})
            self.calls += 1
            self.usage = self.usage + response.usage
            self.record(binding, request, response, latency=latency,
                        ttft=first[0] if first else None, attempt=attempt, cache_hit=False)
            if key is not None and self.store is not None and response.finish_reason != "error":
                self.store.cache_put(key, response.model_dump_json())
            return response, False
        raise AssertionError("unreachable")

    # ---------------------------------------------------------------- the log
    def _node_event(self, kind: EventKind, data: dict[str, Any], persist: bool = True) -> None:
        if self.ctx is not None:
            self.ctx.record(kind, data, persist=persist)

    def publish(self, binding: _Binding, piece: str) -> None:
        if callable(self.stream):
            self.stream(piece)
        if self.stream and self.ctx is not None:
            self._node_event(EventKind.MODEL_DELTA, {"model": binding.config.name,
                                                     "text": piece}, persist=False)

    def _blob(self, text: str) -> str | None:
        return self.store.put_blob(text) if self.store is not None else None

    def record(self, binding: _Binding, request: Request, response: Response, *,
               latency: float, ttft: float | None, attempt: int, cache_hit: bool) -> None:
        if self.ctx is None:
            return
        usage = response.usage
        data: dict[str, Any] = {
            "model": binding.config.name, "served_by": response.model, "attempt": attempt,
            "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cached_tokens": usage.cached_tokens, "cost": usage.cost,
            "usage_estimated": usage.estimated,
            "priced": binding.config.priced, "latency": round(latency, 6),
            "ttft": None if ttft is None else round(ttft, 6), "cache_hit": cache_hit,
            "finish": response.finish_reason, "tool_calls": len(response.tool_calls),
            "request": self._blob(request.model_dump_json(by_alias=True)),
            "response": self._blob(response.model_dump_json())}
        if self.purpose:
            data["purpose"] = self.purpose
        self._node_event(EventKind.MODEL_CALL, data)

    def record_error(self, binding: _Binding, request: Request, exc: ModelError,
                     latency: float, attempt: int, retry_in: float | None) -> None:
        if self.ctx is None:
            return
        self._node_event(EventKind.MODEL_CALL, {
            "model": binding.config.name, "attempt": attempt, "error": str(exc),
            "error_type": type(exc).__name__, "status": exc.status,
            "retryable": exc.retryable, "retry_in": retry_in, "latency": round(latency, 6),
            "request": self._blob(request.model_dump_json(by_alias=True))})

    def record_invalid(self, binding: _Binding, ask: int, problems: str) -> None:
        self._node_event(EventKind.MODEL_CALL, {
            "model": binding.config.name, "invalid_output": problems, "re_ask": ask + 1})


def _calls_text(response: Response) -> str:
    return "; ".join(f"{c.name}({json.dumps(c.arguments)})" for c in response.tool_calls)


def _estimate_tokens(request: Request) -> int:
    chars = sum(len(m.content) for m in request.messages)
    return chars // 4 + (request.max_tokens or 256)


def _problems(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                         for e in exc.errors()[:10])
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg} at character {exc.pos})"
    return str(exc)

