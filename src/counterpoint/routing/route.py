"""What a caller asks of the router: the typed options of ``model="auto"``.

:class:`Route` is what :meth:`Model.auto <counterpoint.models.Model.auto>` (and a
workflow's ``route:``) hold: the policy, the skill tags, the models to choose from, the
output check that decides whether a choice passed, and what is left of a budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from ..budget import remaining

if TYPE_CHECKING:
    from ..models.call import Generation
    from .policies import Choice, Option, RouteRequest

AUTO = "auto"
"""The model name that asks the router to choose."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetLeft:
    """What is left of a budget when a call is routed; ``None`` = unlimited.

    The router skips a model whose worst-case cost of the call (the prompt's tokens plus
    ``max_tokens`` at the model's prices) does not fit ``money``, whose tokens do not fit
    ``tokens``, or whose measured mean latency does not fit ``seconds``; a model without
    prices is skipped under a money budget. When some models would each take at most
    :data:`~counterpoint.routing.router.COMFORT_SHARE` of the money left, the policy
    chooses among those only, so choices get cheaper as the budget shrinks.
    """

    money: float | None = None
    """US dollars."""
    tokens: int | None = None
    seconds: float | None = None


Check: TypeAlias = "Callable[[Generation[Any]], bool | str | None]"
"""An output check: ``None`` or ``True`` when the answer passes; ``False`` or a string
(the problem) when it fails, which makes the router escalate to a stronger model."""

PolicyFunction: TypeAlias = "Callable[[RouteRequest, Sequence[Option]], Choice | str]"
"""A user's policy: given the request and the eligible models (never empty), the chosen
model's name, or a :class:`~counterpoint.routing.policies.Choice` with a reason."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Route:
    """How ``model="auto"`` chooses a model for each call (see :mod:`counterpoint.routing`)."""

    policy: str | PolicyFunction = "cheapest_that_passes"
    """``cheapest_that_passes``, ``quality_first``, ``latency_first`` or a function."""
    tags: tuple[str, ...] = ()
    """Skill tags of the work (``math``, ``code``, ``hard``...): success is learned per
    tag, and only models offered for every tag (or for any) are chosen."""
    models: tuple[str, ...] = ()
    """The names to choose from; empty: every configured model that has a ``quality``."""
    check: Check | None = None
    """The output check; a failed check (or invalid structured output) is escalated."""
    threshold: float = 0.5
    """The estimated success a model must have for a tag to count as plausible."""
    escalations: int = 3
    """At most this many further attempts on stronger models after a failure."""
    budget: BudgetLeft | Callable[[], BudgetLeft | None] | None = None
    """What is left of a budget, or a function asked at each choice (a budget keeper's);
    ``None``: what is left of the budgets and deadline the call runs under
    (:func:`counterpoint.budget.remaining`: the run's, the node's, an agent's)."""

    def budget_left(self) -> BudgetLeft | None:
        """The budget left now (``None`` = unlimited)."""
        if self.budget is None:
            left = remaining()
            if left.usd is None and left.tokens is None and left.seconds is None:
                return None
            return BudgetLeft(money=left.usd, tokens=left.tokens, seconds=left.seconds)
        return self.budget() if callable(self.budget) else self.budget
