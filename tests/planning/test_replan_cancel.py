"""Re-plans that cancel subtasks: a cancelled subtask, and every subtask that needs it,
leave the plan (the next verify round and the answer no longer take their results),
invalid cancels are re-asked with their problems, a cancelled id is never used again,
and the round is shown as it happened.

One scripted model plays every role of the default team; plans, verdicts and re-plans
are answered in order (the last one repeats).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import counterpoint as cp
from counterpoint.cli.render import round_lines
from counterpoint.events import Event, EventKind
from counterpoint.models import Request, ScriptedModel
from counterpoint.planning import Limits, Team, goal_graph
from counterpoint.planning.team import PLANNER, REPLANNER, SYNTHESIZER, VERIFIER, WORKER
from counterpoint.store import MemoryStore

WAIT = 10.0
ROLES = ((PLANNER, "planner"), (REPLANNER, "replanner"), (VERIFIER, "verifier"),
         (SYNTHESIZER, "synthesizer"), (WORKER, "worker"))
SUBTASK = re.compile(r"Your subtask \(([^)]+)\): (.*)")
COMPLETE: dict[str, Any] = {"complete": True, "gaps": []}


def _sub(sid: str, needs: Sequence[str] = ()) -> dict[str, Any]:
    return {"id": sid, "task": f"do {sid}", "worker": "writer", "needs": list(needs),
            "expected": ""}


def _gaps(problem: str, subtask: str = "") -> dict[str, Any]:
    return {"complete": False, "gaps": [{"problem": problem, "subtask": subtask}]}


class Crew:
    """Every role, scripted in order per role; every request kept per role."""

    def __init__(self, plan: Sequence[dict[str, Any]], verdicts: Sequence[dict[str, Any]],
                 replans: Sequence[dict[str, Any]], answer: str = "Done [t1].") -> None:
        self.scripts = {"planner": [{"decompose": True, "subtasks": list(plan)}],
                        "verifier": list(verdicts), "replanner": list(replans)}
        self.answer = answer
        self.requests: dict[str, list[Request]] = defaultdict(list)

    def __call__(self, request: Request) -> str:
        system = request.messages[0].content
        role = next((r for prompt, r in ROLES if system.startswith(prompt)), "unknown")
        self.requests[role].append(request)
        if role in self.scripts:
            queue = self.scripts[role]
            return json.dumps(queue.pop(0) if len(queue) > 1 else queue[0])
        if role == "worker":
            found = SUBTASK.search(next(m for m in request.messages if m.role == "user")
                                   .content)
            assert found is not None
            return f"result of {found.group(1)}"
        if role == "synthesizer":
            return self.answer
        raise AssertionError(f"no role answers {system[:80]!r}")

    def team(self) -> Team:
        return Team.default(cp.Model(ScriptedModel([self] * 60, name="crew")))


async def _run(crew: Crew, limits: Limits) -> tuple[cp.RunResult, list[Event]]:
    store = MemoryStore()
    result = await asyncio.wait_for(cp.run(goal_graph("goal", crew.team(), limits),
                                           store=store), WAIT)
    assert result.ok, {k: (v.status.value, v.error) for k, v in result.nodes.items()}
    return result, store.events(result.run_id)


def _replans(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [e.data or {} for e in events if e.kind is EventKind.PLAN_ROUND
            and (e.data or {}).get("phase") == "replan"]


def _shown(request: Request) -> list[str]:
    """The subtask ids a verify or synthesize prompt shows results of."""
    return re.findall(r"^\[([^\]]+)\] ", request.messages[-1].content, flags=re.M)


async def test_a_cancelled_subtask_and_those_that_need_it_leave_the_plan() -> None:
    crew = Crew([_sub("t1"), _sub("t2"), _sub("t3", needs=["t2"])],
                verdicts=[_gaps("t2 is off topic", subtask="t2"), COMPLETE],
                replans=[{"cancel": ["t2"], "add": [_sub("t4", needs=["t1"])]}],
                answer="Lisbon [t1], off topic [t2], costs [t4].")
    result, events = await _run(crew, Limits(topology="parallel", max_rounds=2))
    # t2 and t3 had ended when verify-1 ran: their nodes keep their results ...
    assert sorted(result.nodes) == ["answer", "plan", "t1", "t2", "t3", "t4", "verify-1",
                                    "verify-2"]
    assert result["t3"] == "result of t3"
    # ... but the plan no longer has them: t3 needs t2, so it went with it
    assert result["verify-1"]["replanned"] == {"applied": True, "added": ["t4"],
                                               "redone": [], "cancelled": ["t2", "t3"]}
    [replan] = _replans(events)
    assert replan["cancelled"] == ["t2", "t3"] and replan["edits"]["cancel"] == ["t2"]
    assert _shown(crew.requests["verifier"][0]) == ["t1", "t2", "t3"]
    assert _shown(crew.requests["verifier"][1]) == ["t1", "t4"]
    assert _shown(crew.requests["synthesizer"][0]) == ["t1", "t4"]
    assert "result of t2" not in crew.requests["synthesizer"][0].messages[-1].content
    assert result["answer"] == {"answer": "Lisbon [t1], off topic [t2], costs [t4].",
                                "cited": ["t1", "t4"], "rounds": 2}
    # the live edit rewired the next verify round and the answer to the plan as it stands
    [edit] = [e.data or {} for e in events if e.kind is EventKind.PATCH_APPLIED
              and (e.data or {}).get("reason") == "re-plan after verify-1"]
    [answer] = edit["replace"]
    refs = {v["$ref"] for v in answer["inputs"].values() if "$ref" in v}
    assert refs == {"t1", "t4"} and answer["after"] == ["verify-2"]
    assert [s["id"] for s in answer["inputs"]["plan"]["$lit"]["subtasks"]] == ["t1", "t4"]
    assert answer["inputs"]["plan"]["$lit"]["cancelled"] == ["t2", "t3"]
    assert round_lines(replan) == ["re-plan round 1: added ['t4'], redoing [], cancelled "
                                   "['t2', 't3'] (left out of the answer)"]


async def test_a_replan_may_only_cancel_and_still_answers() -> None:
    crew = Crew([_sub("t1"), _sub("t2")],
                verdicts=[_gaps("t2 is wrong", subtask="t2"), COMPLETE],
                replans=[{"cancel": ["t2"]}])
    result, _ = await _run(crew, Limits(topology="parallel", max_rounds=2))
    assert result["verify-1"]["replanned"]["cancelled"] == ["t2"]
    assert _shown(crew.requests["verifier"][1]) == ["t1"]
    assert _shown(crew.requests["synthesizer"][0]) == ["t1"]
    assert result["answer"]["rounds"] == 2


async def test_invalid_cancels_are_reasked_with_their_problems() -> None:
    crew = Crew([_sub("t1"), _sub("t2", needs=["t1"])], verdicts=[_gaps("weak"), COMPLETE],
                replans=[{"cancel": ["t9", "t1"], "redo": [{"id": "t2", "task": "y"}],
                          "add": [_sub("t5", needs=["t1"])]},
                         {"cancel": ["t1", "t2"], "redo": [{"id": "t1", "task": "z"}]},
                         {"cancel": ["t2"]}])
    result, events = await _run(crew, Limits(topology="parallel", max_rounds=2))
    first, second, third = (r.messages[-1].content for r in crew.requests["replanner"])
    assert "These edits have problems:" not in first
    for problem in ("cancel names unknown subtask 't9'",
                    "subtask 't2' is redone but needs a cancelled subtask; cancel it too, or "
                    "keep what it needs",
                    "subtask 't5' needs 't1', which is cancelled"):
        assert problem in second
    for problem in ("subtask 't1' is both redone and cancelled; choose one",):
        assert problem in third
    assert _replans(events)[0]["cancelled"] == ["t2"]
    assert sorted(result.nodes) == ["answer", "plan", "t1", "t2", "verify-1", "verify-2"]


async def test_cancelling_every_subtask_without_adding_one_is_a_problem() -> None:
    crew = Crew([_sub("t1")], verdicts=[_gaps("weak")], replans=[{"cancel": ["t1"]}])
    _, events = await _run(crew, Limits(topology="parallel", max_rounds=2, plan_attempts=1))
    assert _replans(events) == [{"phase": "replan", "round": 1, "applied": False,
                                 "problems": ["the edits cancel every subtask; keep or add "
                                              "at least one"]}]
    assert _shown(crew.requests["synthesizer"][0]) == ["t1"]  # answered with what there is


async def test_a_cancelled_id_is_never_used_again() -> None:
    crew = Crew([_sub("t1"), _sub("t2")], verdicts=[_gaps("weak"), _gaps("still weak"),
                                                   COMPLETE],
                replans=[{"cancel": ["t2"]},
                         {"add": [_sub("t2")], "redo": [{"id": "t2", "task": "again"}],
                          "cancel": ["t2"]},
                         {"add": [_sub("t3")]}])
    result, _ = await _run(crew, Limits(topology="parallel", max_rounds=3))
    reask = crew.requests["replanner"][2].messages[-1].content
    for problem in ("subtask id 't2' already exists; pick a new id",
                    "redo names subtask 't2', which an earlier round cancelled",
                    "cancel names subtask 't2', which an earlier round cancelled"):
        assert problem in reask
    assert result["verify-2"]["replanned"] == {"applied": True, "added": ["t3"],
                                               "redone": []}
    assert _shown(crew.requests["synthesizer"][0]) == ["t1", "t3"]
