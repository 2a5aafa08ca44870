"""A budget or deadline of the wrong type is a ``UserError`` where it is given
(``Budget``, ``RunOptions``, ``Policy``, ``Agent``, ``spending``), not an
``AttributeError`` / ``TypeError`` inside a node once the run has started."""

from __future__ import annotations

from typing import Any

import pytest

import counterpoint as cp
from counterpoint.agents import Agent
from counterpoint.budget import Budget, spending
from counterpoint.errors import UserError
from counterpoint.models import ScriptedModel


@pytest.mark.parametrize("usd", ["0.5", [1], {"usd": 1}])
def test_a_budget_of_the_wrong_type_is_a_user_error(usd: Any) -> None:
    with pytest.raises(UserError, match="Budget: usd must be a number > 0"):
        Budget(usd=usd)


@pytest.mark.parametrize("build", [
    lambda: cp.RunOptions(budget=5),  # type: ignore[arg-type]
    lambda: cp.Policy(budget=0.5),  # type: ignore[arg-type]
    lambda: Agent("a", model=cp.Model(ScriptedModel([])), budget={"usd": 1}),  # type: ignore[arg-type]
], ids=["RunOptions", "Policy", "Agent"])
def test_a_budget_that_is_not_a_budget_is_refused_where_it_is_given(build: Any) -> None:
    with pytest.raises(UserError, match=r"budget must be a counterpoint.budget.Budget.*"
                                        r"Budget\(usd=0.5\)"):
        build()


def test_spending_refuses_a_number_for_a_budget() -> None:
    with pytest.raises(UserError, match=r"spending.*budget must be"), \
            spending(0.1, where="search"):  # type: ignore[arg-type]
        pass


@pytest.mark.parametrize("deadline", ["30s", True, float("nan")])
def test_a_run_deadline_of_the_wrong_type_is_a_user_error(deadline: Any) -> None:
    with pytest.raises(UserError, match=r"RunOptions: deadline must be > 0 seconds \(a number\)"):
        cp.RunOptions(deadline=deadline)
