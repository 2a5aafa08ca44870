"""The routing policies: given a request and the eligible models, choose one.

A policy is a pure function of a :class:`RouteRequest` and the :class:`Option` list the
router built (never empty: the models that fit the request's context, budget, tags and
escalation); it returns a :class:`Choice` with its reason. The built-in ones are in
:data:`POLICIES`; a user's function has the same shape (see
:data:`~counterpoint.routing.route.PolicyFunction`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .route import BudgetLeft


@dataclass(frozen=True, kw_only=True, slots=True)
class RouteRequest:
    """One call to route."""

    node: str | None
    """The node (subtask, agent) making the call, if any."""
    tags: tuple[str, ...]
    prompt_tokens: int
    """Estimated tokens of the prompt."""
    max_tokens: int
    """The answer's token bound."""
    budget: BudgetLeft | None = None
    """What is left of a budget (``None`` = unlimited); see :class:`BudgetLeft`."""
    threshold: float = 0.5
    """The estimated success that counts as plausible."""
    failed: tuple[str, ...] = ()
    """Models that already failed this call (the router escalates past them)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Option:
    """An eligible model as a policy sees it."""

    name: str
    quality: int
    worst_cost: float | None
    """The most this call can cost on it (``None``: unpriced)."""
    success: float
    """Estimated chance of passing for the request's tags (learned, with a prior)."""
    tries: int
    """Outcomes measured for those tags."""
    latency: float | None
    """Measured mean seconds per call (``None``: never measured)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Choice:
    """A policy's answer: the model to call (``None``: none left) and why."""

    model: str | None
    reason: str


def _cost_key(option: Option) -> tuple[float, int]:
    cost = option.worst_cost if option.worst_cost is not None else math.inf
    return cost, -option.quality


def _money(option: Option) -> str:
    return "unpriced" if option.worst_cost is None else f"${option.worst_cost:.6f} at most"


def cheapest_that_passes(request: RouteRequest, options: Sequence[Option]) -> Choice:
    """The cheapest model whose estimated success for the tags is plausible; if none is,
    the one most likely to pass."""
    tags = ",".join(request.tags) or "any tag"
    plausible = [o for o in options if o.success >= request.threshold]
    if plausible:
        best = min(plausible, key=_cost_key)
        return Choice(model=best.name, reason=(
            f"cheapest plausible for {tags}: est. success {best.success:.2f} >= "
            f"{request.threshold:g} over {best.tries} tries, {_money(best)}"))
    best = max(options, key=lambda o: (o.success, o.quality))
    return Choice(model=best.name, reason=(
        f"none plausible for {tags} (>= {request.threshold:g}); most likely to pass: est. "
        f"{best.success:.2f}, {_money(best)}"))


def quality_first(request: RouteRequest, options: Sequence[Option]) -> Choice:
    """The strongest model (highest quality, then most likely to pass, then cheapest)."""
    best = max(options, key=lambda o: (o.quality, o.success, -_cost_key(o)[0]))
    return Choice(model=best.name, reason=f"strongest eligible (quality {best.quality}), "
                                          f"{_money(best)}")


def latency_first(request: RouteRequest, options: Sequence[Option]) -> Choice:
    """The fastest plausible model by measured mean latency (an unmeasured one first, to
    measure it); if none is plausible, the fastest of all."""
    plausible = [o for o in options if o.success >= request.threshold] or list(options)
    best = min(plausible, key=lambda o: (o.latency or 0.0, _cost_key(o)))
    measured = "unmeasured" if best.latency is None else f"mean {best.latency:.3f}s a call"
    return Choice(model=best.name, reason=f"fastest plausible: {measured}, est. success "
                                          f"{best.success:.2f}")


BuiltinPolicy = Callable[[RouteRequest, Sequence[Option]], Choice]

POLICIES: dict[str, BuiltinPolicy] = {
    "cheapest_that_passes": cheapest_that_passes,
    "quality_first": quality_first,
    "latency_first": latency_first,
}
"""The built-in policies by name."""
