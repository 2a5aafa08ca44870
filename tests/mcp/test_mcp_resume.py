"""A side effect made through an MCP server runs exactly once across a SIGKILL of the
process that ran the agent and a resume in a new process; the killed run's server does
not outlive it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from mcp_support import FIXTURES, alive
from support import wait_until

from counterpoint.events import EventKind
from counterpoint.ids import RunId
from counterpoint.store import SQLiteStore

RUNNER = str(FIXTURES / "mcp_runner.py")
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _runner(command: str, db: Path, work: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, RUNNER, command, str(db), "mcp-crash-run",
                             str(work)], env={**os.environ, "PYTHONPATH": SRC},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _waiting_call_recorded(db: Path) -> bool:
    if not db.exists():  # the runner creates it
        return False
    store = SQLiteStore(db)
    try:
        return any(e.kind is EventKind.TOOL_CALL and (e.data or {}).get("tool") == "wait_for"
                   for e in store.events(RunId("mcp-crash-run")))
    except Exception:  # the run is not in the store yet
        return False
    finally:
        store.close()


def test_a_side_effect_through_mcp_runs_once_across_sigkill_and_resume(
        tmp_path: Path) -> None:
    db, effects, pids = tmp_path / "runs.db", tmp_path / "effects.txt", tmp_path / "pids.txt"
    first = _runner("run", db, tmp_path)
    try:
        wait_until(lambda: _waiting_call_recorded(db) or first.poll() is not None,
                   "the agent's second tool call", timeout=120)
        assert first.poll() is None, first.communicate()
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    assert effects.read_text() == "once\n"
    (killed_server,) = [int(p) for p in pids.read_text().split()]
    # the server dies with the killed run, although its call (wait_for) is still in flight
    wait_until(lambda: not alive(killed_server), "the killed run's MCP server to exit",
               timeout=60)
    (tmp_path / "gate").touch()

    second = _runner("resume", db, tmp_path)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert json.loads(out.splitlines()[-1]) == {"status": "succeeded",
                                                "outputs": {"clerk": "all done"}}
    assert effects.read_text() == "once\n", "the side effect ran again after the resume"
    servers = [int(p) for p in pids.read_text().split()]
    assert len(servers) == 2 and not alive(servers[1])

    store = SQLiteStore(db)
    try:
        results = [e.data or {} for e in store.events(RunId("mcp-crash-run"))
                   if e.kind is EventKind.TOOL_RESULT]
    finally:
        store.close()
    assert [(d["tool"], d.get("replayed", False)) for d in results] == [
        ("append_line", False), ("append_line", True), ("wait_for", False)]
