"""A goal run that the tests of ``counterpoint show`` and of the web view both read: the
scripted model plays every role of the default team (by the role's system prompt), the
first verify finds a gap, the re-plan adds a subtask and the second verify passes.
A module of its own name, importable from any test folder (as ``support`` is)."""

from __future__ import annotations

import json
from typing import Any

import counterpoint as cp
from counterpoint.models import Request, ScriptedModel
from counterpoint.planning import Limits, Team, goal_graph
from counterpoint.planning.team import PLANNER, REPLANNER, SYNTHESIZER, VERIFIER, WORKER
from counterpoint.store import RunStore

GOAL = "What is the capital of France, and how many people live there?"
ANSWER = "Paris is the capital [t1]; about 2.1 million people live there [t3]."
GAP = "the population is missing"

_ROLES = ((PLANNER, "planner"), (REPLANNER, "replanner"), (VERIFIER, "verifier"),
          (SYNTHESIZER, "synthesizer"), (WORKER, "worker"))


def _subtask(sid: str, task: str, needs: list[str]) -> dict[str, Any]:
    return {"id": sid, "task": task, "worker": "writer", "needs": needs, "expected": task}


class Crew:
    """Every role's answers, in order (the last one repeats); workers answer a line.
    ``plans``: the planner's answers (text as is, anything else as JSON)."""

    def __init__(self, plans: list[Any] | None = None) -> None:
        self.scripts: dict[str, list[Any]] = {
            "planner": plans or [{"subtasks": [
                _subtask("t1", "name the capital", []),
                _subtask("t2", "describe the capital", ["t1"])]}],
            "verifier": [{"complete": False, "gaps": [{"problem": GAP, "subtask": "t2"}]},
                         {"complete": True, "gaps": []}],
            "replanner": [{"add": [_subtask("t3", "give the population", ["t1"])],
                           "redo": []}]}

    def __call__(self, request: Request) -> str:
        system = request.messages[0].content
        role = next((r for prompt, r in _ROLES if system.startswith(prompt)), "unknown")
        if role in self.scripts:
            queue = self.scripts[role]
            answer = queue.pop(0) if len(queue) > 1 else queue[0]
            return answer if isinstance(answer, str) else json.dumps(answer)
        if role == "worker":
            return "Paris; 2.1 million people."
        if role == "synthesizer":
            return ANSWER
        raise AssertionError(f"no role answers {system[:80]!r}")


def goal_run(store: RunStore, crew: Crew | None = None) -> cp.RunResult:
    """Run :data:`GOAL` with the scripted crew into ``store`` (at most two verify rounds)."""
    model = cp.Model(ScriptedModel([crew or Crew()] * 60, name="crew"))
    return cp.run_sync(goal_graph(GOAL, Team.default(model), Limits(max_rounds=2)),
                       store=store)
