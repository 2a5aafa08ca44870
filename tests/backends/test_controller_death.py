"""A controller that dies mid-run on the Ray backend is resumed from its log: SIGKILL the
controller process once the log holds a node's success and the next node's start, resume
in a new process, and check no node whose success was logged ran again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from support import wait_until

from counterpoint.events import EventKind
from counterpoint.ids import RunId
from counterpoint.store import SQLiteStore

CONTROLLER = Path(__file__).resolve().parents[1] / "fixtures" / "ray_controller.py"


def _controller(command: str, db: Path, address: str, side: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(CONTROLLER), command, str(db), "R", address,
                             str(side)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ))


def _logged(db: Path) -> list[tuple[EventKind, str | None]]:
    if not db.exists():
        return []
    store = SQLiteStore(db)
    try:
        return [(e.kind, e.node) for e in store.events(RunId("R"))]
    except Exception:
        return []  # the run is not in the log yet
    finally:
        store.close()


def test_a_killed_controller_is_resumed_without_rerunning_logged_successes(
        ray_cluster: Any, tmp_path: Path) -> None:
    address = ray_cluster.get_runtime_context().gcs_address
    db, side = tmp_path / "runs.db", tmp_path / "side.txt"
    first = _controller("run", db, address, side)
    try:
        wait_until(lambda: (EventKind.NODE_STARTED, "c") in _logged(db),
                   "the log to show node c started after b succeeded", timeout=120)
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
    succeeded = {node for kind, node in _logged(db) if kind is EventKind.NODE_SUCCEEDED}
    assert succeeded == {"a", "b"}
    ran_before = Counter(side.read_text().split())

    second = _controller("resume", db, address, side)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, f"the resume failed ({second.returncode}): {err}"
    assert json.loads(out.strip().splitlines()[-1]) == {"status": "succeeded", "output": 4}
    ran = Counter(side.read_text().split())
    assert ran_before["a"] == ran_before["b"] == 1
    assert ran["a"] == ran["b"] == 1  # their successes were logged: not run again
    assert ran["c"] == 2 and ran["d"] == 1  # c was in flight at the kill: it ran again
