"""The run summary shows waiting apart from running (counterpoint run / show)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SHORT_OF_THREADS = """
import time
from counterpoint import Graph

graph = Graph("threads")

def block(i: int) -> int:
    time.sleep(0.05)
    return i

for i in range(3):
    graph.add(f"b{i}", block, i=i)
"""


def test_the_summary_shows_time_spent_waiting_for_a_thread(tmp_path: Path) -> None:
    (tmp_path / "threads.py").write_text(textwrap.dedent(SHORT_OF_THREADS))
    env = {k: v for k, v in os.environ.items() if k not in ("COUNTERPOINT_DB", "COLUMNS")}
    env.update(NO_COLOR="1", COUNTERPOINT_THREADS="1")
    argv = [sys.executable, "-m", "counterpoint.cli"]
    done = subprocess.run([*argv, "run", "threads.py", "--db", "runs.db"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # the causes are listed longest first, and the wait for the log (the store's commit
    # before a step begins) may be the longer one on a loaded machine
    [line] = [ln for ln in done.stdout.splitlines() if ln.startswith("waiting ")]
    causes = line.partition("inside attempts ")[2].split(", ")
    assert any(cause.startswith("thread ") for cause in causes), line
    assert "of it waiting" in done.stdout
