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
6. if the model still fails, reroutes to the cheapest healthy fallback model; a model
   whose circuit breaker is open is not tried at all (:mod:`counterpoint.health`). A
   model served by several endpoints (``base_urls``) first picks the calling
   workflow's replica, and tries its other replicas when that one cannot be reached
   (:mod:`.replicas`).

Inside a running node every attempt is a ``model_call`` event in the run's log
(model, tokens, cost, latency, time to first token, and the request and response
stored once by content hash); streamed text is published to the run's
subscribers as ``model_delta`` events, and one with ``restart: True`` (a ``note``, no
text) marks text abandoned when the call is asked again (:meth:`._Call.restart`). A
failure's message (and its causes') is
redacted (``counterpoint.secrets``) before it is logged or raised.

Steps 1 to 5 are one call against one model (:mod:`.call`); binding a model to its
provider and rate limiter is :mod:`.binding`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ..context import call_owner
from ..errors import ConfigError, ModelError, ModelUnavailable, UserError
from ..health.chain import CACHED, CachedAnswer, ChainHealing
from ..health.escalation import mark as mark_escalated
from ..health.registry import health
from ..policy import Backoff
from ..secrets import redact_exception
from . import prompt
from .binding import _Binding, bind_config, bind_given
from .call import Generation, _Call
from .config import ModelConfig, ModelRegistry, load_registry
from .provider import Provider, TextSink
from .replicas import ReplicaSet, replica_set
from .sampling import Pick, check_pick, check_samples, sample
from .types import Message, Request, ToolSpec

if TYPE_CHECKING:
    from ..context import NodeContext
    from ..routing.route import Route
    from ..store import RunStore

T = TypeVar("T")

DEFAULT_BACKOFF = Backoff(initial=0.5, factor=2.0, maximum=30.0, jitter=0.5)


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
                 tpm: float | None = None, timeout: float | None = None,
                 route: Route | None = None) -> None:
        _check_options(cache=cache, retries=retries, output_retries=output_retries,
                       backoff=backoff, max_concurrency=max_concurrency, rpm=rpm, tpm=tpm,
                       timeout=timeout)
        self._registry = registry
        self.route = route
        """How ``Model("auto")`` chooses a model per call (see :mod:`counterpoint.routing`)."""
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

    @classmethod
    def auto(cls, policy: Any = "cheapest_that_passes", *, tags: Sequence[str] = (),
             check: Any = None, models: Sequence[str] = (), budget: Any = None,
             **options: Any) -> Model:
        """A model the router chooses per call: see :class:`counterpoint.routing.Route`."""
        from ..routing.route import Route
        from ..routing.router import check_policy
        check_policy(policy)  # a misspelt policy is refused here, not at the first call
        return cls("auto", route=Route(policy=policy, tags=tuple(tags), check=check,
                                       models=tuple(models), budget=budget), **options)

    @property
    def routed(self) -> bool:
        """Whether each call's model is chosen by the router (the name ``auto``)."""
        return self.named and self.name == "auto"

    def _concrete(self, name: str) -> Model:
        return Model(name, registry=self._registry, cache=self.cache, retries=self.retries,
                     output_retries=self.output_retries, backoff=self.backoff,
                     max_concurrency=self._limits[0], rpm=self._limits[1],
                     tpm=self._limits[2], timeout=self.timeout)

    @property
    def registry(self) -> ModelRegistry:
        """The configured models; its ``[health]`` settings are put in force."""
        if self._registry is None:
            self._registry = load_registry()
        health().adopt(self._registry.health)
        return self._registry

    def __repr__(self) -> str:
        return f"Model({self.name!r})"

    @property
    def named(self) -> bool:
        """Whether this model is a name resolved through the registry (not a provider
        object such as a :class:`~counterpoint.models.ScriptedModel`)."""
        return not isinstance(self._spec, Provider)

    # ---------------------------------------------------------------- resolving
    def _bind(self, spec: str | Provider | ModelConfig) -> _Binding:
        if isinstance(spec, ModelConfig):  # resolved already (one replica, see _targets)
            return bind_config(spec)
        if isinstance(spec, Provider):
            # a provider object's configuration never changes: build it once per Model
            config = self._given.get(spec)
            if config is None:
                config = self._given[spec] = ModelConfig(
                    name=spec.name, provider=type(spec).__name__,
                    model=str(getattr(spec, "model", "") or ""),
                    retries=3 if self.retries is None else self.retries,
                    max_concurrency=self._limits[0], rpm=self._limits[1], tpm=self._limits[2])
            return bind_given(config, spec)
        return bind_config(self._resolve(spec))

    def _resolve(self, name: str) -> ModelConfig:
        """The registry's configuration of ``name``, with this Model's own overrides."""
        config = self.registry.resolve(name)
        updates = {k: v for k, v in zip(("max_concurrency", "rpm", "tpm"), self._limits,
                                        strict=True) if v is not None}
        if self.retries is not None:
            updates["retries"] = self.retries
        return config.model_copy(update=updates) if updates else config

    def _targets(self, spec: str | Provider
                 ) -> list[tuple[Provider | ModelConfig, ReplicaSet | None]]:
        """Where a call to ``spec`` may go, first choice first, each to give to
        :meth:`_bind`: ``spec`` itself, or one configuration per replica in the calling
        workflow's order (see :mod:`.replicas`). Bound one at a time, when tried."""
        if isinstance(spec, Provider):
            return [(spec, None)]
        config = self._resolve(spec)
        if not config.base_urls:
            return [(config, None)]
        replicas = replica_set(config.name, config.base_urls, config.balance,
                               config.max_concurrency)
        owner = call_owner()
        return [(config.replica(url), replicas)
                for url in replicas.order(owner.workflow if owner is not None else "")]

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
                       purpose: str = ..., samples: int = ...,
                       pick: Pick = ...) -> Generation[T]: ...

    @overload
    async def generate(self, prompt_text: str | Sequence[Message] | None = None, *,
                       output: None = None, system: str | None = ...,
                       context: Sequence[str] = ..., tools: Sequence[ToolSpec] = ...,
                       tool_choice: str = ..., temperature: float = ...,
                       max_tokens: int | None = ..., stop: Sequence[str] = ...,
                       seed: int | None = ..., stream: bool | TextSink = ...,
                       ctx: NodeContext | None = ..., store: RunStore | None = ...,
                       cache: bool | None = ..., purpose: str = ..., samples: int = ...,
                       pick: Pick = ...) -> Generation[Any]: ...

    async def generate(self, prompt_text: str | Sequence[Message] | None = None, *,
                       output: type[Any] | None = None, system: str | None = None,
                       context: Sequence[str] = (), tools: Sequence[ToolSpec] = (),
                       tool_choice: str = "auto", temperature: float = 0.0,
                       max_tokens: int | None = None, stop: Sequence[str] = (),
                       seed: int | None = None, stream: bool | TextSink = False,
                       ctx: NodeContext | None = None, store: RunStore | None = None,
                       cache: bool | None = None, purpose: str = "", samples: int = 1,
                       pick: Pick = "majority") -> Generation[Any]:
        """Call the model once (plus retries, re-asks and fallbacks); see the module docstring.

        ``prompt_text`` is the user's message (or the whole conversation as
        messages). ``system`` and ``context`` are the stable prefix. ``output``
        asks for structured output and returns a validated instance. ``stream``
        publishes text deltas to the run's subscribers (and to a callable, if
        given). ``ctx`` defaults to the running node's context, if any.
        ``samples=N`` sends N samples at once, as many as the budget and deadline
        cover, and returns the one ``pick`` chooses (:mod:`.sampling`).
        """
        from ..context import current_context
        count = check_samples(samples, where=f"model {self.name}")
        check_pick(pick, where=f"model {self.name}")
        ctx = ctx if ctx is not None else current_context()
        if store is None and ctx is not None:
            store = ctx.store
        options: dict[str, Any] = dict(
            output=output, system=system, context=context, tools=tools,
            tool_choice=tool_choice, temperature=temperature, max_tokens=max_tokens,
            stop=stop, seed=seed, stream=stream, ctx=ctx, store=store, cache=cache,
            purpose=purpose)
        if self.routed:  # the router chooses the model, which then samples
            from ..routing.auto import route_call
            from ..routing.route import Route
            given = [Message.user(prompt_text)] if isinstance(prompt_text, str) else \
                list(prompt_text or ())
            return await route_call(
                self.route or Route(), self.registry, ctx=ctx, store=store, messages=given,
                system=system, context=context, max_tokens=max_tokens,
                attempt=lambda name: self._concrete(name).generate(
                    prompt_text, samples=count, pick=pick, **options))
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
        # a run's RunOptions(cache=False) (--no-cache) or the config's `cache = false` wins
        # over any call's own choice: asked to ask every time, nothing is read or written
        allowed = (ctx is None or ctx.options.cache) and (
            isinstance(self._spec, Provider) or self.registry.cache)
        chosen = cache if cache is not None else self.cache
        call = _Call(model=self, messages=messages, system=system, context=tuple(context),
                     tools=tuple(tools), tool_choice=tool_choice,
                     shape=prompt.OutputShape(output) if output is not None else None,
                     temperature=temperature, max_tokens=max_tokens, stop=tuple(stop),
                     seed=seed, stream=stream, ctx=ctx, store=store,
                     cache=chosen if allowed else False, purpose=purpose)
        chain = self._chain()
        if count > 1:
            config, first = self._first_request(chain[0], call)
            # each sample cached (unless the call, this Model, the run or the config says
            # not to): a re-run of the node after a crash is answered the samples that
            # finished
            keep = cache if cache is not None else self.cache
            each = {**options, "cache": True if keep is None else keep}
            return await sample(
                count=count, pick=pick, config=config, request=first, ctx=ctx, seed=seed,
                purpose=purpose, ask=lambda i, s: self.generate(prompt_text, **{
                    **each, "seed": s, "purpose": f"{purpose or 'call'} sample {i + 1}"}))
        errors: list[str] = []
        healing = ChainHealing([_name_of(s) for s in chain], [_key_of(s) for s in chain],
                               [self._cost(s) for s in chain], ctx,
                               lookup=(lambda: self._cached(chain, call)) if allowed else None)
        index = healing.first()
        while index is not None:
            if index == CACHED and healing.cached is not None:
                answered: Generation[Any] = healing.cached.answer
                return answered
            spec = chain[index]
            targets = self._targets(spec)
            for turn, (target, replicas) in enumerate(targets):
                binding = self._bind(target)
                try:
                    if replicas is None:
                        generation = await call.run(binding)
                    else:
                        with replicas.holding(binding.config.base_url or ""):
                            generation = await call.run(binding)
                except ModelError as exc:
                    redact_exception(exc)
                    # another replica helps only when this one could not be reached
                    sibling = turn < len(targets) - 1 and isinstance(exc, ModelUnavailable)
                    where = f" at {binding.config.base_url}" if replicas is not None else ""
                    if sibling:
                        errors.append(f"{binding.config.name}{where}: {exc}")
                        call.restart(binding, f"{binding.config.name}{where}: {exc}; asking "
                                              "another replica")
                        continue
                    index = healing.failed(index, exc)  # rerouted, or escalated: raise
                    if index is None:
                        if healing.escalation is not None:
                            mark_escalated(exc, healing.escalation)
                        if errors:
                            exc.add_note("earlier in the fallback chain: " + "; ".join(errors))
                        raise
                    errors.append(f"{binding.config.name}{where}: {exc}")
                    call.restart(binding, f"{binding.config.name}{where}: {exc}; asking the "
                                          "next model of the chain")
                    break
                healing.succeeded(index)
                return generation
        retry = healing.retry_in()
        refused = ModelUnavailable(
            f"model {self.name}: every model of its fallback chain is unavailable (circuit "
            f"open: {', '.join(healing.unavailable())}); retry in {retry:.1f}s, or add a "
            "fallback model", model=self.name, retry_after=retry)
        if healing.escalation is not None:
            mark_escalated(refused, healing.escalation)
        raise refused

    def _first_request(self, spec: str | Provider, call: _Call) -> tuple[ModelConfig, Request]:
        """The configuration and request a call would send first (to bound samples)."""
        binding = self._bind(self._targets(spec)[0][0])
        return binding.config, call.request(binding, list(call.messages))[0]

    def _cached(self, chain: Sequence[str | Provider], call: _Call) -> CachedAnswer | None:
        """An earlier answer to this call's request from the store's response cache, by
        any model of the chain (first choice first), when every model is down: read even
        if the call itself asked not to be answered from the cache (the run's and the
        config's ``cache = false`` still win: then this is never called)."""
        if call.store is None:
            return None
        for spec in chain:
            try:
                targets = self._targets(spec)
            except ConfigError:
                continue
            for target, _ in targets:
                try:
                    binding = self._bind(target)
                except ConfigError:
                    continue
                found = call.cached(binding)
                if found is not None:
                    generation, age = found
                    return CachedAnswer(model=binding.config.name, age=age,
                                        answer=generation)
        return None

    def _cost(self, spec: str | Provider) -> float:
        """What a call to ``spec`` costs, to rank fallbacks when rerouting: USD per
        million input plus output tokens (0 when unknown)."""
        if isinstance(spec, Provider):
            return 0.0
        try:
            config = self._resolve(spec)
        except ConfigError:
            return 0.0  # raised when (if ever) the call gets to it
        return (config.price_input or 0.0) + (config.price_output or 0.0)


def _name_of(spec: str | Provider) -> str:
    return spec.name if isinstance(spec, Provider) else spec


def _key_of(spec: str | Provider) -> str:
    """What a model's breaker is keyed by: its configured name, or what determines a
    provider object's answers (two objects of one name may be different servers)."""
    return spec.identity if isinstance(spec, Provider) else spec


def _check_options(*, cache: Any, retries: Any, output_retries: Any, backoff: Any,
                   max_concurrency: Any, rpm: Any, tpm: Any, timeout: Any) -> None:
    """Refuse, when the model is made, an option no call could use (``retries=-1``,
    ``timeout=nan``, ``max_concurrency=0``, ``rpm=True``...): before, each was taken as
    given and failed, or meant something else, at the first call."""
    from ..checks import number, seconds, whole
    if cache is not None and not isinstance(cache, bool):
        raise UserError(f"Model(cache=...) must be True, False or None (the cache only at "
                        f"temperature 0), got {cache!r}")
    if retries is not None:
        whole(retries, "Model(retries=...)", least=0,
              fix="leave it unset for the model's configured retries")
    whole(output_retries, "Model(output_retries=...)", least=0)
    if not isinstance(backoff, Backoff):
        raise UserError(f"Model(backoff=...) must be a cp.Backoff, got {backoff!r}; write "
                        "backoff=cp.Backoff(initial=0.5, factor=2.0)")
    if max_concurrency is not None:
        whole(max_concurrency, "Model(max_concurrency=...)", least=1,
              fix="leave it unset for no limit")
    for value, name in ((rpm, "rpm"), (tpm, "tpm")):
        if value is not None:
            number(value, f"Model({name}=...)", above=True, fix="leave it unset for no limit")
    if timeout is not None:
        seconds(timeout, "Model(timeout=...)", fix="leave it unset for the configured one")
