"""Opening a SQLite store: reading never waits for a writer (defect 19), and nothing is
created before the first write (defect 20)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.ids import RunId
from counterpoint.store import SQLiteStore, close_idle_stores, open_store

from .helpers import RUN, created, finished, node_event, write_lock_held


def _store_with_a_run(path: Path) -> None:
    store = SQLiteStore(path)
    store.append(RUN, created())
    store.append(RUN, node_event(2))
    store.append(RUN, finished(3))
    store.record_durations({"m:f": [0.5]})
    store.cache_put("k", '"v"')
    store.close()


def test_reading_a_store_while_another_process_holds_its_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _store_with_a_run(path)
    with write_lock_held(path):
        store = SQLiteStore(path)  # the default busy timeout: this waited 5 s, then failed
        try:
            assert [r.run_id for r in store.runs()] == [RUN]
            assert store.run(RUN).status == "succeeded"
            assert [e.seq for e in store.events(RUN)] == [1, 2, 3]
            assert store.estimates() == {"m:f": 0.5}
            assert store.cache_get("k") == '"v"'
            assert store.cancel_requests() == set()
        finally:
            store.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "counterpoint.cli", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_counterpoint_runs_and_show_while_another_process_holds_the_write_lock(
        tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _store_with_a_run(path)
    with write_lock_held(path):
        listed = _cli("runs", "--db", str(path))
        shown = _cli("show", RUN, "--db", str(path))
    assert listed.returncode == 0, listed.stderr
    assert RUN in listed.stdout
    assert shown.returncode == 0, shown.stderr
    assert RUN in shown.stdout


def test_a_store_opened_and_closed_without_writing_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "new" / "deeper" / "runs.db"
    store = SQLiteStore(path)
    assert store.runs() == []
    with pytest.raises(cp.RunNotFound, match=rf"run r-x not found in store {path}"):
        store.run(RunId("r-x"))
    with pytest.raises(cp.RunNotFound, match=rf"run r-x not found in store {path}"):
        store.events(RunId("r-x"))
    with pytest.raises(cp.RunNotFound, match=rf"run r-x not found in store {path}"):
        store.request_cancel(RunId("r-x"))
    assert store.estimates() == {}
    assert store.blob("0" * 64) is None and store.cache_get("k") is None
    assert store.cancel_requests() == set()
    store.flush_sync()
    store.close()
    assert not (tmp_path / "new").exists()


def test_a_shared_store_opened_and_closed_without_writing_creates_nothing(
        tmp_path: Path) -> None:
    path = tmp_path / "new" / "runs.db"
    store = open_store(path)
    assert store.runs() == []
    store.close()
    close_idle_stores()
    assert not (tmp_path / "new").exists()


def test_the_first_write_creates_the_file_and_its_directories(tmp_path: Path) -> None:
    path = tmp_path / "new" / "deeper" / "runs.db"
    store = SQLiteStore(path)
    try:
        store.append(RUN, created())
        assert path.exists()
        store.flush_sync()
        assert [r.run_id for r in store.runs()] == [RUN]
    finally:
        store.close()
    reopened = SQLiteStore(path)
    assert [e.kind for e in reopened.events(RUN)] == [EventKind.RUN_CREATED]
    reopened.close()


def test_a_file_another_process_creates_later_is_read(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    reader = SQLiteStore(path)
    try:
        assert reader.runs() == []
        _store_with_a_run(path)
        assert [r.run_id for r in reader.runs()] == [RUN]
    finally:
        reader.close()


def test_an_empty_file_reads_as_an_empty_store_and_is_migrated_at_the_first_write(
        tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.touch()  # what an older counterpoint left behind after a failed run
    store = SQLiteStore(path)
    try:
        assert store.runs() == []
        store.append(RUN, created())
        store.flush_sync()
        assert [r.run_id for r in store.runs()] == [RUN]
    finally:
        store.close()


def test_a_run_that_fails_validation_leaves_no_store(tmp_path: Path) -> None:
    graph = tmp_path / "cyclic.py"
    graph.write_text(textwrap.dedent("""
        import counterpoint as cp

        def step(x: int = 0) -> int:
            return x

        graph = cp.Graph("cyclic")
        graph.add("a", step, after=["b"])
        graph.add("b", step, after=["a"])
    """))
    db = tmp_path / "runs.db"  # (a --db in a folder that does not exist is refused first)
    done = subprocess.run([sys.executable, "-m", "counterpoint.cli", "run", str(graph),
                           "--db", str(db)], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "NO_COLOR": "1"}, timeout=120)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "cycle" in (done.stdout + done.stderr).lower()
    assert not db.exists() and not (tmp_path / ".counterpoint").exists()


@pytest.mark.parametrize("location", ["postgressql://app:s3cret@127.0.0.1:5432/runs",
                                      "mysql://app:s3cret@db/runs", "file:///tmp/runs.db"])
def test_a_url_of_an_unknown_scheme_is_refused_without_its_password(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, location: str) -> None:
    # it was opened as a SQLite path: the run wrote to ./postgressql:/app:s3cret@.../runs
    monkeypatch.chdir(tmp_path)
    with pytest.raises(cp.errors.StoreError, match="is not a store this counterpoint opens") \
            as caught:
        cp.run_sync(_hello_graph(), store=location)
    assert "s3cret" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_counterpoint_run_refuses_a_misspelt_database_url(tmp_path: Path) -> None:
    flow = tmp_path / "flow.py"
    flow.write_text(textwrap.dedent("""
        import counterpoint as cp
        graph = cp.Graph("flow")
        graph.output(graph.add("hi", lambda: "hi"))
    """))
    done = subprocess.run([sys.executable, "-m", "counterpoint.cli", "run", str(flow), "--db",
                           "postgressql://app:s3cret@127.0.0.1:5432/runs"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COUNTERPOINT_DB": ""})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "'postgressql://' is not a store" in done.stderr
    assert "s3cret" not in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flow.py"]


def _hello_graph() -> cp.Graph:
    graph = cp.Graph("hello")
    graph.output(graph.add("hi", _hello))
    return graph


def _hello() -> str:
    return "hi"


@pytest.mark.parametrize("blank", ["", " ", "\t "])
def test_a_blank_counterpoint_db_is_the_default_store(
        blank: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # regression: a value of blanks named a store file called " " in the working directory
    from counterpoint.store import DEFAULT_PATH, default_location

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COUNTERPOINT_DB", blank)
    assert default_location() == str(DEFAULT_PATH)
    store = cp.open_store()
    try:
        run = cp.run_sync(_hello_graph(), store=store)
    finally:
        store.close()
    assert run.ok
    assert sorted(p.name for p in tmp_path.iterdir()) == [".counterpoint"]
