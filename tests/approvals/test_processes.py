"""Approvals across real processes: the CLI answering a live run, a run detached while
waiting and resumed by its answer, a SIGKILL while approvals are pending, an approved
side effect that runs once across SIGKILLs, and the CLI's errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import wait_until

import counterpoint as cp
from counterpoint.approval import Approval
from counterpoint.events import EventKind

from .helpers import poll_store

GRAPHS = Path(__file__).resolve().parents[1] / "fixtures" / "approval_graph.py"


class Cli:
    """The ``counterpoint`` command in a scratch directory with its own store."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = path / "runs.db"
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("COUNTERPOINT_DB", "FORCE_COLOR", "COLUMNS")}
        self.env.update(NO_COLOR="1", APPROVAL_DIR=str(path))
        self.started: list[subprocess.Popen[str]] = []

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "counterpoint.cli", *args, "--db", str(self.db)]

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*args), cwd=self.path, env=self.env,
                              capture_output=True, text=True, timeout=120)

    def start(self, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(self.argv(*args), cwd=self.path, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.started.append(proc)
        return proc

    def lines(self, name: str) -> list[str]:
        file = self.path / name
        return file.read_text().splitlines() if file.exists() else []

    def pending(self, count: int) -> list[Approval]:
        found = poll_store(self.db, lambda found: sum(a.status == "pending"
                                                      for a in found) >= count,
                           f"{count} pending approval(s)")
        return [a for a in found if a.status == "pending"]

    def events(self, run_id: str) -> list[cp.Event]:
        store = cp.open_store(str(self.db))
        try:
            return store.events(cp.RunId(run_id))
        finally:
            store.close()


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    commands = Cli(tmp_path)
    yield commands
    for proc in commands.started:  # a failed test leaves no run waiting for ever
        if proc.poll() is None:
            _kill(proc)


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)


def _requests_by_id(events: list[cp.Event]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in events:
        if event.kind is EventKind.APPROVAL_REQUESTED and event.data:
            counts[event.data["id"]] = counts.get(event.data["id"], 0) + 1
    return counts


def test_an_answer_from_another_process_reaches_the_live_run(cli: Cli) -> None:
    proc = cli.start("run", f"{GRAPHS}:single", "--quiet")
    [pending] = cli.pending(1)
    listed = cli("approvals", "--json")
    assert listed.returncode == 0 and [a["id"] for a in json.loads(listed.stdout)] == \
        [pending.id]
    done = cli("approve", pending.id, "--by", "ana")
    assert done.returncode == 0, done.stderr
    assert f"process {proc.pid} continues the run" in done.stdout
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert cli.lines("steps.txt") == ["a"]
    shown = cli("show", pending.run_id, "--json")
    [approval] = json.loads(shown.stdout)["approvals"]
    assert approval["status"] == "approved" and approval["answer"]["by"] == "ana"


def test_a_detached_run_exits_waiting_and_its_answers_resume_it(cli: Cli) -> None:
    ran = cli("run", f"{GRAPHS}:parallel", "--detach-waiting", "--quiet")
    assert ran.returncode == 3, ran.stderr
    assert "is waiting for approvals (nodes ['a', 'b'])" in ran.stdout
    pending = {a.node: a for a in cli.pending(2)}
    assert cli.lines("steps.txt") == ["c"]  # the branch that needed nobody ran
    shown = cli("show", pending["a"].run_id)
    assert shown.returncode == 0 and "waiting" in shown.stdout and pending["a"].id in shown.stdout
    header = shown.stdout.splitlines()[:3]  # not "interrupted ... its process is gone"
    assert header[0].endswith("waiting") and "waiting for 2 approval(s)" in header[2], header
    listed = cli("runs").stdout.splitlines()
    assert any(line.startswith(pending["a"].run_id) and " waiting " in line for line in listed)
    first = cli("approve", pending["b"].id, "--no-resume")
    assert first.returncode == 0 and "continues when it is resumed" in first.stdout
    second = cli("reject", pending["a"].id, "--reason", "not yet", "--quiet")
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"run {pending['a'].run_id} succeeded" in second.stdout
    data = cli("show", pending["a"].run_id, "--json")
    output = json.loads(data.stdout)["outputs"]["fan_in"]
    assert output == ["a:no (not yet)", "b:yes", "c"]  # every branch reached the fan-in
    assert sorted(cli.lines("steps.txt")) == ["a", "b", "c"]


def test_sigkill_while_approvals_are_pending_then_answers_after_the_restart(cli: Cli) -> None:
    proc = cli.start("run", f"{GRAPHS}:parallel", "--quiet")
    pending = {a.node: a for a in cli.pending(2)}
    run_id = pending["a"].run_id
    wait_until(lambda: any(e.kind is EventKind.NODE_SUCCEEDED and e.node == "c"
                           for e in cli.events(run_id)), "c's success in the log")
    _kill(proc)  # (c is a sync step: its success can reach the log after both asks)
    assert cli("approve", pending["a"].id, "--no-resume").returncode == 0
    listed = cli("approvals", run_id)  # both still listed: one answered, one pending
    assert listed.returncode == 0 and "the run takes it when it resumes" in listed.stdout
    done = cli("approve", pending["b"].id, "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"run {run_id} succeeded" in done.stdout
    events = cli.events(run_id)
    # answered approvals never fire again: each was asked once, before the kill
    assert _requests_by_id(events) == {pending["a"].id: 1, pending["b"].id: 1}
    assert sorted(cli.lines("steps.txt")) == ["a", "b", "c"]  # c ran once, before the kill


def test_an_approved_side_effect_runs_once_across_sigkills(cli: Cli) -> None:
    proc = cli.start("run", f"{GRAPHS}:tooling", "--quiet")
    [deploy] = cli.pending(1)
    assert deploy.payload == {"tool": "deploy", "arguments": {"target": "prod"}}
    _kill(proc)  # killed between the request and the call: approved after the kill
    assert cli("approve", deploy.id, "--no-resume").returncode == 0
    assert cli.lines("deploy.txt") == []
    resumed = cli.start("resume", deploy.run_id, "--quiet")
    [notify] = cli.pending(1)  # the deploy ran, its result is durable, the next call waits
    assert notify.payload == {"tool": "notify", "arguments": {"text": "prod is out"}}
    _kill(resumed)
    assert len(cli.lines("deploy.txt")) == 1
    done = cli("approve", notify.id, "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(cli.lines("deploy.txt")) == 1  # never twice
    assert cli.lines("notify.txt") == ["prod is out"]
    shown = json.loads(cli("show", deploy.run_id, "--json").stdout)
    assert shown["outputs"]["ops"] == "done: deployed prod; notified: prod is out"


def test_cli_errors_are_one_line_and_exit_2(cli: Cli) -> None:
    proc = cli.start("run", f"{GRAPHS}:single", "--quiet")
    [pending] = cli.pending(1)
    unknown = cli("approve", "ap-000000000000")
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1
    assert "no approval ap-000000000000" in unknown.stderr
    bad = cli.path / "args.json"
    bad.write_text('{\n  "target": "prod",\n  oops\n}\n')
    edited = cli("approve", pending.id, "--edit", str(bad))
    assert edited.returncode == 2 and f"{bad}:3:" in edited.stderr
    assert "Traceback" not in edited.stderr
    for blank in ("", "  "):  # refused, and the approval is still pending
        refused = cli("reject", pending.id, "--reason", blank)
        assert refused.returncode == 2 and "--reason is empty; say why" in refused.stderr
    assert cli("reject", pending.id, "--reason", "no").returncode == 0
    again = cli("approve", pending.id)
    assert again.returncode == 2 and "rejected already" in again.stderr
    proc.communicate(timeout=60)
    assert proc.returncode == 0  # the step was told "no" and returned normally


def test_approvals_take_last_and_answers_take_a_unique_start_of_an_id(cli: Cli) -> None:
    ran = cli("run", f"{GRAPHS}:parallel", "--detach-waiting", "--quiet")
    assert ran.returncode == 3, ran.stderr
    pending = {a.node: a for a in cli.pending(2)}
    listed = cli("approvals", "last")  # as `show last` takes it
    assert listed.returncode == 0, listed.stderr
    assert pending["a"].id in listed.stdout and pending["b"].id in listed.stdout
    serial = pending["a"].run_id.rpartition("-")[2]
    assert pending["b"].id in cli("approvals", serial[:8]).stdout
    ids = [pending["a"].id, pending["b"].id]
    common = next(n for n in range(len(ids[0])) if ids[0][n] != ids[1][n])
    ambiguous = cli("approve", ids[0][:common], "--no-resume")  # starts both ids
    assert ambiguous.returncode == 2 and "Traceback" not in ambiguous.stderr
    assert ("is ambiguous: it starts 2 approvals" if common > len("ap-")
            else f"no approval {ids[0][:common]} ") in ambiguous.stderr
    short = cli("approve", ids[0][:common + 1], "--no-resume")
    assert short.returncode == 0, short.stderr
    assert f"approved {ids[0]} " in short.stdout
    again = cli("reject", ids[0][:common + 1], "--reason", "late")
    assert again.returncode == 2 and f"approval {ids[0]} " in again.stderr
    assert "approved already" in again.stderr


def test_a_run_that_waits_in_a_sub_run_names_the_node_that_asked(cli: Cli) -> None:
    ran = cli("run", f"{GRAPHS}:nested", "--detach-waiting", "--quiet")
    assert ran.returncode == 3, ran.stderr
    [pending] = cli.pending(1)
    assert pending.run_id.endswith("/inner")
    assert (f"is waiting for approvals (node 'a' of sub-run {pending.run_id}); list them "
            in ran.stdout)
    done = cli("reject", pending.id, "--reason", "not today", "--quiet")
    assert done.returncode == 0, done.stderr
    report = json.loads(cli("show", pending.run_id.split("/")[0], "--json").stdout)
    assert report["outputs"]["report"] == [{"a": "a:no (not today)"}, "-", "-"]
