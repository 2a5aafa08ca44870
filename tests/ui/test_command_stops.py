"""How ``counterpoint ui`` stops, as a real process: SIGTERM closes its store, and a Ctrl-C
that comes before uvicorn serves says nothing about a coroutine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from ui_support import SRC

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)}

QUICK = """
import counterpoint as cp


def one() -> int:
    return 1


graph = cp.Graph("quick")
graph.add("one", one)
"""

INTERRUPTED_AT_START = """
import os
import signal
import sys

import uvicorn

picks_its_loop = uvicorn.Config.get_loop_factory


def ctrl_c_as_uvicorn_picks_its_loop(config):
    # (not from an import audit hook: an interrupt inside importlib's own code could
    # leave an import lock held, and the process hung in one CI run)
    os.kill(os.getpid(), signal.SIGINT)
    return picks_its_loop(config)


uvicorn.Config.get_loop_factory = ctrl_c_as_uvicorn_picks_its_loop
from counterpoint.cli.app import main

sys.argv = ["counterpoint", *sys.argv[1:]]
main()
"""


def _url(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = ""
    while "counterpoint ui:" not in line:  # blocks until the server prints its URL
        line = proc.stdout.readline()
        assert line, f"counterpoint ui exited: {proc.stderr.read() if proc.stderr else ''}"
    return line.split()[2]


def test_sigterm_closes_the_store_and_exits_143(tmp_path: Path) -> None:
    """``kill`` / ``docker stop``: the process died of the SIGTERM uvicorn raised again
    after its shutdown, the store never closed (SQLite's -wal and -shm files stayed)."""
    (tmp_path / "quick.py").write_text(QUICK)
    db = tmp_path / "runs.db"
    subprocess.run([sys.executable, "-m", "counterpoint.cli", "run", "quick.py", "--db",
                    str(db), "--quiet"], cwd=tmp_path, env=ENV, check=True,
                   capture_output=True, timeout=60)
    ui = subprocess.Popen([sys.executable, "-m", "counterpoint.cli", "ui", "--db", str(db),
                           "--port", "0"], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        with urllib.request.urlopen(_url(ui) + "api/runs", timeout=10) as answer:
            assert b'"graph":"quick"' in answer.read()  # the store is open, read
        assert (tmp_path / "runs.db-wal").exists()
        ui.send_signal(signal.SIGTERM)
        assert ui.wait(timeout=30) == 128 + signal.SIGTERM
        assert ui.stderr is not None and "Traceback" not in ui.stderr.read()
    finally:
        ui.kill()
        ui.wait(timeout=30)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quick.py", "runs.db"]


def test_a_ctrl_c_before_uvicorn_serves_is_quiet(tmp_path: Path) -> None:
    (tmp_path / "interrupted.py").write_text(INTERRUPTED_AT_START)
    done = subprocess.run([sys.executable, "interrupted.py", "ui", "--db",
                           str(tmp_path / "runs.db"), "--port", "0"], cwd=tmp_path,
                          env=ENV, capture_output=True, text=True, timeout=60)
    assert "counterpoint ui: http://127.0.0.1:" in done.stdout  # it got as far as serving
    assert done.returncode == 0
    assert done.stderr == ""  # was: "coroutine 'Server.serve' was never awaited"
