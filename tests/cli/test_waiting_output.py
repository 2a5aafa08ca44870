"""A run that ends its execution to wait for approvals (``--detach-waiting``) exits 3 and
says how to answer, from ``run``, ``resume`` and ``fork`` alike; with ``--json``, stdout
is JSON (the run, ``"status": "waiting"`` and its pending approvals) and the sentence
goes to stderr (cli/approvals.py ``waiting``).

Regressions: ``fork`` of a waiting run printed a summary saying ``running`` and exited
1; ``--json`` printed the sentence on stdout, which no JSON reader takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_cli

FLOW = """
import counterpoint as cp

release = cp.Graph("release")
async def deploy(ctx: cp.NodeContext) -> str:
    answer = await ctx.ask("deploy?", {"v": 1})
    return "deployed" if answer.approved else "held"
release.add("deploy", deploy)
"""


@pytest.fixture
def waiting_run(tmp_path: Path) -> str:
    (tmp_path / "flow.py").write_text(FLOW)
    done = run_cli("run", "flow.py", "--db", "runs.db", "-q", "--no-preflight",
                   "--detach-waiting", "--json", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert data["status"] == "waiting"
    [approval] = data["approvals"]
    assert (approval["node"], approval["question"], approval["status"]) == \
        ("deploy", "deploy?", "pending")
    assert done.stderr.startswith(f"run {data['run_id']} is waiting for approvals (nodes "
                                  "['deploy'])")
    run_id: str = data["run_id"]
    return run_id


def test_fork_of_a_waiting_run_waits_too_and_says_how_to_answer(
        tmp_path: Path, waiting_run: str) -> None:
    done = run_cli("fork", waiting_run, "--db", "runs.db", "-q", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    [line] = done.stdout.splitlines()
    assert line.startswith("run r-") and " is waiting for approvals (nodes ['deploy']); " \
        "list them with `counterpoint approvals " in line
    assert "running" not in done.stdout


@pytest.mark.parametrize("command", ["resume", "fork"])
def test_json_of_a_waiting_run_is_json(tmp_path: Path, waiting_run: str,
                                       command: str) -> None:
    done = run_cli(command, waiting_run, "--db", "runs.db", "-q", "--json", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert data["status"] == "waiting"
    assert [a["node"] for a in data["approvals"]] == ["deploy"]
    assert (data["run_id"] == waiting_run) is (command == "resume")
    assert "is waiting for approvals" in done.stderr


def test_runs_shows_no_duration_for_a_run_that_is_waiting(tmp_path: Path,
                                                          waiting_run: str) -> None:
    """`runs` said "took 0.000s" for it: a waiting run has not ended."""
    listed = run_cli("runs", "--db", "runs.db", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    [row] = [line.split() for line in listed.stdout.splitlines()
             if line.startswith(waiting_run)]
    assert (row[2], row[-1]) == ("waiting", "-"), listed.stdout


@pytest.mark.parametrize("answer", [("approve",), ("reject", "--reason", "not now")])
def test_answering_an_approval_of_a_cancelled_run_says_the_run_was_cancelled(
        tmp_path: Path, waiting_run: str, answer: tuple[str, ...]) -> None:
    """It said the approval "was pending already": nothing was answered, the run was
    cancelled (by `counterpoint cancel`, its process gone) and nothing waits any more."""
    cancelled = run_cli("cancel", waiting_run, "--db", "runs.db", cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    listed = run_cli("approvals", waiting_run, "--all", "--db", "runs.db", cwd=tmp_path)
    approval = listed.stdout.splitlines()[1].split()[0]
    done = run_cli(*answer, approval, "--db", "runs.db", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    error = " ".join(done.stderr.split())
    assert error == (f"error: approval {approval} (run {waiting_run}, node 'deploy') takes no "
                     "answer: its run was cancelled before it was answered, and nothing waits "
                     "for it; a new run of the graph asks again"), done.stderr
    assert "already" not in error and "Traceback" not in done.stderr
