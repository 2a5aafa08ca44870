"""SIGKILL a process whose pool of workers is draining a work queue, in the middle of a
claim and at random moments; resume it in a new process: every task is completed exactly
once, the killed attempt's claim is expired in the log, and ``show`` prints the board."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from support import wait_until

from counterpoint.board import fold
from counterpoint.events import EventKind
from counterpoint.ids import RunId
from counterpoint.store import SQLiteStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUNNER = FIXTURES / "board_runner.py"
TASKS = 24
WAIT = 60.0
"""Seconds before the test gives up waiting for the runner to reach the claim."""


def _runner(command: str, db: Path, run_id: str, side: Path,
            hang_on: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "BOARD_SIDE_FILE": str(side)}
    env.pop("BOARD_HANG_ON", None)
    if hang_on is not None:
        env["BOARD_HANG_ON"] = hang_on
    return subprocess.Popen([sys.executable, str(RUNNER), command, str(db), run_id],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _recorded(db: Path, run_id: str) -> bool:
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            return conn.execute("SELECT 1 FROM runs WHERE run_id = ?",
                                (run_id,)).fetchone() is not None
    except sqlite3.Error:  # not created yet
        return False


def _finish(proc: subprocess.Popen[str]) -> dict[str, object]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, f"runner failed ({proc.returncode}): {err}"
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def _wait_for_line(side: Path, prefix: str, proc: subprocess.Popen[str]) -> None:
    """Poll the side file (a real observable) until a line starts with ``prefix``."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if side.exists() and any(line.startswith(prefix)
                                 for line in side.read_text().splitlines()):
            return
        assert proc.poll() is None, f"the runner ended early: {proc.communicate()}"
        time.sleep(0.01)
    raise AssertionError(f"no {prefix!r} line within {WAIT}s")


def _check_resumed(db: Path, run_id: str, result: dict[str, object]) -> list[dict[str, object]]:
    assert result["status"] == "succeeded"
    assert result["results"] == {f"t{n}": n * 10 for n in range(TASKS)}
    assert result["counts"] == {"open": 0, "claimed": 0, "done": TASKS}
    store = SQLiteStore(db)
    try:
        events = store.events(RunId(run_id))
    finally:
        store.close()
    done = Counter((e.data or {})["item"] for e in events if e.kind is EventKind.CLAIM_DONE)
    assert done == {f"t{n}": 1 for n in range(TASKS)}  # exactly once, none lost
    puts = [e for e in events if e.kind is EventKind.QUEUE_PUT]
    assert len(puts) == TASKS  # a re-run producer put nothing twice
    board = fold(events)
    assert {i: q.result for i, q in board.queues["tasks"].items.items()} == result["results"]
    return [e.data or {} for e in events if e.kind is EventKind.CLAIM_EXPIRED]


def test_a_worker_killed_in_the_middle_of_a_claim_loses_no_task(tmp_path: Path) -> None:
    db, side, run_id = tmp_path / "runs.db", tmp_path / "side.txt", "r-board-crash"
    proc = _runner("run", db, run_id, side, hang_on="t5")
    try:
        _wait_for_line(side, "hung t5", proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    result = _finish(_runner("resume", db, run_id, side))
    expired = _check_resumed(db, run_id, result)
    assert "t5" in {d["item"] for d in expired}  # the killed attempt's claim, in the log
    assert all("ended without completing it" in str(d["reason"]) for d in expired)

    shown = subprocess.run([sys.executable, "-m", "counterpoint.cli", "show", run_id,
                            "--db", str(db)], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "queue tasks: 24 done, 0 claimed, 0 open" in shown.stdout
    assert "t5" in shown.stdout and "expired" in shown.stdout


def test_kills_at_random_moments_lose_no_task(tmp_path: Path) -> None:
    rng = random.Random(32)
    for trial in range(3):
        db, side, run_id = tmp_path / f"runs{trial}.db", tmp_path / f"s{trial}", f"r-{trial}"
        proc = _runner("run", db, run_id, side)
        _wait_for_line(side, "start", proc)  # the workers have begun
        # and the run is durable: a kill before its first commit leaves nothing to resume
        wait_until(lambda db=db, run_id=run_id: _recorded(db, run_id),
                   f"run {run_id} to be in {db}")
        time.sleep(rng.uniform(0.0, 0.15))  # the moment of the kill, not a wait for a state
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        _check_resumed(db, run_id, _finish(_runner("resume", db, run_id, side)))
