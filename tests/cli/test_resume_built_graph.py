"""A graph file whose graph a library function builds resumes from that file.

Regression: ``graph = build()`` at the top of ``main.py``, with ``build`` in ``lib.py``,
recorded ``lib`` as where the graph is (the module that called ``Graph(...)``), so
``counterpoint resume`` of a killed run failed with "lib.py: defines no Graph at module
level". The run now records the file the command loaded the graph from.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from support import wait_until

from counterpoint.store import SQLiteStore

LIB = '''
import asyncio
from pathlib import Path

import counterpoint as cp

HERE = Path(__file__).parent


async def first() -> int:
    return 1


async def gate(value: int) -> int:
    (HERE / "started").write_text("")
    while not (HERE / "open").exists():  # the first process is killed while it waits
        await asyncio.sleep(0.01)
    return value + 1


def build() -> cp.Graph:
    g = cp.Graph("made")
    a = g.add("first", first)
    g.add("gate", gate, value=a)
    return g
'''


def _cli(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return _python("-m", "counterpoint.cli", *args, cwd=cwd)


def _python(*args: str, cwd: Path) -> subprocess.Popen[str]:
    environment = {**os.environ, "XDG_CONFIG_HOME": str(cwd / "none")}
    return subprocess.Popen([sys.executable, *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=environment)


def _killed_at_gate(proc: subprocess.Popen[str], folder: Path, db: Path) -> str:
    """SIGKILL ``proc`` once node gate started and the run is in the store; its run id."""
    try:  # (gate may start before the run's record is durable: wait for both)
        wait_until(lambda: (folder / "started").exists() and _listed(db),
                   "node gate to start, and the run to be in the store")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    store = SQLiteStore(db)
    try:
        [record] = store.runs()
        return record.run_id
    finally:
        store.close()


def _listed(db: Path) -> bool:
    if not db.exists():
        return False
    store = SQLiteStore(db)
    try:
        return bool(store.runs())
    finally:
        store.close()


def test_a_killed_run_of_a_graph_built_by_a_library_function_resumes(tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text(LIB)
    (tmp_path / "main.py").write_text("from lib import build\n\ngraph = build()\n")
    db = tmp_path / "runs.db"
    run_id = _killed_at_gate(_cli("run", "main.py", "--db", str(db), "--quiet", cwd=tmp_path),
                             tmp_path, db)
    store = SQLiteStore(db)
    try:
        assert store.run(run_id).source["file"] == str(tmp_path / "main.py")
    finally:
        store.close()

    (tmp_path / "open").write_text("")
    second = _cli("resume", run_id, "--db", str(db), "--json", cwd=tmp_path)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert '"status": "succeeded"' in out
    store = SQLiteStore(db)
    try:
        assert store.run(run_id).status == "succeeded"
        successes = [e.node for e in store.events(run_id)
                     if e.kind.value == "node_succeeded"]
        assert sorted(successes) == ["first", "gate"]  # each success logged once
    finally:
        store.close()


def test_a_graph_that_cannot_be_found_again_says_how_to_resume_it(tmp_path: Path) -> None:
    """Run from Python (``cp.run_sync(build())``), the graph is recorded where ``Graph(...)``
    was called, a module that holds no graph: the resume says what to do instead."""
    (tmp_path / "lib.py").write_text(LIB)
    (tmp_path / "script.py").write_text(
        "import sys\n\nimport counterpoint as cp\nfrom lib import build\n\n"
        "cp.run_sync(build(), store=sys.argv[1])\n")
    db = tmp_path / "runs.db"
    run_id = _killed_at_gate(_python("script.py", str(db), cwd=tmp_path), tmp_path, db)
    resumed = _cli("resume", run_id, "--db", str(db), cwd=tmp_path)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 2, (out, err)
    assert f"run {run_id}: its graph 'made' cannot be found again" in err
    assert "lib.py: defines no Graph at module level" in err
    assert "cp.built_by(graph, function" in err and "resume(run_id, graph=...)" in err
    assert "Traceback" not in err
