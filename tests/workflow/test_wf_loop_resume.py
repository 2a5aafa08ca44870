"""A loop step killed in the middle resumes at the iteration that was in flight: every
finished iteration's output is in the log (node ``ID.N``), so it does not run again.

The first process SIGKILLs itself from inside iteration 3 (after making what it has
recorded durable, as a step about to do something irreversible would); ``counterpoint
resume`` then finishes the run in a fresh process that rebuilds the graph from the YAML
file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from typer.testing import CliRunner

import counterpoint
from counterpoint.cli.app import app
from counterpoint.store import SQLiteStore

SRC = str(Path(counterpoint.__file__).resolve().parents[1])
"""The source tree under test: the subprocesses import the same counterpoint."""

WORKFLOW = """
name: durable-loop
steps:
  count:
    python: steps.py:work
    args: {index: "${loop.index}", previous: "${loop.previous}"}
    loop: {max: 5}
  report:
    python: steps.py:report
    args: {last: "${steps.count.output}", every: "${steps.count.iterations}"}
output: report
"""

STEPS = """
import os
import signal
from pathlib import Path

from counterpoint.context import current_context

HERE = Path(__file__).parent


async def work(index: int, previous: int | None) -> int:
    with (HERE / "ran.txt").open("a") as f:  # the side effect counted per iteration
        f.write(f"{index}\\n")
    crash = HERE / "crash-at-3"
    if index == 3 and crash.exists():
        crash.unlink()
        ctx = current_context()
        assert ctx is not None
        await ctx.flush()  # iterations 1 and 2 are in the log before the process dies
        os.kill(os.getpid(), signal.SIGKILL)
    return (previous or 0) + index


def report(last: int, every: list[int]) -> dict:
    return {"last": last, "every": every}
"""


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "counterpoint.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200", "PYTHONPATH": SRC})


def test_a_loop_killed_mid_way_does_not_rerun_finished_iterations(tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    (tmp_path / "steps.py").write_text(STEPS)
    (tmp_path / "crash-at-3").write_text("")
    db = tmp_path / "runs.db"

    first = _cli("run", "wf.yaml", "--db", str(db), "-q", cwd=tmp_path)
    assert first.returncode == -signal.SIGKILL, first.stderr
    store = SQLiteStore(db)
    try:
        run_id = store.runs()[0].run_id
    finally:
        store.close()

    resumed = _cli("resume", run_id, "--db", str(db), "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    runs = Counter((tmp_path / "ran.txt").read_text().split())
    # 1 and 2 had finished: once each; 3 was in flight: again; 4 and 5 ran after resume
    assert runs == {"1": 1, "2": 1, "3": 2, "4": 1, "5": 1}
    out = json.loads(resumed.stdout)
    assert out["status"] == "succeeded"
    assert out["outputs"]["report"] == {"last": 15, "every": [1, 3, 6, 10, 15]}

    # each iteration is a node of the run, as `counterpoint show` reads it from the log
    shown = CliRunner().invoke(app, ["show", run_id, "--db", str(db), "--json"])
    assert shown.exit_code == 0, shown.output
    nodes = json.loads(shown.output)["nodes"]
    assert {f"count.{i}": nodes[f"count.{i}"]["status"] for i in range(1, 6)} == {
        f"count.{i}": "succeeded" for i in range(1, 6)}
    assert nodes["count.3"]["attempts"] == 2  # the one cut short by the kill, and again
    assert [nodes[n]["attempts"] for n in ("count.1", "count.2", "count.4")] == [1, 1, 1]
