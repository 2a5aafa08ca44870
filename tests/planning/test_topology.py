"""Plans of each shape get their topology, deterministically, and a goal run executes
the shape it names (read back from the nodes its log added): one agent for the whole
goal, a fan-out, a chain, or one node per independent sub-goal; ``Limits.topology``
forces one."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.models import Request, Response, ScriptedModel
from counterpoint.models.provider import TextSink
from counterpoint.planning import Limits, Team, goal_graph
from counterpoint.planning.plan import Subtask
from counterpoint.planning.team import PLANNER, SYNTHESIZER, WORKER
from counterpoint.planning.topology import (
    Shape,
    TopologyOption,
    choose_topology,
    lay_out,
    measure,
)
from counterpoint.store import MemoryStore


def _plan(needs: dict[str, list[str]]) -> list[Subtask]:
    return [Subtask(id=i, task=f"do {i}", worker="writer", needs=n) for i, n in needs.items()]


def test_each_shape() -> None:
    assert choose_topology(_plan({"t1": []})).shape is Shape.SINGLE
    chain = choose_topology(_plan({"t1": [], "t2": ["t1"], "t3": ["t2"]}))
    assert chain.shape is Shape.SEQUENTIAL and chain.measures.critical_share == 1.0
    fan = choose_topology(_plan({"t1": [], "t2": [], "t3": [], "t4": ["t1", "t2", "t3"]}))
    assert fan.shape is Shape.PARALLEL and fan.measures.width == 3
    two = choose_topology(_plan({"t1": [], "t2": ["t1"], "t3": [], "t4": ["t3"]}))
    assert two.shape is Shape.HIERARCHICAL and two.measures.components == 2
    assert choose_topology(_plan({"t1": [], "t2": ["t1"], "t3": [], "t4": ["t3"]})) == two


# ------------------------------------------------------------- lay-out, pure
def test_lay_out_of_each_shape() -> None:
    plan = _plan({"t1": [], "t2": ["t1"], "t3": [], "t4": ["t3"]})
    assert lay_out(plan, Shape.PARALLEL, "g") == plan
    chain = lay_out(plan, Shape.SEQUENTIAL, "g")
    assert [(s.id, s.needs) for s in chain] == [("t1", []), ("t2", ["t1"]), ("t3", ["t2"]),
                                                ("t4", ["t3"])]
    [solo] = lay_out(plan, Shape.SINGLE, "the goal")
    assert solo.id == "t1" and solo.needs == [] and "the whole goal: the goal" in solo.task
    assert "(1) do t1; (2) do t2; (3) do t3; (4) do t4" in solo.task
    groups = lay_out(plan, Shape.HIERARCHICAL, "g")
    assert [(s.id, s.needs) for s in groups] == [("t1", []), ("t2", [])]
    assert "(1) do t1; (2) do t2" in groups[0].task and "(1) do t3; (2) do t4" in groups[1].task


def test_a_chain_follows_what_each_subtask_needs_not_the_listing() -> None:
    listed = _plan({"t1": ["t2"], "t2": []})  # a plan may list one before what it needs
    assert [(s.id, s.needs) for s in lay_out(listed, Shape.SEQUENTIAL, "g")] == \
        [("t2", []), ("t1", ["t2"])]
    assert measure(listed).depth == 2


def test_an_unknown_topology_is_refused() -> None:
    with pytest.raises(cp.UserError, match=r"topology 'star' \(--topology, or "
                       r"Limits\(topology=\)\) is not one of auto, single"):
        Limits(topology="star")  # type: ignore[arg-type]


# ------------------------------------------------------ goal runs, from the log
class Crew(ScriptedModel):
    """Every role of the default team, answered from the request."""

    def __init__(self, plan: dict[str, list[str]]) -> None:
        super().__init__(name="topology-crew")
        self.plan = {"subtasks": [_sub(i, n) for i, n in plan.items()]}
        self.tasks: list[str] = []

    async def complete(self, request: Request, *, on_text: TextSink | None = None,
                       time_limit: float | None = None) -> Response:
        system = request.messages[0].content if request.messages[0].role == "system" else ""
        users = [m.content for m in request.messages if m.role == "user"]
        if system.startswith(PLANNER):
            text = json.dumps(self.plan)
        elif system.startswith(WORKER):
            found = re.search(r"Your subtask \(([^)]+)\): (.*)", users[0])
            assert found is not None
            self.tasks.append(found.group(2))
            text = f"{found.group(1)} done"
        elif system.startswith(SYNTHESIZER):
            text = "the answer"
        else:
            raise AssertionError(f"unexpected call: {system[:60]!r}")
        self.add(text)
        return await super().complete(request, on_text=on_text, time_limit=time_limit)


def _sub(sid: str, needs: list[str]) -> dict[str, Any]:
    return {"id": sid, "task": f"do {sid}", "worker": "writer", "needs": needs,
            "expected": ""}


async def _goal(plan: dict[str, list[str]], topology: TopologyOption
                ) -> tuple[Crew, dict[str, set[str]], dict[str, Any]]:
    """Run a goal; the subtask nodes the plan's edit added, each with what it waits for
    (read from the log), and the ``topology_chosen`` record."""
    crew = Crew(plan)
    store = MemoryStore()
    graph = goal_graph("the goal", Team.default(cp.Model(crew)),
                       Limits(max_rounds=0, topology=topology))
    result = await asyncio.wait_for(cp.run(graph, store=store), 20.0)
    assert result.ok, {k: (v.status.value, v.error) for k, v in result.nodes.items()}
    events = store.events(result.run_id)
    [edit] = [e.data or {} for e in events if e.kind is EventKind.PATCH_APPLIED]
    waits = {spec["id"]: set(spec.get("after") or []) |
             {v["$ref"] for v in spec["inputs"].values() if isinstance(v, dict) and "$ref" in v}
             for spec in edit["add"] if spec["id"] != "answer"}
    [chosen] = [e.data or {} for e in events if e.kind is EventKind.TOPOLOGY_CHOSEN]
    return crew, waits, chosen


async def test_auto_fans_out_independent_subtasks_then_synthesizes() -> None:
    _, waits, chosen = await _goal({"t1": [], "t2": [], "t3": [], "t4": ["t1", "t2", "t3"]},
                                   "auto")
    assert chosen["shape"] == "parallel" and chosen["forced"] is False
    assert waits == {"t1": set(), "t2": set(), "t3": set(), "t4": {"t1", "t2", "t3"}}


async def test_a_forced_chain_runs_one_subtask_after_another() -> None:
    _, waits, chosen = await _goal({"t1": [], "t2": [], "t3": []}, "sequential")
    assert chosen["shape"] == "sequential" and chosen["forced"] is True
    assert waits == {"t1": set(), "t2": {"t1"}, "t3": {"t2"}}


async def test_a_single_agent_does_the_whole_goal() -> None:
    crew, waits, chosen = await _goal({"t1": [], "t2": [], "t3": ["t1"]}, "single")
    assert chosen["shape"] == "single" and chosen["nodes"] == ["t1"]
    assert waits == {"t1": set()}
    [task] = crew.tasks  # one worker call for the whole goal
    assert task.startswith("Do the whole goal: the goal, in these steps: (1) do t1")


async def test_auto_gives_each_independent_group_its_own_sub_goal() -> None:
    crew, waits, chosen = await _goal({"t1": [], "t2": ["t1"], "t3": [], "t4": ["t3"]},
                                      "auto")
    assert chosen["shape"] == "hierarchical" and chosen["components"] == 2
    assert waits == {"t1": set(), "t2": set()}  # the two sub-goals run at once
    assert sorted(crew.tasks) == ["Do sub-goal 1 of the goal, in these steps: (1) do t1; "
                                  "(2) do t2", "Do sub-goal 2 of the goal, in these steps: "
                                  "(1) do t3; (2) do t4"]
