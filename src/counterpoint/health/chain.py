"""Healing a model call: its fallback chain, rerouted over the models' health.

:class:`ChainHealing` is what :meth:`counterpoint.models.Model.generate` walks instead
of its plain fallback list. The model asked for goes first while its breaker lets it;
when it fails (or its breaker is open) the call is rerouted to the cheapest healthy
model left in the chain (a cost-weighted :class:`~.routes.RouteGraph`, the failed and
open models weighing infinity; ties keep the chain's order). Every failure ends as a
``rerouted`` event or, when nothing healthy is left, an ``escalated`` one, after which
the caller raises the error.

A cached answer is an alternative too (``kind="cache"``): an earlier answer to the same
request, from the run store's response cache, at the registry's ``cached_cost``. It is
looked up only when the route reaches it (the models cheaper than it are down), and
taking it is a ``rerouted`` event with ``to="cache"``, ``cached=True`` and the answer's
``age`` in seconds (``None`` when the store does not know).

Only the provider's health counts against a breaker: unreachable, 5xx, timeouts, cut
streams and unparseable answers. A rejected request, a refusal or an invalid answer
came from a model that is up, and rate limits are the limiter's business.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import MalformedResponse, ModelError, ModelUnavailable, RateLimited
from ..events import EventKind
from .escalation import Escalation
from .registry import HealthRegistry, health, model_target
from .routes import Edge, RouteGraph

if TYPE_CHECKING:
    from ..context import NodeContext

_START, _END, _CACHED = "call", "answer", "cached"
CACHED = -1
"""The index :meth:`ChainHealing.first` and :meth:`ChainHealing.failed` return when the
call is to be answered from the cache (:attr:`ChainHealing.cached`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CachedAnswer:
    """An earlier answer to the same request, standing in for a model that is down."""

    model: str
    """The model of the chain that gave it."""
    age: float | None
    """Seconds since it was cached (``None``: unknown)."""
    answer: Any
    """What the caller returns (the facade's ``Generation``)."""


def unhealthy(exc: ModelError) -> bool:
    """Whether ``exc`` says the model's provider is unhealthy (see the module docstring)."""
    return (isinstance(exc, ModelUnavailable) and not isinstance(exc, RateLimited)) or \
        isinstance(exc, MalformedResponse)


class ChainHealing:
    """One call's walk over its fallback chain (not shared between calls).

    ``names`` are the chain's model names, first choice first (as the log shows them);
    ``keys`` what their breakers are keyed by (a configured model's name, a provider
    object's identity); ``costs`` what a call to each costs (any unit, the same for all:
    the facade uses the price per million tokens, 0 when unknown). ``lookup`` finds a
    cached answer to the request (``None`` if there is none); without it, or with the
    registry's ``cached_cost`` at ``None``, no cached answer is an alternative.
    """

    def __init__(self, names: Sequence[str], keys: Sequence[str], costs: Sequence[float],
                 ctx: NodeContext | None, registry: HealthRegistry | None = None, *,
                 lookup: Callable[[], CachedAnswer | None] | None = None) -> None:
        self.names = tuple(names)
        self.targets = tuple(model_target(k) for k in keys)
        self.registry = registry or health()
        self.ctx = ctx
        self.graph = RouteGraph()
        for index, (target, cost) in enumerate(zip(self.targets, costs, strict=True)):
            self.graph.add(_START, _node(index), max(cost, 0.0), uses=target)
            self.graph.add(_node(index), _END, 0.0)
        self._lookup = lookup if self.registry.cached_cost is not None else None
        if self._lookup is not None:
            self.graph.add(_START, _CACHED, float(self.registry.cached_cost or 0.0),
                           uses="cache")
            self.graph.add(_CACHED, _END, 0.0)
        self._looked = False
        self.cached: CachedAnswer | None = None
        """The cached answer the call was rerouted to (with :data:`CACHED`)."""
        self.tried: list[int] = []
        self.started = 0.0
        self.escalation: Escalation | None = None
        """Set when no healthy model was left (the ``escalated`` event's content)."""

    def first(self) -> int | None:
        """The chain index to call first: the model asked for, unless its breaker is open
        (then the cheapest healthy other, a ``rerouted`` event); ``None`` if none is."""
        if self._acquire(0):
            return 0
        return self._reroute(0, "circuit open")

    def failed(self, index: int, exc: ModelError) -> int | None:
        """The model at ``index`` failed with ``exc``: the index to call next, or ``None``
        (the failure was escalated; the caller raises ``exc``)."""
        why = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        target = self.targets[index]
        if unhealthy(exc):
            self.registry.failed(target, why, self.ctx)
        else:
            self.registry.succeeded(target, self._elapsed(), self.ctx)
        self.tried.append(index)
        return self._reroute(index, why)

    def succeeded(self, index: int) -> None:
        self.registry.succeeded(self.targets[index], self._elapsed(), self.ctx)

    def retry_in(self) -> float:
        """Seconds until the first open breaker of the chain lets a probe through."""
        return min(self.registry.breaker(t).retry_in() for t in self.targets)

    def unavailable(self) -> list[str]:
        return [n for i, (n, t) in enumerate(zip(self.names, self.targets, strict=True))
                if i not in self.tried and not self.registry.available(t)]

    # ------------------------------------------------------------------ routing
    def _acquire(self, index: int) -> bool:
        self.started = self.registry.clock.now()
        return self.registry.acquire(self.targets[index], self.ctx)

    def _elapsed(self) -> float:
        return max(0.0, self.registry.clock.now() - self.started)

    def _reroute(self, frm: int, why: str) -> int | None:
        refused: set[int] = {frm}  # the model failed or open just now weighs infinity

        def allowed(edge: Edge) -> bool:
            if edge.uses is None:
                return True
            if edge.target == _CACHED:  # (looked up once the route gets to it)
                return not self._looked or self.cached is not None
            index = _index(edge.target)
            return index not in refused and index not in self.tried and \
                self.registry.available(edge.uses)

        while True:
            route = self.graph.cheapest(_START, _END, allowed)
            if route is None:
                self.escalation = Escalation(
                    kind="model", name=self.names[0], why=why,
                    tried=tuple(self.names[i] for i in self.tried),
                    unavailable=tuple(self.unavailable()))
                self._record(EventKind.ESCALATED, {
                    "kind": "model", "from": self.names[frm], "why": why, "to": "caller",
                    "tried": list(self.escalation.tried),
                    "unavailable": list(self.escalation.unavailable)})
                return None
            if route.edges[0].target == _CACHED:
                found = self._find_cached()
                if found is None:
                    continue  # nothing cached: the edge is left out from now on
                self._record(EventKind.REROUTED, {
                    "kind": "cache", "from": self.names[frm], "to": "cache", "why": why,
                    "cost": route.cost, "path": ["cache"], "cached": True,
                    "model": found.model,
                    "age": None if found.age is None else round(found.age, 3)})
                return CACHED
            index = _index(route.edges[0].target)
            if self._acquire(index):  # (another call may have taken the last probe)
                self._record(EventKind.REROUTED, {
                    "kind": "model", "from": self.names[frm], "to": self.names[index],
                    "why": why, "cost": route.cost, "path": list(route.calls)})
                return index
            refused.add(index)

    def _find_cached(self) -> CachedAnswer | None:
        if not self._looked and self._lookup is not None:
            self._looked = True  # looked up once per call, and only if the route gets here
            self.cached = self._lookup()
        return self.cached

    def _record(self, kind: EventKind, data: dict[str, object]) -> None:
        ctx = self.ctx
        if ctx is None:
            from ..context import current_context
            ctx = current_context()
        if ctx is not None:
            ctx.record(kind, dict(data))


def _node(index: int) -> str:
    return f"model#{index}"


def _index(node: str) -> int:
    return int(node.partition("#")[2])
