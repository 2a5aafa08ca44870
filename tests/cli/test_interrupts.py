"""Ctrl-C in the commands that run a graph (cli/signals.py): the command says which run
stopped and how to continue it, exits 130, never prints a traceback, and the run resumes.

Regressions: ``counterpoint approve ID`` resuming a run exited 130 on Ctrl-C saying
nothing; a run stopped while a sync step ran in a thread waited, silently, until the
step returned, and a second Ctrl-C then printed a traceback from ``threading``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from support import run_cli, wait_until

FLOWS = """
import time
from pathlib import Path
import counterpoint as cp

HERE = Path(__file__).parent

def _hold(name: str) -> None:
    (HERE / f"{name}-started").touch()
    while not (HERE / "release").exists():  # a step that cannot be stopped
        time.sleep(0.02)

blocking = cp.Graph("blocking")
blocking.add("spin", lambda: _hold("spin"))

asks = cp.Graph("asks")
async def gate(ctx: cp.NodeContext) -> str:
    await ctx.ask("go?", {})
    import asyncio
    (HERE / "resumed").touch()
    await asyncio.Event().wait()  # until cancelled
    return "never"
asks.add("gate", gate)
"""


def _sigint_as_at_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(folder: Path, *args: str) -> subprocess.Popen[str]:
    """``counterpoint ARGS`` in its own session, SIGINT handled as at a terminal."""
    environment = {**os.environ, "COLUMNS": "200", "XDG_CONFIG_HOME": str(folder / "none"),
                   "PYTHONFAULTHANDLER": "1"}  # stacks on SIGABRT: see _ended
    return subprocess.Popen([sys.executable, "-m", "counterpoint.cli", *args], cwd=folder,
                            env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            preexec_fn=_sigint_as_at_a_terminal)


def _ended(proc: subprocess.Popen[str]) -> str:
    """The rest of ``proc``'s stderr once it ends. One that does not end within a minute
    is made to print every thread's stack (faulthandler, on SIGABRT) for the failure."""
    try:
        return proc.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        stacks = proc.communicate(timeout=30)[1]
        raise AssertionError(f"the process did not end; its threads:\n{stacks}") from None


def _ctrl_c(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal does


def _status(folder: Path, run_id: str) -> str:
    done = run_cli("show", run_id, "--db", "runs.db", "--json", cwd=folder)
    assert done.returncode == 0, done.stderr
    status: str = json.loads(done.stdout)["status"]
    return status


def test_ctrl_c_while_approve_resumes_says_how_to_go_on(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(FLOWS)
    done = run_cli("run", "flows.py:asks", "--db", "runs.db", "-q", "--no-preflight",
                   "--detach-waiting", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    listed = run_cli("approvals", "--db", "runs.db", "--json", cwd=tmp_path)
    [approval] = json.loads(listed.stdout)
    proc = _start(tmp_path, "approve", approval["id"], "--db", "runs.db", "-q")
    try:
        wait_until(lambda: (tmp_path / "resumed").exists(), "the resumed step")
        _ctrl_c(proc)
        err = _ended(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run_id = approval["run_id"]
    assert proc.returncode == 130, err
    assert err == (f"interrupted: run {run_id} stopped; continue it with `counterpoint "
                   f"resume {run_id} --db runs.db`\n")
    assert _status(tmp_path, run_id) == "interrupted"


def test_a_second_ctrl_c_quits_while_a_sync_step_still_runs(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(FLOWS)
    proc = _start(tmp_path, "run", "flows.py:blocking", "--db", "runs.db", "-q",
                  "--no-preflight")
    try:
        wait_until(lambda: (tmp_path / "spin-started").exists(), "the sync step")
        _ctrl_c(proc)
        assert proc.stderr is not None
        first = proc.stderr.readline()
        note = proc.stderr.readline()
        assert note == ("waiting for 1 step(s) in threads to return (a sync step cannot be "
                        "stopped); Ctrl-C again quits at once, and the run resumes from its "
                        "log either way\n"), first + note
        _ctrl_c(proc)  # the step never returns unless released: only this ends the process
        rest = _ended(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, first + note + rest
    assert first.startswith("interrupted: run ") and rest == ""
    run_id = first.split()[2]
    assert _status(tmp_path, run_id) == "interrupted"
    (tmp_path / "release").touch()
    resumed = run_cli("resume", run_id, "--db", "runs.db", "-q", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _status(tmp_path, run_id) == "succeeded"
