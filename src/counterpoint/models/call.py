"""One :meth:`Model.generate` call against one bound model, and its result.

A :class:`_Call` lays the request out for the provider's capabilities (emulating tools
or a schema in the prompt where the provider lacks them), answers it from the response
cache or the provider (waiting for the rate limiter, retrying retryable failures with
backoff), validates the answer and re-asks with the problems found, and records every
attempt in the running node's log; the model facade (:mod:`.model`) runs it once per
model of the fallback chain. A :class:`Generation` is what it returns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pydantic

from ..errors import InvalidOutput, ModelError
from ..events import EventKind
from ..secrets import redact_exception
from . import budgeting, prompt
from .binding import _Binding
from .provider import TextSink
from .types import Message, Request, Response, ToolCall, ToolSpec, Usage

if TYPE_CHECKING:
    from ..context import NodeContext
    from ..store import RunStore
    from .model import Model
    from .sampling import Sampled

T = TypeVar("T")


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
    samples: tuple[Generation[T], ...] = ()
    """Every sample that answered, when several were asked for (``samples=N``); this
    generation is the chosen one, its ``usage`` and ``calls`` summed over them all."""
    sampled: Sampled | None = None
    """How the samples went: sent, downgraded, the vote (``None``: one call)."""


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
        self.streamed = False
        """Whether text was published since the call began or last restarted."""

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
        if output is not None and not caps.string_bounds:
            output = prompt.without_string_bounds(output)
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
                generation = self.finish(binding, request, response, emulated, hit)
            except (pydantic.ValidationError, ValueError) as exc:
                problems = _problems(exc)
                raw = response.text
                self.record_invalid(binding, ask, problems, final=ask == re_asks)
                native_tools = bool(response.tool_calls) and not emulated
                cut = response.finish_reason == "length"  # the token limit ended it
                what = "tool calls" if native_tools or emulated else \
                    f"output schema ({self.shape.spec.name})" if self.shape is not None \
                    else "output schema"
                if ask == re_asks:
                    hint = (f"; the last answer was cut off at the token limit (max_tokens="
                            f"{request.max_tokens}): raise max_tokens or ask for less"
                            if cut else "")
                    raise InvalidOutput(
                        f"model {binding.config.name}: the answer did not match the "
                        f"{what} after {re_asks + 1} attempt(s): {problems}{hint}",
                        model=binding.config.name, raw=raw or _calls_text(response),
                        errors=problems, finish_reason=response.finish_reason) from exc
                self.restart(binding, f"model {binding.config.name}: the answer did not match "
                                      f"the {what} ({problems[:160]}); asking again")
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
                continue
            if not hit:
                self.remember(binding, request, response)
            return generation
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
            unreadable = [c for c in calls if c.unreadable is not None]
            if unreadable:
                raise ValueError("; ".join(
                    f"the arguments of tool call {c.name!r} are not a JSON object: "
                    f"{(c.unreadable or '')[:200]!r}" for c in unreadable)
                    + "; send the arguments as one JSON object, as the tool's schema says")
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
        if key is not None and not (self.ctx is not None and self.ctx.failed_before):
            # a store written before cut answers were kept out may still hold one: ask again
            cached = self._lookup(key, refused=("length",))
            if cached is not None:
                self._replay(binding, request, cached)
                return cached, True
        attempts = config.retries + 1
        for attempt in range(1, attempts + 1):
            started = time.perf_counter()
            first: list[float] = []

            def on_text(piece: str, _first: list[float] = first,
                        _started: float = started) -> None:
                if not _first:
                    _first.append(time.perf_counter() - _started)
                self.publish(binding, piece)

            # under a budget: the answer bounded, and its cost reserved before it is sent
            sent, reservation = await budgeting.reserve(config, request, self.ctx)
            estimate = _estimate_tokens(sent)
            try:
                async with binding.limiter.slot(estimate):
                    started = time.perf_counter()
                    response = await binding.provider.complete(
                        sent, on_text=on_text if self.stream else None,
                        time_limit=self.model.timeout or config.timeout)
            except ModelError as exc:
                redact_exception(exc)  # before it is logged: a provider may echo the key
                latency = time.perf_counter() - started
                self.calls += 1
                wait = None
                if exc.retryable and attempt < attempts:
                    wait = max(exc.retry_after or 0.0,
                               self.model.backoff.delay(attempt, self.model.rng))
                self.record_error(binding, sent, exc, latency, attempt, wait,
                                  budgeting.settle_failed(reservation, exc))
                if wait is None:
                    if exc.retryable:  # out of retries: say so, or a user retries by hand
                        exc.args = (f"{str(exc).rstrip('.')}; gave up after {attempt} "
                                    f"attempt(s) (the model's retries={config.retries})",)
                    raise
                self.restart(binding, f"{exc}; asking again (attempt {attempt + 1} of "
                                      f"{attempts})")
                await asyncio.sleep(wait)  # a 429 also paused and paced the limiter
                continue
            except BaseException:
                budgeting.settle_unknown(reservation)  # cancelled in flight: maybe paid
                raise
            latency = time.perf_counter() - started
            binding.limiter.settle(estimate, response.usage.total_tokens)
            response = response.model_copy(update={"usage": config.cost(response.usage)})
            self.calls += 1
            self.usage = self.usage + response.usage
            self.record(binding, sent, response, latency=latency,
                        ttft=first[0] if first else None, attempt=attempt, cache_hit=False,
                        booked=budgeting.settle(reservation, response.usage))
            return response, False
        raise AssertionError("unreachable")

    def cached(self, binding: _Binding) -> tuple[Generation[Any], float | None] | None:
        """The store's cached answer to this call's request for ``binding``, validated as
        a fresh one would be, and its age in seconds; ``None`` if there is none (or it
        does not validate). Recorded as a ``model_call`` with ``cache_hit`` when found.
        Used when every model of the chain is down."""
        if self.store is None:
            return None
        request, emulated = self.request(binding, list(self.messages))
        key = request.cache_key(binding.provider.identity)
        response = self._lookup(key, refused=("error", "length"))
        if response is None:
            return None
        try:
            generation = self.finish(binding, request, response, emulated, True)
        except (pydantic.ValidationError, ValueError):
            return None
        # answered from the cache, though the failed calls before it were made
        generation = dataclasses.replace(generation, cache_hit=True)
        self._replay(binding, request, response)
        return generation, self.store.cache_age(key)

    def _lookup(self, key: str, *, refused: tuple[str, ...]) -> Response | None:
        """The store's cached answer under ``key``, unless there is none or it ended with a
        ``finish_reason`` in ``refused``."""
        hit = self.store.cache_get(key) if self.store is not None else None
        response = Response.model_validate_json(hit) if hit is not None else None
        return None if response is None or response.finish_reason in refused else response

    def _replay(self, binding: _Binding, request: Request, response: Response) -> None:
        """Record and stream an answer served from the cache, as a fresh one would be."""
        self.record(binding, request, response, latency=0.0, ttft=None, attempt=0,
                    cache_hit=True)
        if response.text:
            self.publish(binding, response.text)

    def remember(self, binding: _Binding, request: Request, response: Response) -> None:
        """Cache an answer that was read: only complete ones, so that a re-run never
        replays an answer that was cut at the token limit or failed validation (the
        caller calls this only once the answer validated)."""
        if not self.use_cache or self.store is None or response.finish_reason in (
                "error", "length"):
            return
        self.store.cache_put(request.cache_key(binding.provider.identity),
                             response.model_dump_json())

    # ---------------------------------------------------------------- the log
    def _node_event(self, kind: EventKind, data: dict[str, Any], persist: bool = True) -> None:
        if self.ctx is not None:
            self.ctx.record(kind, data, persist=persist)

    def publish(self, binding: _Binding, piece: str) -> None:
        if not self.stream:
            return
        self.streamed = True
        if callable(self.stream):
            self.stream(piece)
        if self.ctx is not None:
            self._node_event(EventKind.MODEL_DELTA, {"model": binding.config.name,
                                                     "text": piece}, persist=False)

    def restart(self, binding: _Binding, note: str) -> None:
        """The text streamed so far is abandoned (a cut-off or failed stream asked again,
        an answer that did not validate asked again, the next model of the chain asked):
        a sink with ``restart(note)`` is told, and subscribers get a ``model_delta`` with
        ``restart: True``, ``note`` and no text, after which the answer starts anew.
        Nothing is said when no text was streamed since the call or its last restart."""
        if not self.streamed:
            return
        self.streamed = False
        told = getattr(self.stream, "restart", None)
        if callable(told):
            told(note)
        if self.ctx is not None:
            self._node_event(EventKind.MODEL_DELTA, {"model": binding.config.name, "text": "",
                                                     "restart": True, "note": note},
                             persist=False)

    def _blob(self, text: str) -> str | None:
        return self.store.put_blob(text) if self.store is not None else None

    def record(self, binding: _Binding, request: Request, response: Response, *,
               latency: float, ttft: float | None, attempt: int, cache_hit: bool,
               booked: dict[str, Any] | None = None) -> None:
        if self.ctx is None:
            return
        usage = response.usage
        data: dict[str, Any] = {
            "model": binding.config.name, "provider": binding.config.provider,
            "requested": binding.config.model, "served_by": response.model, "attempt": attempt,
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
        if booked:  # the budget reservation this call settled
            data.update(booked)
        if binding.config.base_url:  # who served it (which replica, when there are several)
            data["endpoint"] = binding.config.base_url
        self._node_event(EventKind.MODEL_CALL, data)

    def record_error(self, binding: _Binding, request: Request, exc: ModelError,
                     latency: float, attempt: int, retry_in: float | None,
                     booked: dict[str, Any] | None = None) -> None:
        if self.ctx is None:
            return
        self._node_event(EventKind.MODEL_CALL, {
            "model": binding.config.name, "provider": binding.config.provider,
            "requested": binding.config.model, "attempt": attempt, "error": str(exc),
            "error_type": type(exc).__name__, "status": exc.status,
            "retryable": exc.retryable, "retry_in": retry_in, "latency": round(latency, 6),
            "request": self._blob(request.model_dump_json(by_alias=True)),
            **({"endpoint": binding.config.base_url} if binding.config.base_url else {}),
            **({"purpose": self.purpose} if self.purpose else {}), **(booked or {})})

    def record_invalid(self, binding: _Binding, ask: int, problems: str, *,
                       final: bool) -> None:
        """The answer did not validate: ``re_ask`` numbers the re-ask that follows, or
        ``gave_up`` says none does (the re-asks are used up)."""
        self._node_event(EventKind.MODEL_CALL, {
            "model": binding.config.name, "invalid_output": problems,
            **({"gave_up": True} if final else {"re_ask": ask + 1})})


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
