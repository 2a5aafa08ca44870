"""The router: which models are eligible for a request, and the policy's choice among them.

:meth:`Router.choose` is pure given the statistics: it filters the candidates (offered
for the request's tags; the prompt plus ``max_tokens`` fits the context window; the
worst-case cost, tokens and measured latency fit the budget left; after a failure, only
models stronger than every one that failed), narrows a money budget to the models that
would each take at most :data:`COMFORT_SHARE` of it when there are some, and asks the
policy. The result names every candidate considered and why the others were left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from .policies import POLICIES, Choice, Option, RouteRequest
from .registry import Candidate, RouteStats
from .route import BudgetLeft, PolicyFunction

COMFORT_SHARE = 0.25
"""Under a money budget, prefer models whose worst-case call takes at most this share of
what is left (so choices get cheaper as the budget shrinks)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Routed:
    """A choice with everything that went into it (the ``model_routed`` event's data)."""

    choice: Choice
    policy: str
    considered: tuple[dict[str, Any], ...]
    """Each candidate: name, quality, worst-case cost, estimated success, and ``skipped``
    (why it was not eligible) or ``eligible``."""

    def data(self) -> dict[str, Any]:
        return {"model": self.choice.model, "policy": self.policy,
                "reason": self.choice.reason, "candidates": list(self.considered)}


def policy_name(policy: str | PolicyFunction) -> str:
    if isinstance(policy, str):
        return policy
    return getattr(policy, "__qualname__", None) or type(policy).__name__


def check_policy(policy: str | PolicyFunction) -> None:
    """Raise :class:`ConfigError` for an unknown policy name."""
    if isinstance(policy, str) and policy not in POLICIES:
        raise ConfigError(f"model auto: unknown routing policy {policy!r}; use one of "
                          f"{', '.join(POLICIES)} or a function (request, options) -> name")
    if not isinstance(policy, str) and not callable(policy):
        raise ConfigError(f"model auto: policy must be a name ({', '.join(POLICIES)}) or a "
                          f"function, not {policy!r}")


@dataclass(kw_only=True, slots=True)
class Router:
    """Chooses among ``candidates`` by ``policy``, from ``stats``. Safe to share."""

    candidates: Sequence[Candidate]
    policy: str | PolicyFunction = "cheapest_that_passes"
    stats: RouteStats = field(default_factory=RouteStats)

    def __post_init__(self) -> None:
        check_policy(self.policy)
        if not self.candidates:
            raise ConfigError("model auto: the router was given no models to choose from")

    def options(self, request: RouteRequest) -> tuple[list[Option], list[dict[str, Any]]]:
        """The eligible options and the record of every candidate considered."""
        floor = max((c.quality for c in self.candidates if c.name in request.failed),
                    default=None)
        budget = request.budget
        eligible: list[Option] = []
        considered: list[dict[str, Any]] = []
        for c in self.candidates:
            cost = c.worst_cost(request.prompt_tokens, request.max_tokens)
            option = Option(name=c.name, quality=c.quality, worst_cost=cost,
                            success=self.stats.success(c.name, request.tags),
                            tries=self.stats.tries(c.name, request.tags),
                            latency=self.stats.latency(c.name))
            skipped = _skipped(c, option, request, floor)
            squeezed = skipped is not None and skipped == _over_budget(
                option, request, request.prompt_tokens + request.max_tokens)
            considered.append({"model": c.name, "quality": c.quality, "worst_cost": cost,
                               "success": round(option.success, 3), "tries": option.tries,
                               **({"skipped": skipped} if skipped else {}),
                               **({"by_budget": True} if squeezed else {})})
            if skipped is None:
                eligible.append(option)
        if budget is not None and budget.money is not None:
            comfortable = [o for o in eligible if o.worst_cost is not None
                           and o.worst_cost <= COMFORT_SHARE * budget.money]
            if comfortable and len(comfortable) < len(eligible):
                kept = {o.name for o in comfortable}
                for row in considered:
                    if "skipped" not in row and row["model"] not in kept:
                        row["skipped"] = (f"over {COMFORT_SHARE:.0%} of the ${budget.money:.6f}"
                                          " left")
                        row["by_budget"] = True
                eligible = comfortable
        return eligible, considered

    def choose(self, request: RouteRequest) -> Routed:
        """The policy's choice for ``request`` (``Choice.model`` is ``None`` when no model
        is eligible, with the reason)."""
        eligible, considered = self.options(request)
        name = policy_name(self.policy)
        if not eligible:
            why = "no stronger model left" if request.failed else "no model fits the request"
            return Routed(choice=Choice(model=None, reason=why), policy=name,
                          considered=tuple(considered))
        if isinstance(self.policy, str):
            choice = POLICIES[self.policy](request, eligible)
        else:
            answer = self.policy(request, eligible)
            choice = answer if isinstance(answer, Choice) else \
                Choice(model=answer, reason=f"chosen by {name}")
            if choice.model not in {o.name for o in eligible}:
                raise ConfigError(f"model auto: policy {name} chose {choice.model!r}, which is "
                                  f"not among the eligible models "
                                  f"{[o.name for o in eligible]}; return one of their names")
        return Routed(choice=_downgraded(choice, request, considered), policy=name,
                      considered=tuple(considered))


def _skipped(c: Candidate, option: Option, request: RouteRequest,
             floor: int | None) -> str | None:
    """Why ``c`` is not eligible for ``request`` (``None``: it is)."""
    if c.name in request.failed:
        return "failed this call"
    if floor is not None and c.quality <= floor:
        return f"not stronger than the failed model (quality {floor})"
    if not c.offers(request.tags):
        return f"not offered for {','.join(request.tags)} (tags: {','.join(c.tags)})"
    needed = request.prompt_tokens + request.max_tokens
    if c.context_window is not None and needed > c.context_window:
        return f"needs {needed} tokens, context window {c.context_window}"
    return _over_budget(option, request, needed)


def _over_budget(option: Option, request: RouteRequest, needed: int) -> str | None:
    """Why ``option`` does not fit what is left of the budget (``None``: it does)."""
    budget = request.budget
    if budget is None:
        return None
    if budget.money is not None:
        if option.worst_cost is None:
            return "unpriced, and there is a money budget"
        if option.worst_cost > budget.money:
            return f"${option.worst_cost:.6f} at most, ${budget.money:.6f} left"
    if budget.tokens is not None and needed > budget.tokens:
        return f"needs {needed} tokens, {budget.tokens} left"
    if budget.seconds is not None and option.latency is not None and \
            option.latency > budget.seconds:
        return f"mean {option.latency:.3f}s a call, {budget.seconds:.3f}s left"
    return None


def _left(budget: BudgetLeft) -> str:
    parts = ([f"${budget.money:.6f}"] if budget.money is not None else []) + (
        [f"{budget.tokens:,} tokens"] if budget.tokens is not None else []) + (
        [f"{budget.seconds:.1f}s"] if budget.seconds is not None else [])
    return ", ".join(parts)


def _downgraded(choice: Choice, request: RouteRequest,
                considered: Sequence[dict[str, Any]]) -> Choice:
    """``choice`` with its reason saying which stronger or costlier models the budget left
    ruled out (the ``model_routed`` event shows that the budget drove the choice)."""
    if choice.model is None or request.budget is None:
        return choice
    squeezed = [row["model"] for row in considered if row.get("by_budget")]
    if not squeezed:
        return choice
    return Choice(model=choice.model, reason=f"{choice.reason}; downgraded by the budget "
                  f"left ({_left(request.budget)}): skipped {', '.join(squeezed)}")
