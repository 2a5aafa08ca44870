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


@pytest.mark.parametrize(("build", "said"), [
    (lambda: cp.RunOptions(max_concurrency="3"),
     r"RunOptions: max_concurrency must be a whole number >= 1, got '3' \(str\)"),
    (lambda: cp.RunOptions(max_concurrency=2.5),
     r"RunOptions: max_concurrency must be a whole number >= 1, got 2.5 \(float\)"),
    (lambda: cp.RunOptions(max_concurrency=0), r"RunOptions: max_concurrency must be >= 1, got 0"),
    (lambda: cp.RunOptions(limits={"openai": "4"}),
     r"RunOptions: limit 'openai' must be a whole number >= 1, got '4'"),
    (lambda: cp.RunOptions(limits=4), r"RunOptions: limits must be a mapping"),
    (lambda: cp.Policy(retries="2"), r"Policy.retries must be a whole number >= 0, got '2'"),
    (lambda: cp.Policy(retries=True), r"Policy.retries must be a whole number >= 0, got True"),
    (lambda: cp.Policy(timeout="5"), r"Policy.timeout must be > 0 seconds \(a number\), got '5'"),
    (lambda: cp.Policy(resources={"gpu": 0}), r"Policy.resources\['gpu'\] must be >= 1, got 0"),
], ids=["concurrency-str", "concurrency-float", "concurrency-0", "limit-str", "limits-int",
        "retries-str", "retries-bool", "timeout-str", "resources-0"])
def test_counts_and_seconds_of_the_wrong_type_are_user_errors(build: Any, said: str) -> None:
    """Before, a string for a count got ``TypeError: '<' not supported between instances
    of 'str' and 'int'`` from inside the options' own check."""
    with pytest.raises(UserError, match=said):
        build()
