"""A goal run's hard budget (``goal_graph(..., budget=...)``): the planner's call is
reserved in it like any other model call, and refused when it cannot fit."""

from __future__ import annotations

import counterpoint as cp
from counterpoint.budget import Budget, account
from counterpoint.models import ScriptedModel
from counterpoint.planning import Limits, Team, goal_graph


async def test_a_goal_budget_refuses_the_planner_call_that_cannot_fit() -> None:
    unused = ScriptedModel(name="never")  # fails loudly if it is ever asked
    graph = goal_graph("Compare Lisbon and Porto", Team.default(cp.Model(unused)),
                       Limits(max_rounds=0), budget=Budget(tokens=50), deadline=600)
    store = cp.MemoryStore()
    result = await cp.run(graph, store=store)
    assert result.status == "failed"
    plan = result.state.nodes[cp.NodeId("plan")]
    assert (plan.error or {}).get("type") == "BudgetExceeded", plan.error
    created = store.events(result.run_id)[0].data or {}
    assert created["options"]["budget"] == {"tokens": 50}
    assert created["options"]["deadline"] == 600
    spent = account(store.events(result.run_id))
    assert spent is not None
    reason = spent.exhausted()
    assert reason is not None and "node 'plan'" in reason and "of 50 tokens" in reason
