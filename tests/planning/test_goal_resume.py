"""Resuming a planned goal run: from every point its log can stop at (each prefix of a
finished run's log, resumed in this process), and after a real crash of
``counterpoint run "GOAL"`` (SIGKILL mid-run, then ``counterpoint resume``); and how
the graph of a run that no file defines is recorded and rebuilt.

The models answer from the request alone (never from the order of calls), so a
resumed run gets the answers the first process got, and its outputs can be compared
with an uninterrupted run's.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from support import wait_until

import counterpoint as cp
from counterpoint.errors import SourceError, UserError
from counterpoint.events import Event, EventKind
from counterpoint.graph import Graph
from counterpoint.ids import RunId
from counterpoint.loader import built_by, load_recorded, source_record
from counterpoint.models import Request, ScriptedModel
from counterpoint.planning import Limits, Team, goal_graph
from counterpoint.planning.team import PLANNER, REPLANNER, SYNTHESIZER, VERIFIER, WORKER
from counterpoint.store import MemoryStore, SQLiteStore
from counterpoint.testing import OpenAIServer, Reply
from counterpoint.testing.replies import RecordedRequest

WAIT = 10.0
"""Seconds before a test gives up waiting for something that should happen at once."""

GOAL = "Plan a weekend in Lisbon"
ROLES = ((PLANNER, "planner"), (REPLANNER, "replanner"), (VERIFIER, "verifier"),
         (SYNTHESIZER, "synthesizer"), (WORKER, "worker"))
SUBTASK = re.compile(r"Your subtask \(([^)]+)\): (.*)")
REDO = "A first attempt had these problems"
# the plan runs as planned (a DAG): these tests are about resuming, not topology
LIMITS = Limits(topology="parallel", max_rounds=2, check=("t2",))


def _sub(sid: str, needs: Sequence[str] = ()) -> dict[str, Any]:
    return {"id": sid, "task": f"do {sid}", "worker": "writer", "needs": list(needs),
            "expected": ""}


PLAN = {"decompose": True, "subtasks": [_sub("t1"), _sub("t2", needs=["t1"]), _sub("t3")]}
REPLAN = {"redo": [{"id": "t1", "task": "do t1 better"}],
          "add": [_sub("t4", needs=["t1"])], "cancel": ["t3"]}
ANSWER = "Saturday [t1], Sunday [t2], costs [t4]."


def answer(role: str, system: str, first_user: str, last_user: str) -> str:
    """Every role's answer, from what it was asked.

    The plan has t1, t2 (needs t1) and t3; t2 is checked as soon as it exists, and its
    first result always has a gap (so it is redone once). Verify round 1 finds t1 thin:
    the re-plan redoes t1, adds t4 and cancels t3; round 2 (which sees the redone t1)
    passes.
    """
    if role == "planner":
        return json.dumps(PLAN)
    if role == "replanner":
        return json.dumps(REPLAN)
    if role == "verifier":
        if "\n\nSubtask [" in last_user:  # a check of one subtask's result
            passed = "(again)" in last_user
            return json.dumps({"complete": passed,
                               "gaps": [] if passed else [{"problem": "no prices"}]})
        if "do t1 better" in last_user:
            return json.dumps({"complete": True, "gaps": []})
        return json.dumps({"complete": False,
                           "gaps": [{"problem": "t1 is thin", "subtask": "t1"}]})
    if role == "worker":
        found = SUBTASK.search(first_user)
        assert found is not None, first_user
        return f"{found.group(1)}: {found.group(2)}" + (" (again)" if REDO in last_user else "")
    if role == "synthesizer":
        return ANSWER
    raise AssertionError(f"no role answers {system[:80]!r}")


def role_of(system: str) -> str:
    return next((role for prompt, role in ROLES if system.startswith(prompt)), "unknown")


class Crew:
    """Every role of the default team as one scripted model; requests counted per role."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()

    def __call__(self, request: Request) -> str:
        system = request.messages[0].content if request.messages[0].role == "system" else ""
        users = [m.content for m in request.messages if m.role == "user"]
        role = role_of(system)
        self.asked[role] += 1
        return answer(role, system, users[0], users[-1])

    def team(self) -> Team:
        return Team.default(cp.Model(ScriptedModel([self] * 100, name="crew")))


def _ok(result: cp.RunResult) -> None:
    assert result.ok, {k: (v.status.value, v.error) for k, v in result.nodes.items()}


def _outputs(result: cp.RunResult) -> dict[str, Any]:
    return {node: result[node] for node in result.nodes}


def _purposes(events: Sequence[Event]) -> list[str]:
    return [str((e.data or {}).get("purpose", "")) for e in events
            if e.kind is EventKind.MODEL_CALL]


def _decided(events: Sequence[Event]) -> list[tuple[str, Any]]:
    """The decisions in ``events``: a final plan, verify verdicts and re-plans by round,
    checks by subtask."""
    found: list[tuple[str, Any]] = []
    for e in events:
        data = e.data or {}
        if e.kind is not EventKind.PLAN_ROUND:
            continue
        if data["phase"] == "plan" and "plan" in data and (
                data.get("problems") == [] or data.get("attempt") == "repaired"):
            found.append(("plan", None))
        elif data["phase"] in ("verify", "replan"):
            found.append((data["phase"], data["round"]))
        elif data["phase"] == "check":
            found.append(("check", data["subtask"]))
    return found


# ---------------------------------------------------------------- every prefix
async def test_a_goal_run_resumes_from_wherever_its_log_stops() -> None:
    store = MemoryStore()
    reference = await asyncio.wait_for(
        cp.run(goal_graph(GOAL, Crew().team(), LIMITS), store=store), WAIT)
    _ok(reference)
    assert sorted(reference.nodes) == ["answer", "plan", "t1", "t1.r2", "t2", "t3", "t4",
                                       "verify-1", "verify-2"]
    assert reference["answer"] == {"answer": ANSWER, "cited": ["t1", "t2", "t4"],
                                   "rounds": 2}
    log = store.events(reference.run_id)
    assert log[-1].kind is EventKind.RUN_FINISHED
    expected = _outputs(reference)
    for cut in range(1, len(log) - 1):
        prefix = store.events(reference.run_id)[:cut]
        again = MemoryStore()
        for event in prefix:
            again.append(reference.run_id, event)
        crew = Crew()
        result = await asyncio.wait_for(cp.resume(
            reference.run_id, store=again, graph=goal_graph(GOAL, crew.team(), LIMITS)), WAIT)
        where = f"resumed after event {cut} ({prefix[-1].kind.value} {prefix[-1].node})"
        _ok(result)
        assert _outputs(result) == expected, where
        after = again.events(reference.run_id)[cut:]
        succeeded = {e.node for e in prefix if e.kind is EventKind.NODE_SUCCEEDED}
        rerun = [e.node for e in after if e.kind is EventKind.NODE_STARTED
                 and e.node in succeeded]
        assert rerun == [], f"{where}: {rerun} ran again although they had succeeded"
        calls = _purposes(after)
        for phase, round_ in _decided(prefix):  # (round_: a subtask id for a check)
            asked = {"plan": "plan ", "verify": f"verify {round_}",
                     "replan": f"replan {round_}.", "check": f"check {round_}"}[phase]
            assert not [c for c in calls if c.startswith(asked)], \
                f"{where}: the {phase} decision {round_} in the log was asked for again"
        if ("plan", None) in _decided(prefix):
            assert crew.asked["planner"] == 0, where
        reasons = [(e.data or {})["reason"] for e in again.events(reference.run_id)
                   if e.kind is EventKind.PATCH_APPLIED]
        assert len(reasons) == len(set(reasons)), f"{where}: an edit was applied twice"


async def test_a_resumed_goal_run_needs_the_graph_it_was_built_with() -> None:
    store = MemoryStore()
    done = await asyncio.wait_for(
        cp.run(goal_graph(GOAL, Crew().team(), Limits(max_rounds=0)), store=store), WAIT)
    log = store.events(done.run_id)
    cut = next(i for i, e in enumerate(log) if e.kind is EventKind.PATCH_APPLIED) + 1
    again = MemoryStore()
    for event in log[:cut]:
        again.append(done.run_id, event)
    other = Graph("goal")
    other.add("plan", lambda: {})
    with pytest.raises(SourceError, match=r"node 't1' \(added by a live edit\): its step "
                                          r"\S+_GoalSteps\.work is a method of an object"):
        await cp.resume(done.run_id, store=again, graph=other)


# ------------------------------------------------------ graphs no file defines
def make_graph(word: str, times: int) -> Graph:
    graph = Graph("built")
    graph.add("say", lambda: word * times)
    return built_by(graph, make_graph, word=word, times=times)


def test_a_built_graph_records_its_builder_and_is_rebuilt_from_the_record() -> None:
    record = source_record(make_graph("ab", 2))
    assert record["builder"] == f"{__name__}:make_graph"
    assert record["arguments"] == {"word": "ab", "times": 2}
    rebuilt = load_recorded(json.loads(json.dumps(record)), "r-1")
    assert rebuilt.nodes["say"].fn() == "abab"  # type: ignore[operator, union-attr]
    with pytest.raises(SourceError, match=r"run r-2: rebuilding its graph with "
                                          r"\S+:make_graph raised TypeError"):
        load_recorded({**record, "arguments": {"word": "ab"}}, "r-2")
    with pytest.raises(SourceError, match=r"run r-3: its graph was built by nowhere:gone"):
        load_recorded({**record, "builder": "nowhere:gone"}, "r-3")


def test_only_a_module_level_builder_with_json_arguments_can_be_recorded() -> None:
    graph = Graph("g")
    graph.add("a", lambda: 1)
    with pytest.raises(UserError, match="not a module-level function"):
        built_by(graph, lambda: graph)
    with pytest.raises(UserError, match="must be JSON data"):
        built_by(graph, make_graph, word=object(), times=1)


# ----------------------------------------------------- a real crash, the CLI
@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    hung: set[str] = set()
    lock = threading.Lock()

    def respond(request: RecordedRequest) -> Reply:
        messages = request.body.get("messages") or []
        system = next((str(m.get("content")) for m in messages if m.get("role") == "system"),
                      "")
        users = [str(m.get("content")) for m in messages if m.get("role") == "user"]
        role = role_of(system)
        if role == "worker" and "Your subtask (t4)" in users[0]:
            with lock:  # the first ask for t4 never returns: the process dies waiting
                first = "t4" not in hung
                hung.add("t4")
            if first:
                return Reply.hang(60)
        return Reply.text(answer(role, system, users[0], users[-1]))

    with OpenAIServer(default=Reply.dynamic(respond)) as srv:
        yield srv


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "counterpoint.cli", *args]


def _env(cwd: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COUNTERPOINT_DB", "COUNTERPOINT_CONFIG", "FORCE_COLOR")}
    return {**env, "NO_COLOR": "1", "COLUMNS": "200",
            "XDG_CONFIG_HOME": str(cwd / "no-user-config")}


def _events(db: Path) -> tuple[RunId, list[Event]] | None:
    store = SQLiteStore(db)
    try:
        runs = store.runs()
        return (runs[0].run_id, store.events(runs[0].run_id)) if runs else None
    finally:
        store.close()


def _logged(db: Path, *nodes: str) -> tuple[RunId, list[Event]] | None:
    """The run and its log, once every one of ``nodes`` has succeeded in it."""
    found = _events(db)
    if found is None:
        return None
    done = {e.node for e in found[1] if e.kind is EventKind.NODE_SUCCEEDED}
    return found if set(nodes) <= done else None


def _asked(server: OpenAIServer) -> Counter[str]:
    asked: Counter[str] = Counter()
    for request in server.requests:
        messages = request.body.get("messages") or []
        system = next((str(m.get("content")) for m in messages if m.get("role") == "system"),
                      "")
        role = role_of(system)
        if role == "worker":
            found = SUBTASK.search(str(next(m for m in messages if m.get("role") == "user")
                                       .get("content")))
            role = f"worker {found.group(1) if found else '?'}"
        asked[role] += 1
    return asked


def test_a_goal_run_killed_mid_run_is_finished_by_counterpoint_resume(
        tmp_path: Path, server: OpenAIServer) -> None:
    (tmp_path / "counterpoint.toml").write_text(
        f'[models.fake]\nprovider = "openai"\nmodel = "gpt-test"\n'
        f'base_url = "{server.base_url}"\n')
    db = tmp_path / "runs.db"
    # the scripted server answers by role; the model check's probe is no role's request
    proc = subprocess.Popen(_cli("run", GOAL, "--model", "fake", "--check", "t2",
                                 "--topology", "parallel", "--db", str(db),
                                 "--no-preflight"),
                            cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        # t4 exists once verify-1 re-planned, and starts after the redone t1: kill while it
        # waits for its model, once those successes are durable
        wait_until(lambda: _asked(server)["worker t4"], "the re-planned subtask t4 to start")
        run_id, _ = wait_until(lambda: _logged(db, "verify-1", "t1.r2"),
                           "verify-1 and t1.r2 to be in the log")
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == -9, err
    assert not any(e.kind is EventKind.RUN_FINISHED for e in _events(db)[1])  # type: ignore[index]
    asked = _asked(server)
    assert asked["planner"] == 1 and asked["replanner"] == 1

    resumed = subprocess.run(_cli("resume", run_id, "--db", str(db)),
                             cwd=tmp_path, env=_env(tmp_path), capture_output=True,
                             text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"resuming run {run_id}" in resumed.stdout
    assert "verify round 2: complete" in resumed.stdout  # the rounds, shown live
    assert ANSWER in resumed.stdout  # and the answer after the summary, as `run` prints it

    shown = subprocess.run(_cli("show", run_id, "--db", str(db), "--json"),
                           cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["status"] == "succeeded"
    assert report["outputs"]["answer"] == {"answer": ANSWER, "cited": ["t1", "t2", "t4"],
                                           "rounds": 2}
    assert sorted(report["nodes"]) == ["answer", "plan", "t1", "t1.r2", "t2", "t3", "t4",
                                       "verify-1", "verify-2"]
    # nothing that had succeeded ran again, and nothing decided was asked again: only the
    # subtask in flight (t4) and what came after it
    _, log = _events(db)  # type: ignore[misc]
    start = next(i for i, e in enumerate(log) if e.kind is EventKind.RUN_RESUMED)
    done = {e.node for e in log[:start] if e.kind is EventKind.NODE_SUCCEEDED}
    assert done == {"plan", "t1", "t1.r2", "t2", "t3", "verify-1"}
    assert [e.node for e in log[start:] if e.kind is EventKind.NODE_STARTED] == \
        ["t4", "verify-2", "answer"]
    assert not [p for p in _purposes(log[start:]) if p.startswith(("plan", "replan"))]
    asked = _asked(server)
    assert (asked["planner"], asked["replanner"], asked["worker t4"]) == (1, 1, 2)
    assert (asked["worker t1"], asked["worker t2"], asked["worker t3"]) == (2, 2, 1)
