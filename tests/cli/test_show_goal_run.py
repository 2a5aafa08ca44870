"""``counterpoint show`` of a goal run, in a fresh process, from its log alone: the goal,
each round (plan, verify, re-plan: what each decided and why), the answer, and a
critical path that includes the planning (counterpoint.goal_story, cli/render).

Regression: show printed the nodes and metrics only, and its critical path began at the
first subtask: the nodes the ``plan`` node's edit added do not depend on it."""

from __future__ import annotations

import json
from pathlib import Path

from goal_runs import ANSWER, GAP, GOAL, Crew, goal_run
from support import run_cli

from counterpoint.store import SQLiteStore

OLD_KEYS = {"run_id", "graph", "status", "created_at", "finished_at", "outputs", "nodes",
            "metrics", "models", "forked_from", "forks"}
"""What ``show --json`` said before it told a goal run's story: kept as they were."""


def _recorded(tmp_path: Path, crew: Crew | None = None) -> str:
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        result = goal_run(store, crew)
    finally:
        store.close()
    return str(result.run_id)


def test_show_tells_the_goal_its_rounds_and_the_answer(tmp_path: Path) -> None:
    run_id = _recorded(tmp_path)
    done = run_cli("show", run_id, "--db", str(tmp_path / "runs.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert f"goal      {GOAL}" in lines
    assert "rounds    1 plan, 2 verify, 1 re-plan" in lines
    story = [line for line in lines if line.startswith(("plan:", "verify ", "re-plan "))]
    assert story == [
        "plan: 2 subtasks (t1, t2), sequential (a chain of 2: each step needs the one "
        "before)  [plan]",
        f"verify 1: 1 gap(s): {GAP} (t2)  [verify-1]",
        f"re-plan 1, for {GAP} (t2): added t3  [verify-1]",
        "verify 2: complete  [verify-2]"]
    answer = lines.index("answer")
    assert lines[answer + 1:answer + 3] == [ANSWER, "cites t1, t3"]
    path = next(line for line in lines if line.startswith("critical path"))
    assert "(plan -> t1 -> t2 -> verify-1 -> t3 -> verify-2 -> answer)" in path


def test_show_json_adds_the_story_and_keeps_its_keys(tmp_path: Path) -> None:
    run_id = _recorded(tmp_path)
    done = run_cli("show", run_id, "--db", str(tmp_path / "runs.db"), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data) >= OLD_KEYS
    assert data["metrics"]["critical_path_nodes"][0] == "plan"
    story = data["goal"]
    assert story["goal"] == GOAL
    assert [(r["phase"], r["node"]) for r in story["rounds"]] == [
        ("plan", "plan"), ("verify", "verify-1"), ("replan", "verify-1"),
        ("verify", "verify-2")]
    plan, first, replan, second = story["rounds"]
    assert plan["subtasks"] == ["t1", "t2"] and plan["attempts"] == 1
    assert plan["topology"] == "sequential"
    assert (first["verdict"], first["gaps"]) == ("gaps", [f"{GAP} (t2)"])
    assert replan["why"] == first["gaps"] and replan["added"] == ["t3"]
    assert second["verdict"] == "complete"
    assert (story["verify_rounds"], story["replans"]) == (2, 1)
    assert story["answer"] == {"node": "answer", "text": ANSWER, "cited": ["t1", "t3"]}


def test_a_run_that_found_no_plan_still_shows_its_goal_and_the_attempts(
        tmp_path: Path) -> None:
    """A planner that never answers a plan: the run fails in its ``plan`` node, and the
    log names the goal only because the plan rounds record it."""
    run_id = _recorded(tmp_path, Crew(plans=["not a plan"]))
    done = run_cli("show", run_id, "--db", str(tmp_path / "runs.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert f"goal      {GOAL}" in lines
    plan = next(line for line in lines if line.startswith("plan:"))
    assert plan.startswith("plan: no valid plan after 3 attempts; attempt 3 refused: the "
                           "answer is not a valid plan: ")
    assert "no answer yet" in lines


def test_a_log_whose_plan_rounds_do_not_name_the_goal_finds_it_in_the_edits() -> None:
    """Logs written before the plan rounds recorded the goal: the subtasks' inputs (and
    the verify and answer nodes' plan) recorded it with the edit that added them."""
    from dataclasses import replace

    from counterpoint.events import EventKind
    from counterpoint.goal_story import goal_story
    from counterpoint.store import MemoryStore

    store = MemoryStore()
    run = goal_run(store)
    events = [replace(ev, data={k: v for k, v in (ev.data or {}).items() if k != "goal"})
              if ev.kind is EventKind.PLAN_ROUND else ev for ev in store.events(run.run_id)]
    story = goal_story(events)
    assert story is not None and story["goal"] == GOAL
