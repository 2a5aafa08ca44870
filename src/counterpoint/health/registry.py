"""The health of every model and tool a process calls: one breaker per target, shared.

:func:`health` gives the registry calls made now use: the process-wide one, unless
:func:`use_health` installs another around a block (a test with a
:class:`~counterpoint.testing.ManualClock`, a benchmark). Every run of the process shares
it, so a model that one run found down is skipped by the others too. A state change is
recorded as a ``health_changed`` event in the log of the run whose call caused it.

Targets are named ``model:NAME`` (the model's configured name) and ``tool:NAME``.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

from ..events import EventKind
from .breaker import Breaker, BreakerOptions, BreakerState, MonotonicClock, Now, Transition

if TYPE_CHECKING:
    from ..context import NodeContext
    from .escalation import Replanner
    from .settings import HealthSettings

CACHED_ANSWERS = 1024
"""Tool answers kept for rerouting to a cached answer (the oldest go first)."""


def model_target(name: str) -> str:
    return f"model:{name}"


def tool_target(name: str) -> str:
    return f"tool:{name}"


class HealthRegistry:
    """Breakers by target, the tools' cached answers, and who is asked when nothing is
    healthy. Safe to share between threads, event loops and runs.

    ``options`` applies to every target not named in ``per_target``. ``cached_cost`` is
    the cost of answering from an earlier answer: a model call from the run store's
    response cache when the model and its fallbacks cheaper than it are down (the
    models' costs are their price per million tokens, 0 when unknown), a
    side-effect-free tool call from the last answer the same call got (tool costs
    default to 1). ``None``: never answer from an earlier answer when rerouting.
    ``replanner``, if given, is asked when a tool call has no healthy path (see :mod:`.escalation`).
    """

    def __init__(self, options: BreakerOptions | None = None, *, clock: Now | None = None,
                 per_target: Mapping[str, BreakerOptions] | None = None,
                 cached_cost: float | None = 5.0, replanner: Replanner | None = None) -> None:
        self.options = options or BreakerOptions()
        self.clock: Now = clock or MonotonicClock()
        self.per_target = dict(per_target or {})
        self.cached_cost = cached_cost
        self.replanner = replanner
        self._breakers: dict[str, Breaker] = {}
        self._answers: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._adopted: HealthSettings | None = None
        self._layers: dict[str, HealthSettings] = {}
        """The settings adopted last from each source (``config``, ``workflow``)."""

    def adopt(self, settings: HealthSettings | None, *,
              layer: Literal["config", "workflow"] = "config") -> None:
        """Put ``settings`` in force: ``[health]`` of ``counterpoint.toml`` (``layer=
        "config"``) or a workflow's ``health:`` (``layer="workflow"``), which stands over the
        configuration's whatever the order they come in. The defaults in force replace this
        registry's, the per-model and per-tool options are added to ``per_target``. A
        breaker whose options change starts again, closed. Adopting what is already in
        force does nothing (every model call reads its registry, which adopts its file's
        settings)."""
        if not settings or self._layers.get(layer) == settings:
            return
        with self._lock:
            self._layers[layer] = settings
            config, workflow = self._layers.get("config"), self._layers.get("workflow")
            effective = workflow.over(config) if workflow and config else workflow or config
            if effective is None or effective == self._adopted:
                return
            self._adopted = effective
            if effective.defaults:
                self.options = effective.options()
            self.per_target.update(effective.per_target())
            for target, breaker in list(self._breakers.items()):
                if breaker.options != self.per_target.get(target, self.options):
                    del self._breakers[target]

    def reset(self) -> None:
        """Forget every breaker and cached answer (every target is closed again)."""
        with self._lock:
            self._breakers.clear()
            self._answers.clear()

    def breaker(self, target: str) -> Breaker:
        with self._lock:
            found = self._breakers.get(target)
            if found is None:
                found = self._breakers[target] = Breaker(
                    target, self.per_target.get(target, self.options), self.clock)
            return found

    def state(self, target: str) -> BreakerState:
        """Where ``target``'s breaker stands (closed if it was never called)."""
        return self.breaker(target).state

    def states(self) -> dict[str, BreakerState]:
        """Every known target's state, by name."""
        with self._lock:
            return {t: b.state for t, b in sorted(self._breakers.items())}

    def available(self, target: str) -> bool:
        """Whether a call to ``target`` would be let through now (changes nothing)."""
        return self.breaker(target).available()

    def acquire(self, target: str, ctx: NodeContext | None) -> bool:
        """Let a call to ``target`` through, if its breaker allows; it must end in
        :meth:`succeeded` or :meth:`failed`."""
        allowed, change = self.breaker(target).acquire()
        _record(ctx, change)
        return allowed

    def succeeded(self, target: str, latency: float, ctx: NodeContext | None) -> None:
        _record(ctx, self.breaker(target).succeeded(latency))

    def failed(self, target: str, why: str, ctx: NodeContext | None) -> None:
        _record(ctx, self.breaker(target).failed(why))

    # ------------------------------------------------------- cached tool answers
    def remember(self, key: str, answer: Any) -> None:
        """Keep ``answer`` as the last one the tool call ``key`` got (the oldest go once
        :data:`CACHED_ANSWERS` are kept)."""
        with self._lock:
            self._answers[key] = (answer, self.clock.now())
            self._answers.move_to_end(key)
            while len(self._answers) > CACHED_ANSWERS:
                self._answers.popitem(last=False)

    def cached(self, key: str) -> tuple[bool, Any, float]:
        """Whether the tool call ``key`` has a kept answer, the answer, and its age in
        seconds of the registry's clock."""
        with self._lock:
            if key in self._answers:
                answer, at = self._answers[key]
                return True, answer, max(0.0, self.clock.now() - at)
            return False, None, 0.0


def _record(ctx: NodeContext | None, change: Transition | None) -> None:
    if change is None:
        return
    if ctx is None:
        from ..context import current_context
        ctx = current_context()
    if ctx is not None:
        ctx.record(EventKind.HEALTH_CHANGED, {
            "target": change.target, "before": change.before.value,
            "after": change.after.value, "why": change.why[:500]})


_PROCESS = HealthRegistry()
_CURRENT: ContextVar[HealthRegistry | None] = ContextVar("counterpoint_health", default=None)


def health() -> HealthRegistry:
    """The registry calls made now use (the process-wide one unless :func:`use_health`
    installed another)."""
    return _CURRENT.get() or _PROCESS


@contextlib.contextmanager
def use_health(registry: HealthRegistry) -> Iterator[HealthRegistry]:
    """Use ``registry`` for the calls made inside the block (and by runs started in it:
    a run's tasks keep the context they were started in)."""
    token = _CURRENT.set(registry)
    try:
        yield registry
    finally:
        _CURRENT.reset(token)
