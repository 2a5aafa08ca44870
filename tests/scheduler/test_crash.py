"""Crash and resume: SIGKILL a real process at random moments, resume, compare.

For every trial: the final outputs equal an uninterrupted run's, every node ran
at least once, and no node whose success had reached the log before the kill
ran again. The summary (how many nodes re-ran, and how long before the kill
they had finished) is printed; run with ``-s`` to see it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from counterpoint.events import EventKind
from counterpoint.ids import RunId
from counterpoint.store import SQLiteStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUNNER = FIXTURES / "crash_runner.py"
TRIALS = int(os.environ.get("COUNTERPOINT_CRASH_TRIALS", "24"))


def _runner(command: str, db: Path, run_id: str, side: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "CRASH_SIDE_FILE": str(side)}
    return subprocess.Popen([sys.executable, str(RUNNER), command, str(db), run_id],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _finish(proc: subprocess.Popen[str]) -> dict[str, object]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, f"runner failed ({proc.returncode}): {err}"
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def _executions(side: Path) -> list[tuple[str, float]]:
    if not side.exists():
        return []
    rows = []
    for line in side.read_text().splitlines():
        node, at = line.split("\t")
        rows.append((node, float(at)))
    return rows


def _logged_successes(db: Path, run_id: str) -> set[str]:
    store = SQLiteStore(db)
    try:
        return {e.node for e in store.events(RunId(run_id))
                if e.kind is EventKind.NODE_SUCCEEDED and e.node is not None}
    except Exception:
        return set()  # killed before the run was created: nothing logged
    finally:
        store.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    folder = tmp_path_factory.mktemp("reference")
    side = folder / "side.txt"
    started, launched = time.monotonic(), time.time()
    result = _finish(_runner("run", folder / "runs.db", "r-reference", side))
    result["wall"] = time.monotonic() - started
    # start-up (interpreter, imports, store) before the first node ran: on a busy machine
    # most of the wall time, so kill times are drawn mostly after it
    result["startup"] = min(at for _, at in _executions(side)) - launched
    # and the last node finished well before the process exited (teardown, output)
    result["last"] = max(at for _, at in _executions(side)) - launched
    counts = Counter(node for node, _ in _executions(side))
    assert set(counts.values()) == {1}, "an uninterrupted run executes every node once"
    assert result["status"] == "succeeded"
    return result


def test_sigkill_at_random_moments_then_resume(tmp_path: Path,
                                               reference: dict[str, object]) -> None:
    rng = random.Random(20261129)
    reran_total = 0
    margins: list[float] = []
    killed_before_create = mid_run = 0
    last = float(reference["last"])  # type: ignore[arg-type]
    startup = min(float(reference["startup"]), last - 0.1)  # type: ignore[arg-type]
    # kills are drawn from late in start-up (some land before the run exists) to the last
    # node's finish in the reference run; on a machine whose load changes, the window
    # narrows to where kills landed mid-run, and trials go on until enough did
    low, high = max(0.1, 0.85 * startup), last
    trial = -1
    while trial + 1 < TRIALS or (mid_run < TRIALS // 3 and trial + 1 < 3 * TRIALS):
        trial += 1
        db, side = tmp_path / f"t{trial}.db", tmp_path / f"t{trial}.side"
        run_id = f"r-crash-{trial}"
        proc = _runner("run", db, run_id, side)
        wait = rng.uniform(low, high)
        time.sleep(wait)  # a random moment to kill at, not a wait for a state
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        killed_at = time.time()
        logged = _logged_successes(db, run_id)
        before = Counter(node for node, _ in _executions(side))
        # (what the log held at a kill, how often each node had run by then)
        snapshots = [(logged, before)]
        if not db.exists() or (not logged and not before):
            killed_before_create += 1
            low = min(max(low, wait), high - 0.05)  # too early: later next time
        elif len(logged) < len(reference["outputs"]):  # type: ignore[arg-type]
            mid_run += 1
        else:
            high = max(min(high, wait), low + 0.05)  # too late: earlier next time
        if trial % 4 == 3 and logged:
            # a second crash, this time during the resume
            again = _runner("resume", db, run_id, side)
            time.sleep(rng.uniform(0.35, 0.8))
            again.send_signal(signal.SIGKILL)
            again.communicate(timeout=30)
            logged = _logged_successes(db, run_id)
            snapshots.append((logged, Counter(node for node, _ in _executions(side))))
        if not _logged_successes(db, run_id) and not db.exists():
            result = _finish(_runner("run", db, run_id, side))
        else:
            try:
                result = _finish(_runner("resume", db, run_id, side))
            except AssertionError as exc:
                if "not found" not in str(exc):
                    raise
                result = _finish(_runner("run", db, run_id, side))  # run never reached the log

        assert result["outputs"] == reference["outputs"], f"trial {trial}: outputs differ"
        executions = _executions(side)
        counts = Counter(node for node, _ in executions)
        assert set(counts) == set(reference["outputs"]), f"trial {trial}: a node never ran"  # type: ignore[arg-type]
        for at_kill, runs_by_then in snapshots:
            for node in at_kill:
                # a node may legitimately run twice across two crashes (finished, killed
                # before its success was durable, re-run by the resume); it must never
                # run again once its success is in the log
                assert counts[node] == runs_by_then[node], (
                    f"trial {trial}: node {node} re-ran although its success was in the log")
        for node, n in counts.items():
            if n > 1:
                reran_total += 1
                first_finish = min(at for name, at in executions if name == node)
                margins.append(killed_at - first_finish)
    print(f"\ncrash test: {trial + 1} trials: {mid_run} killed mid-run, {killed_before_create} "
          f"before any node finished; {reran_total} node executions repeated (finished but "
          "success not yet durable at the kill)")
    assert mid_run >= TRIALS // 3, "too few kills landed mid-run for the test to mean much"
    if margins:
        margins.sort()
        print(f"  those nodes had finished {1000 * margins[0]:.1f} to "
              f"{1000 * margins[-1]:.1f} ms before the kill (median "
              f"{1000 * margins[len(margins) // 2]:.1f} ms)")
