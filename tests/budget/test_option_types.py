"""A budget or deadline of the wrong type is a ``UserError`` where it is given
(``Budget``, ``RunOptions``, ``Policy``, ``Agent``, ``spending``), not an
``AttributeError`` / ``TypeError`` inside a node once the run has started."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.agents import Agent
from counterpoint.budget import Budget, spending
from counterpoint.errors import UserError
from counterpoint.models import ScriptedModel


@pytest.mark.parametrize("usd", ["0.5", [1], {"usd": 1}])
def test_a_budget_of_the_wrong_type_is_a_user_error(usd: Any) -> None:
    with pytest.raises(UserError, match="Budget: usd must be a finite number > 0"):
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


@pytest.mark.parametrize("usd", [math.inf, math.nan, -1.0, 0, True])
def test_a_budget_of_infinite_or_no_money_says_to_leave_usd_unset(usd: Any) -> None:
    """Before, ``Budget(usd=float("inf"))`` was accepted as a cap (shown as ``$inf``)."""
    with pytest.raises(UserError, match=rf"^Budget: usd must be a finite number > 0, got "
                                        rf"{re.escape(repr(usd))}; leave usd unset for no "
                                        r"limit on money, e.g. Budget\(tokens=20_000\)$"):
        Budget(usd=usd)


@pytest.mark.parametrize("tokens", [math.inf, 0, -5, True, 2.5])
def test_a_budget_of_tokens_that_is_not_a_count_says_to_leave_tokens_unset(
        tokens: Any) -> None:
    with pytest.raises(UserError, match=r"^Budget: tokens must be .*; leave tokens unset for "
                                        r"no limit on tokens"):
        Budget(tokens=tokens)


@pytest.mark.parametrize(("build", "said"), [
    (lambda: cp.RunOptions(deadline=math.inf),
     r"deadline must be > 0 seconds \(a number\), got inf; leave deadline unset \(None\) "
     "for no deadline"),
    (lambda: cp.RunOptions(max_concurrency=math.inf),
     r"max_concurrency must be a whole number >= 1, got inf \(float\); leave "
     r"max_concurrency unset \(None\) for no limit"),
    (lambda: cp.RunOptions(limits={"gpu": math.inf}),
     r"limit 'gpu' must be a whole number >= 1, got inf \(float\); leave the name out of "
     "limits"),
    (lambda: cp.RunOptions(limits={3: 1}), r"limits: a resource name must be a non-empty "
                                           r"string, as in resources=\{'openai': 1\}, got 3"),
    (lambda: cp.RunOptions(seed=math.nan), r"seed must be a whole number \(an int\), got nan"),
    (lambda: cp.RunOptions(seed=True), r"seed must be a whole number \(an int\), got True"),
    (lambda: cp.RunOptions(fail_fast="yes"), r"fail_fast must be True or False, got 'yes'"),
    (lambda: cp.RunOptions(cache=None), r"cache must be True or False, got None"),
    (lambda: cp.RunOptions(detach_when_waiting=1),
     r"detach_when_waiting must be True or False, got 1 \(int\)"),
], ids=["deadline-inf", "concurrency-inf", "limit-inf", "limit-name-int", "seed-nan",
        "seed-bool", "fail-fast-str", "cache-none", "detach-int"])
def test_run_options_refuse_what_makes_no_sense_saying_what_to_write(build: Any,
                                                                     said: str) -> None:
    """Before, a seed of NaN or ``"1"``, ``cache=None`` (read as off) and a limit named
    ``3`` were accepted."""
    with pytest.raises(UserError, match=rf"^RunOptions: {said}"):
        build()


def test_run_options_that_make_sense_are_kept() -> None:
    options = cp.RunOptions(max_concurrency=2, deadline=1.5, seed=-1, fail_fast=True,
                            cache=False, limits={"gpu": 1}, budget=Budget(usd=0.5))
    assert cp.RunOptions.from_data(options.as_data()) == options
