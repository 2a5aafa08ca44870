"""``run --db PATH`` where no run could be recorded (a pseudo file system, a directory, a
device, a missing directory, a read-only directory or file) is one ``error:`` line naming
the path and what to do, exit 2, before the graph's file is imported; ``runs`` still
reads a read-only store."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from store.helpers import CLI_MAIN, unprivileged
from typer.testing import CliRunner

from counterpoint.cli.app import app

# importing the file leaves a mark: the store is refused before the graph is loaded
FLOW = """
from pathlib import Path
import counterpoint as cp

Path(__file__).with_name("imported").write_text("yes")

def a() -> int:
    return 1

graph = cp.Graph("flow")
graph.add("a", a)
"""



def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: str) -> tuple[int, str]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.py").write_text(FLOW)
    result = CliRunner().invoke(app, ["run", "flow.py", "--db", db, "-q", "--no-preflight"])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.exception
    return result.exit_code, result.output


@pytest.mark.skipif(sys.platform != "linux", reason="/proc")
def test_a_pseudo_file_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, output = _run(tmp_path, monkeypatch, "/proc/runs.db")
    assert code == 2
    assert output.startswith("error: store /proc/runs.db: no file can be created in /proc (")
    assert "it is not on a disk (a pseudo file system such as /proc or /sys); choose a " \
        "path on a disk (e.g. ./runs.db)" in output
    assert not (tmp_path / "imported").exists()


@pytest.mark.parametrize(("db", "message"), [
    (".", "error: store .: . is a directory; pass the path of a file in it (e.g. runs.db)"),
    ("/dev/null", "error: store /dev/null: /dev/null is not a regular file (a device, a "
                  "pipe or a socket); pass the path of a SQLite file, e.g. ./runs.db"),
    ("flow.py/runs.db", "error: store flow.py/runs.db: flow.py is a file, not a directory"),
    ("runs/2026/runs.db", "error: store runs/2026/runs.db: its directory runs/2026 does not "
                          "exist; create it first (mkdir -p runs/2026), or correct the path "
                          "(--db / COUNTERPOINT_DB)"),
])
def test_a_place_no_store_can_be_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         db: str, message: str) -> None:
    code, output = _run(tmp_path, monkeypatch, db)
    assert code == 2
    assert " ".join(output.split()).startswith(message)
    assert not (tmp_path / "imported").exists()
    assert not (tmp_path / "runs").exists()


def test_the_default_store_is_still_created_with_its_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COUNTERPOINT_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.py").write_text(FLOW)
    result = CliRunner().invoke(app, ["run", "flow.py", "-q", "--no-preflight"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / ".counterpoint" / "runs.db").is_file()


def test_a_read_only_directory(tmp_path: Path) -> None:
    (tmp_path / "flow.py").write_text(FLOW)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    done = unprivileged(CLI_MAIN, "run", str(tmp_path / "flow.py"), "--db",
                        str(locked / "runs.db"), "-q", "--no-preflight")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"error: store {locked / 'runs.db'}: no permission to "
                                  f"create the store file in {locked}; make {locked} writable")
    assert not (tmp_path / "imported").exists()


def test_a_read_only_store_is_refused_for_a_run_and_read_by_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "runs.db"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.py").write_text(FLOW)
    done = CliRunner().invoke(app, ["run", "flow.py", "--db", str(path), "--json", "-q",
                                    "--no-preflight"])
    assert done.exit_code == 0, done.output
    run_id = json.loads(done.output)["run_id"]
    path.chmod(0o444)
    (tmp_path / "imported").unlink()
    done = unprivileged(CLI_MAIN, "run", str(tmp_path / "flow.py"), "--db", str(path), "-q",
                        "--no-preflight")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"error: store {path}: {path} is read-only; make it "
                                  "writable (chmod u+w)")
    assert not (tmp_path / "imported").exists()
    listed = unprivileged(CLI_MAIN, "runs", "--db", str(path))
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert run_id in listed.stdout
