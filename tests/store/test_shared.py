"""Shared SQLite stores: one open store and writer per file and process, handed out by
``open_store`` (:mod:`counterpoint.store.shared`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.store import SharedStore, SQLiteStore, close_idle_stores, open_store, shared

from .helpers import KILLED_WRITER, RUN, created, gone, node_event


def _handle(path: Path | str) -> SharedStore:
    store = open_store(path)
    assert isinstance(store, SharedStore)
    return store


def test_open_store_honours_the_environment(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "elsewhere" / "x.db"
    monkeypatch.setenv("COUNTERPOINT_DB", str(target))
    store = open_store()
    assert isinstance(store, SharedStore)
    assert store.path == target and store.location == str(target)
    store.append(RUN, created())
    store.close()
    assert target.exists()
    assert isinstance(open_store("memory"), cp.MemoryStore)
    assert isinstance(open_store(":memory:"), cp.MemoryStore)


def test_handles_on_one_file_share_one_store_and_its_writer(tmp_path: Path) -> None:
    first = _handle(tmp_path / "runs.db")
    second = _handle(str(tmp_path / "." / "runs.db"))  # the same file, spelled otherwise
    try:
        assert first.store is second.store
        first.append(RUN, created())
        first.flush_sync()
        assert [e.seq for e in second.events(RUN)] == [1]
        writer = first.writer_pid
        assert writer is not None and writer == second.writer_pid
        first.close()
        second.append(RUN, node_event(2))  # the other handle goes on
        second.flush_sync()
        assert [e.seq for e in second.events(RUN)] == [1, 2]
    finally:
        first.close()
        second.close()
    assert not gone(writer)  # idle, kept for the next user
    third = _handle(tmp_path / "runs.db")
    assert third.writer_pid == writer  # no new writer process
    third.close()
    close_idle_stores()
    assert gone(writer) and third.store.writer_pid is None
    fourth = _handle(tmp_path / "runs.db")
    assert fourth.store is not third.store  # a closed store is not handed out again
    assert [e.seq for e in fourth.events(RUN)] == [1, 2]
    fourth.close()


def test_each_thread_gets_a_store_of_its_own(tmp_path: Path) -> None:
    """A store takes appends from one thread at a time: runs in two threads must not
    append to one store at the same moment."""
    mine = _handle(tmp_path / "runs.db")
    theirs: list[SharedStore] = []
    thread = threading.Thread(target=lambda: theirs.append(_handle(tmp_path / "runs.db")))
    thread.start()
    thread.join(timeout=60)
    try:
        assert theirs and theirs[0].store is not mine.store
    finally:
        mine.close()
        for handle in theirs:
            handle.close()


def test_closing_a_handle_makes_its_appends_durable(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = _handle(path)
    store.append(RUN, created())
    for seq in range(2, 500):
        store.append(RUN, node_event(seq))
    store.close()  # the writer stays up, idle; what was appended is committed
    reader = SQLiteStore(path)
    assert len(reader.events(RUN)) == 499
    reader.close()


def test_a_closed_handle_refuses_every_use(tmp_path: Path) -> None:
    store = _handle(tmp_path / "runs.db")
    store.close()
    store.close()  # idempotent
    with pytest.raises(cp.StoreError, match="this handle was closed"):
        store.append(RUN, created())
    with pytest.raises(cp.StoreError, match="this handle was closed"):
        store.runs()
    with pytest.raises(cp.StoreError, match="this handle was closed"):
        store.flush_sync()
    other = _handle(tmp_path / "runs.db")  # the shared store itself is fine
    assert other.runs() == []
    other.close()


def test_an_idle_store_closes_after_its_idle_period(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared, "IDLE_SECONDS", 0.0)
    store = _handle(tmp_path / "runs.db")
    store.append(RUN, created())
    writer = store.writer_pid
    assert writer is not None
    store.close()
    for timer in threading.enumerate():
        if timer.name == "counterpoint-store-idle":
            timer.join(timeout=60)
    assert gone(writer) and store.store.writer_pid is None
    again = _handle(tmp_path / "runs.db")
    assert again.store is not store.store
    again.close()


def test_a_store_whose_file_was_replaced_is_not_handed_out_again(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    first = _handle(path)
    first.append(RUN, created())
    first.close()
    for name in ("runs.db", "runs.db-wal", "runs.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)  # the user deleted the store
    second = _handle(path)
    try:
        assert second.store is not first.store
        assert second.runs() == []
        second.append(RUN, created())
        second.flush_sync()
    finally:
        second.close()
    reader = SQLiteStore(path)  # written to the file now at the path, not the deleted one
    assert [r.run_id for r in reader.runs()] == [RUN]
    reader.close()


def test_a_store_whose_writer_failed_is_not_handed_out_again(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    first = _handle(path)
    first.append(RUN, created())
    first.flush_sync()
    writer = first.writer_pid
    assert writer is not None
    os.kill(writer, signal.SIGKILL)
    with pytest.raises(cp.StoreError, match="writer"):
        first.append(RUN, node_event(2))  # raises here if the death was seen already
        first.flush_sync()
    with pytest.raises(cp.StoreWriterLost, match=KILLED_WRITER):
        first.close()
    second = _handle(path)
    try:
        assert second.store is not first.store
        second.append(RUN, node_event(2))
        second.flush_sync()
        assert [e.seq for e in second.events(RUN)] == [1, 2]
    finally:
        second.close()


def test_run_sync_by_path_reuses_the_writer_of_the_run_before(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")

    def step() -> int:
        return 1

    graph = cp.Graph("one")
    graph.add("a", step)
    first = cp.run_sync(graph, store=path)
    watcher = _handle(path)  # to see the shared store's writer
    writer = watcher.writer_pid
    second = cp.run_sync(graph, store=path)
    assert writer is not None and watcher.writer_pid == writer
    assert [r.status for r in watcher.runs()] == ["succeeded", "succeeded"]
    assert {first.run_id, second.run_id} == {r.run_id for r in watcher.runs()}
    watcher.close()


_FORKS = """
import os, sys
from counterpoint.events import Event, EventKind
from counterpoint.store import open_store
path = sys.argv[1]
parent = open_store(path)
parent.append("r-parent", Event(EventKind.RUN_CREATED, 0.0, data={"graph": "g"}, seq=1))
parent.flush_sync()
child = os.fork()
if child == 0:
    mine = open_store(path)
    assert mine.store is not parent.store, "the child was handed the parent's store"
    mine.append("r-child", Event(EventKind.RUN_CREATED, 0.0, data={"graph": "g"}, seq=1))
    mine.flush_sync()
    print("child", mine.writer_pid, flush=True)
    mine.close()
    sys.exit(0)  # a normal exit: atexit runs in the child, and must not close the parent's
_, status = os.waitpid(child, 0)
assert status == 0, status
parent.append("r-parent", Event(EventKind.NODE_READY, 0.1, "n", seq=2))
parent.flush_sync()
print("parent", parent.writer_pid, flush=True)
parent.close()
"""


def test_a_forked_child_opens_a_store_and_writer_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    done = subprocess.run([sys.executable, "-c", _FORKS, str(path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    writers = dict(line.split() for line in done.stdout.splitlines())
    assert writers["child"] != writers["parent"]
    reader = SQLiteStore(path)
    assert [e.seq for e in reader.events(cp.RunId("r-parent"))] == [1, 2]
    assert [e.seq for e in reader.events(cp.RunId("r-child"))] == [1]
    reader.close()
