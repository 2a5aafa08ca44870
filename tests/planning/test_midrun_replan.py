"""Mid-run re-plans: a checked subtask (``Limits.check``) whose redone result still has
gaps asks the re-planner at once, while other subtasks are pending or running, and its
edits are one live edit: a running subtask it cancels is interrupted, the subtasks that
need a cancelled one end cancelled, a subtask that has not started may be rewritten,
added subtasks run, and the waiting verify round and the answer take the plan as it
now stands. The decision is a ``plan_round`` before the edit, so a run resumed from
any point of its log does not ask again; and a mid-run re-plan uses a round.

One model plays every role; it answers from the request alone (never from the order
of calls), so a resumed run gets the answers the first run got. The worker of ``t2``
blocks until the test releases it, so it is provably in flight when it is cancelled.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import counterpoint as cp
from counterpoint.cli.render import round_lines
from counterpoint.events import Event, EventKind
from counterpoint.models import Request, Response, ScriptedModel
from counterpoint.models.provider import TextSink
from counterpoint.planning import Limits, Team, goal_graph
from counterpoint.planning.team import PLANNER, REPLANNER, SYNTHESIZER, VERIFIER, WORKER
from counterpoint.state import NodeStatus
from counterpoint.store import MemoryStore

WAIT = 10.0
"""Seconds before a test gives up waiting for something that should happen at once."""

ROLES = ((PLANNER, "planner"), (REPLANNER, "replanner"), (VERIFIER, "verifier"),
         (SYNTHESIZER, "synthesizer"), (WORKER, "worker"))
SUBTASK = re.compile(r"Your subtask \(([^)]+)\): (.*)")
REDO = "A first attempt had these problems"
REASON = "re-plan after the check of t1"
COMPLETE: dict[str, Any] = {"complete": True, "gaps": []}


def _sub(sid: str, needs: Sequence[str] = (), task: str = "") -> dict[str, Any]:
    return {"id": sid, "task": task or f"do {sid}", "worker": "writer", "needs": list(needs),
            "expected": ""}


class Crew(ScriptedModel):
    """Every role of the default team, answered from the request.

    The worker of ``t2`` marks itself started and then waits for :attr:`release`
    (never set unless a test sets it); the first attempt of ``t1``'s worker waits until
    ``t2`` has started, so ``t1`` is checked while ``t2`` runs. Checks of a subtask's
    result always find a gap (so the redone ``t1`` still has one); verify rounds pass.
    Re-planners are answered in order (the last answer repeats).
    """

    def __init__(self, plan: Sequence[dict[str, Any]], replans: Sequence[dict[str, Any]],
                 answer: str = "Lisbon [t1], costs [t4].", block: str = "t2") -> None:
        super().__init__(name="crew")
        self.plan = {"subtasks": list(plan)}
        self.replans = list(replans)
        self.answer = answer
        self.block = block
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.asked: Counter[str] = Counter()
        self.by_role: dict[str, list[Request]] = {}

    async def complete(self, request: Request, *, on_text: TextSink | None = None,
                       time_limit: float | None = None) -> Response:
        system = request.messages[0].content if request.messages[0].role == "system" else ""
        role = next((r for prompt, r in ROLES if system.startswith(prompt)), "unknown")
        users = [m.content for m in request.messages if m.role == "user"]
        self.asked[role] += 1
        self.by_role.setdefault(role, []).append(request)
        if role == "worker":
            found = SUBTASK.search(users[0])
            assert found is not None, users[0]
            sid, task = found.groups()
            self.asked[f"worker {sid}"] += 1
            if sid == self.block:
                self.started.set()
                await self.release.wait()
            elif sid == "t1" and REDO not in users[-1]:
                await self.started.wait()
            text = f"{sid}: {task}" + (" (again)" if REDO in users[-1] else "")
        elif role == "planner":
            text = json.dumps(self.plan)
        elif role == "replanner":
            text = json.dumps(self.replans.pop(0) if len(self.replans) > 1 else self.replans[0])
        elif role == "verifier":
            check = "\n\nSubtask [" in users[-1]
            text = json.dumps({"complete": False, "gaps": [{"problem": "no sources"}]}
                              if check else COMPLETE)
        elif role == "synthesizer":
            text = self.answer
        else:
            raise AssertionError(f"no role answers {system[:80]!r}")
        self.add(text)
        return await super().complete(request, on_text=on_text, time_limit=time_limit)

    def team(self) -> Team:
        return Team.default(cp.Model(self))


PLAN = [_sub("t1"), _sub("t2"), _sub("t3", needs=["t2"])]
REPLAN = {"cancel": ["t2"], "add": [_sub("t4", needs=["t1"], task="estimate the costs")]}
# the plan runs as planned (a DAG): these tests are about re-plans, not topology
LIMITS = Limits(topology="parallel", max_rounds=2, check=("t1",))


def _ok(result: cp.RunResult) -> None:
    assert result.ok, {k: (v.status.value, v.error) for k, v in result.nodes.items()}


def _rounds(events: Sequence[Event], phase: str) -> list[dict[str, Any]]:
    return [e.data or {} for e in events if e.kind is EventKind.PLAN_ROUND
            and (e.data or {}).get("phase") == phase]


def _shown(request: Request) -> list[str]:
    """The subtask ids a verify, re-plan or synthesize prompt lists."""
    return re.findall(r"^\[([^\]]+)\] ", request.messages[-1].content, flags=re.M)


def _purposes(events: Sequence[Event]) -> list[str]:
    return [str((e.data or {}).get("purpose", "")) for e in events
            if e.kind is EventKind.MODEL_CALL]


async def _run(crew: Crew, limits: Limits = LIMITS,
               store: MemoryStore | None = None) -> tuple[cp.RunResult, list[Event]]:
    store = store or MemoryStore()
    result = await asyncio.wait_for(cp.run(goal_graph("goal", crew.team(), limits),
                                           store=store), WAIT)
    _ok(result)
    return result, store.events(result.run_id)


# ---------------------------------------------------------------- the cancel
async def test_a_midrun_replan_cancels_a_running_subtask_and_its_dependent() -> None:
    crew = Crew(PLAN, [REPLAN])
    result, events = await _run(crew)
    nodes = result.nodes
    # t2 was in flight (its worker had started and never returned) when the edit came
    assert crew.started.is_set() and not crew.release.is_set()
    assert nodes["t2"].status is NodeStatus.CANCELLED
    assert nodes["t2"].error == {"reason": REASON}
    assert nodes["t3"].status is NodeStatus.CANCELLED  # it needs t2; it never started
    assert nodes["t3"].error == {"reason": REASON}
    assert crew.asked["worker t3"] == 0
    started = [e.node for e in events if e.kind is EventKind.NODE_STARTED]
    assert "t3" not in started and "t2" in started
    # the replacement ran, after the result it needs
    assert nodes["t4"].status is NodeStatus.SUCCEEDED
    assert result["t4"] == "t4: estimate the costs"
    assert result["t1"] == "t1: do t1 (again)"
    # the decision is in the log, before the edit it led to
    [replan] = _rounds(events, "replan")
    assert replan == {"phase": "replan", "midrun": True, "after": "t1", "round": 1,
                      "applied": True, "added": ["t4"], "redone": [],
                      "cancelled": ["t2", "t3"], "interrupted": ["t2", "t3"],
                      "edits": {"add": [_sub("t4", needs=["t1"], task="estimate the costs")],
                                "redo": [], "cancel": ["t2"]}}
    at = {id(e): i for i, e in enumerate(events)}
    [decision] = [e for e in events if e.kind is EventKind.PLAN_ROUND
                  and (e.data or {}).get("phase") == "replan"]
    [edit] = [e for e in events if e.kind is EventKind.PATCH_APPLIED
              and (e.data or {}).get("reason") == REASON]
    assert at[id(decision)] < at[id(edit)]
    data = edit.data or {}
    assert data["cancel"] == ["t2", "t3"] and [s["id"] for s in data["add"]] == ["t4"]
    # the waiting verify round and the answer were rewritten to the plan as it stands
    rewritten = {s["id"]: s for s in data["replace"]}
    assert sorted(rewritten) == ["answer", "verify-1"]
    refs = {v["$ref"] for v in rewritten["verify-1"]["inputs"].values() if "$ref" in v}
    assert refs == {"t1", "t4"} and rewritten["answer"]["after"] == ["verify-1"]
    plan = rewritten["verify-1"]["inputs"]["plan"]["$lit"]
    assert [s["id"] for s in plan["subtasks"]] == ["t1", "t4"]
    assert plan["cancelled"] == ["t2", "t3"] and plan["midrun"] == 1
    # the re-planner saw t2 running and t3 waiting; it was asked once
    [asked] = crew.by_role["replanner"]
    text = asked.messages[-1].content
    assert "result: (running)" in text and "result: (not started)" in text
    assert "Subtask t1 was checked, redone with the verifier's feedback" in text
    assert [p for p in _purposes(events) if p.startswith("replan")] == ["replan t1.1"]
    # the mid-run re-plan used a round: verify-1 is the last; it passed
    assert sorted(nodes) == ["answer", "plan", "t1", "t2", "t3", "t4", "verify-1"]
    assert result["verify-1"] == {"round": 1, "complete": True, "gaps": []}
    assert _shown(crew.by_role["verifier"][-1]) == ["t1", "t4"]
    assert _shown(crew.by_role["synthesizer"][0]) == ["t1", "t4"]
    assert result["answer"] == {"answer": "Lisbon [t1], costs [t4].", "cited": ["t1", "t4"],
                                "rounds": 1}
    assert [c["phase"] for c in (e.data or {} for e in events
                                 if e.kind is EventKind.PLAN_ROUND)] == \
        ["plan", "check", "check", "recheck", "replan", "verify"]
    assert round_lines(replan) == [
        "re-plan after the check of t1 (round 1): added ['t4'], redoing [], cancelled "
        "['t2', 't3'] (left out of the answer; stopped ['t2', 't3'] before they finished)"]
    assert round_lines(_rounds(events, "recheck")[0]) == [
        "check t1 again: no sources (re-planning now)"]


async def test_a_midrun_replan_may_rewrite_a_subtask_that_has_not_started() -> None:
    crew = Crew([_sub("t1"), _sub("t2", needs=["t1"])],
                [{"redo": [{"id": "t1", "task": "again"}]},
                 {"redo": [{"id": "t2", "task": "do t2 with sources"}]}],
                answer="Done [t1] [t2].", block="")
    crew.started.set()  # nothing blocks
    result, events = await _run(crew)
    # t1 is the node re-planning (it has started): it cannot be rewritten; t2 waits for it
    reask = crew.by_role["replanner"][1].messages[-1].content
    assert ("subtask 't1' has started; it cannot be redone now: cancel it and add a new "
            "subtask instead") in reask
    [replan] = _rounds(events, "replan")
    assert replan["redone"] == ["t2"] and "cancelled" not in replan
    [edit] = [e.data or {} for e in events if e.kind is EventKind.PATCH_APPLIED
              and (e.data or {}).get("reason") == REASON]
    assert sorted(s["id"] for s in edit["replace"]) == ["answer", "t2", "verify-1"]
    assert edit["cancel"] == [] and edit["add"] == []
    # the node kept its id and ran the new task
    assert sorted(result.nodes) == ["answer", "plan", "t1", "t2", "verify-1"]
    assert result["t2"] == "t2: do t2 with sources"
    assert crew.asked["worker t2"] == 1


async def test_a_midrun_replan_may_cancel_the_subtask_that_asked() -> None:
    crew = Crew([_sub("t1"), _sub("t2", needs=["t1"])],
                [{"cancel": ["t1"], "add": [_sub("t3")]}], answer="Done [t3].", block="")
    crew.started.set()
    result, events = await _run(crew)
    # t1 ends with its result (it was the node re-planning), but leaves the plan; t2,
    # which needs it, is cancelled before it starts; t3 replaces them
    assert result.nodes["t1"].status is NodeStatus.SUCCEEDED
    assert result.nodes["t2"].status is NodeStatus.CANCELLED
    assert result.nodes["t2"].error == {"reason": REASON}
    [replan] = _rounds(events, "replan")
    assert replan["cancelled"] == ["t1", "t2"] and replan["interrupted"] == ["t2"]
    assert _shown(crew.by_role["synthesizer"][0]) == ["t3"]
    assert result["answer"]["cited"] == ["t3"]


async def test_a_midrun_replan_needs_a_round_for_itself_and_one_after_it() -> None:
    crew = Crew([_sub("t1"), _sub("t2")], [REPLAN], answer="Done [t1].", block="")
    crew.started.set()
    result, events = await _run(crew, Limits(topology="parallel", max_rounds=1, check=("t1",)))
    # one round: verify-1 only; the redone t1 is not checked again, nothing re-plans
    assert _rounds(events, "recheck") == [] and _rounds(events, "replan") == []
    assert crew.asked["replanner"] == 0
    assert sorted(result.nodes) == ["answer", "plan", "t1", "t2", "verify-1"]


async def test_a_failed_midrun_replan_lets_the_plan_run_on() -> None:
    crew = Crew([_sub("t1"), _sub("t2")], [{"cancel": ["t9"]}], answer="Done [t1].",
                block="")
    crew.started.set()
    result, events = await _run(crew, Limits(topology="parallel", max_rounds=2,
                                             check=("t1",), plan_attempts=1))
    [replan] = _rounds(events, "replan")
    assert replan["applied"] is False
    assert replan["problems"] == ["cancel names unknown subtask 't9'"]
    assert round_lines(replan) == [
        "re-plan after the check of t1 (round 1): no valid edit (cancel names unknown "
        "subtask 't9'); the plan runs on"]
    assert not [e for e in events if e.kind is EventKind.PATCH_APPLIED
                and (e.data or {}).get("reason") == REASON]
    assert sorted(result.nodes) == ["answer", "plan", "t1", "t2", "verify-1"]


# ---------------------------------------------------------------- resuming
def _lost_cancel(log: Sequence[Event], cut: int) -> bool:
    """Whether ``log[:cut]`` has the edit that cancels t2 but not t2's cancellation."""
    prefix = log[:cut]
    return any(e.kind is EventKind.PATCH_APPLIED and (e.data or {}).get("reason") == REASON
               for e in prefix) and not any(
        e.kind is EventKind.NODE_CANCELLED and e.node == "t2" for e in prefix)


async def test_a_run_with_a_midrun_replan_resumes_from_wherever_its_log_stops() -> None:
    store = MemoryStore()
    reference, log = await _run(Crew(PLAN, [REPLAN]), store=store)
    expected = {node: (r.status, r.output) for node, r in reference.nodes.items()}
    assert log[-1].kind is EventKind.RUN_FINISHED
    decided_at = next(i for i, e in enumerate(log) if e.kind is EventKind.PLAN_ROUND
                      and (e.data or {}).get("phase") == "replan")
    lost = [cut for cut in range(1, len(log) - 1) if _lost_cancel(log, cut)]
    assert lost  # the edit and t2's cancellation are separate events
    for cut in range(1, len(log) - 1):
        prefix = log[:cut]
        again = MemoryStore()
        for event in prefix:
            again.append(reference.run_id, event)
        crew = Crew(PLAN, [REPLAN])
        where = f"resumed after event {cut} ({prefix[-1].kind.value} {prefix[-1].node})"
        result = await asyncio.wait_for(cp.resume(
            reference.run_id, store=again, graph=goal_graph("goal", crew.team(), LIMITS)),
            WAIT)
        _ok(result)
        got = {node: (r.status, r.output) for node, r in result.nodes.items()}
        if cut in lost:
            # the edit that cancels t2 is logged, t2's cancellation is not: the resume ends
            # t2 (and t3, which needs it) cancelled instead of running them again
            assert crew.asked["worker t2"] == crew.asked["worker t3"] == 0, where
        assert got == expected, where
        after = again.events(reference.run_id)[cut:]
        asked = [p for p in _purposes(after) if p.startswith("replan")]
        if cut > decided_at:
            assert asked == [], f"{where}: the re-planner was asked again"
        else:
            assert asked == ["replan t1.1"], where
        reasons = [(e.data or {})["reason"] for e in again.events(reference.run_id)
                   if e.kind is EventKind.PATCH_APPLIED]
        assert len(reasons) == len(set(reasons)), f"{where}: an edit was applied twice"
        assert result.nodes["t2"].error == {"reason": REASON}, where


async def test_a_resumed_run_finishes_the_cancels_of_a_recorded_edit() -> None:
    store = MemoryStore()
    reference, log = await _run(Crew(PLAN, [REPLAN]), store=store)
    cut = next(i for i, e in enumerate(log) if e.kind is EventKind.PATCH_APPLIED
               and (e.data or {}).get("reason") == REASON) + 1
    again = MemoryStore()
    for event in log[:cut]:
        again.append(reference.run_id, event)
    crew = Crew(PLAN, [REPLAN])
    result = await asyncio.wait_for(cp.resume(
        reference.run_id, store=again, graph=goal_graph("goal", crew.team(), LIMITS)), WAIT)
    assert result.nodes["t2"].status is NodeStatus.CANCELLED
    assert result.nodes["t3"].status is NodeStatus.CANCELLED
