"""Escalation to the re-planner: a goal subtask whose worker's model is down, with no
healthy fallback left, is handed to the goal's re-planner once (an ``escalated`` event
with ``to="replanner"``), and the new sub-plan replaces the failed subtask. With no
round left the failure goes to the caller (``to="caller"``) and the node fails: never a
silent skip. Outside a goal run the escalated error carries its escalation.

The down model is a real OpenAI-compatible server on loopback answering 503; every other
role is one scripted model that answers from the request alone.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.agents import Agent
from counterpoint.events import Event, EventKind
from counterpoint.health import BreakerOptions, HealthRegistry, use_health
from counterpoint.health.escalation import escalation_of
from counterpoint.models import Model, Request, Response, ScriptedModel
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.models.provider import TextSink
from counterpoint.planning import Limits, Team, goal_graph
from counterpoint.planning.team import PLANNER, REPLANNER, SYNTHESIZER, VERIFIER, WORKER
from counterpoint.state import NodeStatus
from counterpoint.store import MemoryStore
from counterpoint.testing import ManualClock, OpenAIServer, Reply

WAIT = 20.0
"""Seconds before a test gives up on a run that should end at once."""

ROLES = ((PLANNER, "planner"), (REPLANNER, "replanner"), (VERIFIER, "verifier"),
         (SYNTHESIZER, "synthesizer"), (WORKER, "worker"))
SUBTASK = re.compile(r"Your subtask \(([^)]+)\): (.*)")


def _sub(sid: str, worker: str, needs: Sequence[str] = ()) -> dict[str, Any]:
    return {"id": sid, "task": f"do {sid}", "worker": worker, "needs": list(needs),
            "expected": ""}


class Crew(ScriptedModel):
    """Every role but the down worker, answered from the request."""

    def __init__(self, plan: Sequence[dict[str, Any]], replan: dict[str, Any]) -> None:
        super().__init__(name="crew")
        self.plan = {"subtasks": list(plan)}
        self.replan = replan
        self.asked: Counter[str] = Counter()
        self.replan_prompts: list[str] = []

    async def complete(self, request: Request, *, on_text: TextSink | None = None,
                       time_limit: float | None = None) -> Response:
        system = request.messages[0].content if request.messages[0].role == "system" else ""
        role = next((r for prompt, r in ROLES if system.startswith(prompt)), "unknown")
        users = [m.content for m in request.messages if m.role == "user"]
        self.asked[role] += 1
        if role == "worker":
            found = SUBTASK.search(users[0])
            assert found is not None, users[0]
            text = f"{found.group(1)} done"
        elif role == "planner":
            text = json.dumps(self.plan)
        elif role == "replanner":
            self.replan_prompts.append(users[-1])
            text = json.dumps(self.replan)
        elif role == "verifier":
            text = json.dumps({"complete": True, "gaps": []})
        elif role == "synthesizer":
            text = "answer from " + " ".join(re.findall(r"^\[([^\]]+)\]", users[-1], re.M))
        else:
            raise AssertionError(f"no role answers {system[:80]!r}")
        self.add(text)
        return await super().complete(request, on_text=on_text, time_limit=time_limit)


def _team(crew: Crew, down_url: str) -> Team:
    down = Model(OpenAIProvider("down", "m", base_url=down_url), retries=0, cache=False,
                 timeout=5.0)
    workers: dict[str, Agent | cp.Tool] = {
        "writer": Agent("writer", model=Model(crew), instructions=WORKER,
                        description="writes"),
        "flaky": Agent("flaky", model=down, instructions=WORKER,
                       description="writes, on a model that may be down")}
    return Team.default(Model(crew), workers=workers)


def _of(events: Sequence[Event], kind: EventKind) -> list[dict[str, Any]]:
    return [e.data or {} for e in events if e.kind is kind]


async def _run(crew: Crew, limits: Limits) -> tuple[cp.RunResult, list[Event], int]:
    registry = HealthRegistry(BreakerOptions(failures=1, open_for=60.0), clock=ManualClock())
    store = MemoryStore()
    with OpenAIServer(default=Reply.status(503)) as down, use_health(registry):
        graph = goal_graph("goal", _team(crew, down.base_url), limits)
        result = await asyncio.wait_for(cp.run(graph, store=store), WAIT)
        calls = len(down.requests)
    return result, store.events(result.run_id), calls


async def test_a_failed_subtask_with_no_healthy_path_is_replaced_by_the_replanner() -> None:
    crew = Crew([_sub("t1", "flaky"), _sub("t2", "writer")],
                {"add": [_sub("t3", "writer")]})
    result, events, down_calls = await _run(crew, Limits(max_rounds=2))
    assert result.ok, {k: (v.status.value, v.error) for k, v in result.nodes.items()}
    assert down_calls == 1
    escalated = _of(events, EventKind.ESCALATED)
    # the model layer escalates to its caller, the goal run hands it to the re-planner
    assert [(d["kind"], d["to"]) for d in escalated] == [("model", "caller"),
                                                        ("subtask", "replanner")]
    assert escalated[1]["from"] == "t1" and escalated[1]["model"] == "down"
    assert crew.asked["replanner"] == 1  # once per failure
    assert "Subtask t1 failed and cannot be done as planned" in crew.replan_prompts[0]
    [replan] = [d for d in _of(events, EventKind.PLAN_ROUND) if d.get("phase") == "replan"]
    assert replan["applied"] is True and replan["added"] == ["t3"]
    assert replan["cancelled"] == ["t1"]  # the failed subtask always leaves the plan
    # the replacement ran; the failed subtask's result reaches nothing
    assert result.nodes["t3"].status is NodeStatus.SUCCEEDED
    assert result["t1"]["replaced"] is True
    assert result["answer"]["answer"] == "answer from t2 t3"


async def test_with_no_round_left_the_failure_goes_to_the_caller() -> None:
    crew = Crew([_sub("t1", "flaky"), _sub("t2", "writer")],
                {"add": [_sub("t3", "writer")]})
    result, events, _ = await _run(crew, Limits(max_rounds=0))
    assert not result.ok
    assert result.nodes["t1"].status is NodeStatus.FAILED
    escalated = _of(events, EventKind.ESCALATED)
    assert [(d["kind"], d["to"]) for d in escalated] == [
        ("model", "caller"), ("subtask", "replanner"), ("subtask", "caller")]
    assert "max rounds (0) reached" in escalated[-1]["replan"]
    assert crew.asked["replanner"] == 0


async def test_outside_a_goal_run_the_error_carries_its_escalation() -> None:
    registry = HealthRegistry(BreakerOptions(failures=1), clock=ManualClock())
    with OpenAIServer(default=Reply.status(503)) as down, use_health(registry):
        model = Model(OpenAIProvider("only", "m", base_url=down.base_url), retries=0,
                      cache=False, timeout=5.0)
        with pytest.raises(cp.ModelUnavailable) as caught:
            await model.generate("hi", max_tokens=8)
        problem = escalation_of(caught.value)
        assert problem is not None and problem.kind == "model" and problem.tried == ("only",)
        with pytest.raises(cp.ModelUnavailable) as refused:  # now the circuit is open
            await model.generate("hi", max_tokens=8)
        again = escalation_of(refused.value)
        assert again is not None and again.unavailable == ("only",)
