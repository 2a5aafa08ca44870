"""The SQLite store's own behaviour: its writer process, crashes and failures
(:mod:`counterpoint.store.sqlite`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.events import Event, EventKind
from counterpoint.ids import NodeId, RunId
from counterpoint.store import SQLiteStore
from counterpoint.store.sqlite import WriterMode

from .helpers import (
    KILLED_WRITER,
    RUN,
    created,
    finished,
    gone,
    node_event,
    writer_children,
)


@pytest.mark.parametrize("writer", ["process", "thread"])
def test_sqlite_keeps_the_latest_status_of_many_runs(tmp_path: Path, writer: WriterMode) -> None:
    store = SQLiteStore(tmp_path / "runs.db", writer=writer)
    runs = [RunId(f"r-{i:02d}") for i in range(25)]
    for i, run in enumerate(runs):
        store.append(run, created())
        store.append(run, node_event(2, EventKind.NODE_STARTED))
        if i == 0:  # two status changes of one run in one batch: the later one counts
            store.append(run, Event(EventKind.RUN_RESUMED, 2.5, seq=3))
            store.append(run, finished(4, "failed"))
        else:
            store.append(run, finished(3, "succeeded" if i % 2 else "failed"))
    store.flush_sync()
    for i, run in enumerate(runs):
        kinds = [e.kind for e in store.events(run)]
        assert kinds[:2] == [EventKind.RUN_CREATED, EventKind.NODE_STARTED]
        assert kinds[-1] is EventKind.RUN_FINISHED
        record = store.run(run)
        assert record.status == ("succeeded" if i % 2 else "failed")
        assert record.owner_pid == os.getpid()  # the store's process, not its writer's
        assert record.graph == "g" and record.source == {"file": "x.py"}
    store.close()


@pytest.mark.parametrize("writer", ["process", "thread"])
def test_sqlite_crash_leaves_a_prefix(tmp_path: Path, writer: WriterMode) -> None:
    """A process killed mid-stream leaves each run's events as a gap-free prefix."""
    path = tmp_path / "runs.db"
    script = f"""
import os, signal
from counterpoint.store import SQLiteStore
from counterpoint.events import Event, EventKind
store = SQLiteStore({str(path)!r}, writer={writer!r})
runs = [f"r{{i}}" for i in range(5)]
for r in runs:
    store.append(r, Event(EventKind.RUN_CREATED, 0.0, data={{"graph": "g"}}, seq=1))
for seq in range(2, 100000):
    for r in runs:
        store.append(r, Event(EventKind.NODE_READY, 0.0, "n", seq=seq))
    if seq == 30000:
        os.kill(os.getpid(), signal.SIGKILL)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -9
    store = SQLiteStore(path)
    for i in range(5):
        seqs = [e.seq for e in store.events(RunId(f"r{i}"))]
        assert seqs == list(range(1, len(seqs) + 1))
    assert len(store.events(RunId("r0"))) > 1  # it was killed while committing, not before
    store.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_sqlite_writer_process_dies_with_the_process_that_opened_the_store(
        tmp_path: Path) -> None:
    """So no writer outlives a crash and commits after it (under a resumed run's feet),
    even when a forked process keeps the writer's input open."""
    script = f"""
import os, time
from counterpoint.store import SQLiteStore
from counterpoint.events import Event, EventKind
store = SQLiteStore({str(tmp_path / "runs.db")!r})
store.append("r", Event(EventKind.RUN_CREATED, 0.0, data={{"graph": "g"}}, seq=1))
store.flush_sync()  # the writer is up and has committed
forked = os.fork()
if forked == 0:  # holds the pipe to the writer open: it sees no end of input
    time.sleep(120)
    os._exit(0)
print(store.writer_pid, forked, flush=True)
time.sleep(120)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    writer, forked = map(int, proc.stdout.readline().split())
    try:
        assert not gone(writer)
        proc.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30  # the kernel kills it: nothing to wait on
        while not gone(writer) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone(writer)
    finally:
        for pid in (forked, writer):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_sqlite_store_closes_while_a_forked_process_keeps_its_writer_pipe_open(
        tmp_path: Path) -> None:
    script = f"""
import os, signal, time
from counterpoint.store import SQLiteStore
from counterpoint.events import Event, EventKind
store = SQLiteStore({str(tmp_path / "runs.db")!r})
store.append("r", Event(EventKind.RUN_CREATED, 0.0, data={{"graph": "g"}}, seq=1))
assert store.writer_pid is not None  # the first write started the writer
forked = os.fork()
if forked == 0:  # e.g. a multiprocessing worker: holds the pipe to the writer open
    time.sleep(60)
    os._exit(0)
try:
    store.append("r", Event(EventKind.NODE_READY, 0.1, "n", seq=2))
    store.close()
    print(len(SQLiteStore({str(tmp_path / "runs.db")!r}).events("r")), flush=True)
finally:
    os.kill(forked, signal.SIGKILL)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "2"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sqlite_store_opened_to_read_starts_no_writer_and_a_write_starts_one(
        tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    store.append(RUN, created())
    store.close()
    before = set(writer_children())
    reader = SQLiteStore(path)
    try:
        assert [r.run_id for r in reader.runs()] == [RUN] and len(reader.events(RUN)) == 1
        reader.flush_sync()  # nothing to wait for
        asyncio.run(asyncio.wait_for(reader.flush(), timeout=10))
        assert reader.writer_pid is None and set(writer_children()) <= before  # none started
        reader.append(RUN, node_event(2))
        writer = reader.writer_pid
        assert writer is not None and writer in writer_children()
        reader.flush_sync()
        assert [e.seq for e in reader.events(RUN)] == [1, 2]
    finally:
        reader.close()
    assert reader.writer_pid is None
    closed = SQLiteStore(path)
    closed.close()  # never wrote: nothing to stop
    closed.append(RUN, node_event(3))  # after close no writer starts; the flush says why
    with pytest.raises(cp.StoreError, match="is closed"):
        asyncio.run(asyncio.wait_for(closed.flush(), timeout=10))
    with pytest.raises(cp.StoreError, match="is closed"):
        closed.flush_sync()
    with pytest.raises(cp.StoreError, match="is closed"):
        closed.runs()
    assert closed.writer_pid is None and set(writer_children()) <= before
    assert [e.seq for e in SQLiteStore(path).events(RUN)] == [1, 2]


def test_sqlite_store_that_cannot_start_its_writer_says_so_at_the_first_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import counterpoint.store.sqlite as sqlite_module

    def refuse(self: SQLiteStore) -> object:
        raise OSError("no processes left")

    monkeypatch.setattr(sqlite_module.SQLiteStore, "_spawn", refuse)
    store = SQLiteStore(tmp_path / "runs.db")  # opening and reading need no writer
    assert store.runs() == []
    with pytest.raises(cp.StoreError, match=r"cannot start its writer process .*no processes"):
        store.append(RUN, created())
    with pytest.raises(cp.StoreError, match="writer failed earlier"):
        store.append(RUN, created())
    with pytest.raises(cp.StoreError):
        store.close()


def test_sqlite_writer_process_killed_fails_flush_and_keeps_the_log(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    store.append(RUN, created())
    store.flush_sync()
    writer = store.writer_pid
    assert writer is not None and writer != os.getpid()
    os.kill(writer, signal.SIGKILL)

    async def scenario() -> None:
        with pytest.raises(cp.StoreWriterLost, match=KILLED_WRITER):
            store.append(RUN, node_event(2))  # raises here if the death was seen already
            await asyncio.wait_for(store.flush(), timeout=30)

    asyncio.run(scenario())
    assert [e.seq for e in store.events(RUN)] == [1]  # what was committed stays
    with pytest.raises(cp.StoreError):
        store.close()
    assert store.writer_pid is None


def test_sqlite_writer_that_answers_garbage_fails_flush_instead_of_hanging(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deliberate test double for the writer process: it breaks the protocol."""
    import counterpoint.store.shipping as shipping_module

    script = tmp_path / "babbling_writer.py"
    script.write_text("import sys\nprint('hello', flush=True)\nsys.stdin.buffer.read()\n")
    monkeypatch.setattr(shipping_module, "_WRITER_SCRIPT", str(script))
    store = SQLiteStore(tmp_path / "runs.db")

    async def scenario() -> None:
        with pytest.raises(cp.StoreError, match=r"the writer process answered b'hello\\n'"):
            store.append(RUN, created())  # raises here if the answer was read already
            await asyncio.wait_for(store.flush(), timeout=30)

    asyncio.run(scenario())
    with pytest.raises(cp.StoreError):
        store.close()


@pytest.mark.parametrize("writer", ["process", "thread"])
def test_sqlite_writer_failure_is_reported_not_hung(tmp_path: Path, writer: WriterMode) -> None:
    """If the writer fails (here: the events table vanished), appends and flushes raise a
    StoreError instead of waiting forever."""
    path = tmp_path / "runs.db"
    store = SQLiteStore(path, writer=writer)
    store.migrate()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE segments")
    conn.commit()
    conn.close()

    async def scenario() -> None:
        store.append(RUN, created())
        with pytest.raises(cp.StoreError, match="no such table: segments"):
            await asyncio.wait_for(store.flush(), timeout=10)
        with pytest.raises(cp.StoreError, match="writer failed earlier"):
            store.append(RUN, node_event(2))
        with pytest.raises(cp.StoreError):
            await asyncio.wait_for(store.flush(), timeout=10)

    asyncio.run(scenario())
    with pytest.raises(cp.StoreError):
        store.close()


def test_sqlite_refuses_event_data_that_is_not_json_and_keeps_the_log(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        store.append(RUN, created())
        bad = Event(EventKind.NODE_FAILED, 2.0, NodeId("n"), 1, data={"error": object()}, seq=2)
        with pytest.raises(cp.StoreError, match=r"run r-test: event 2 \(node_failed, node 'n'\) "
                                                r"cannot be stored.*JSON-compatible"):
            store.append(RUN, bad)
        store.append(RUN, node_event(2))  # the store still works, and nothing was lost
        store.flush_sync()
        assert [e.seq for e in store.events(RUN)] == [1, 2]
    finally:
        store.close()


def test_sqlite_thread_writer_commits_in_this_process(tmp_path: Path) -> None:
    """``writer="thread"`` starts no writer process: the store's own thread commits, and a
    flush returns once the events are in the file (another connection reads them)."""
    before = set(writer_children())
    store = SQLiteStore(tmp_path / "runs.db", writer="thread")
    try:
        async def scenario() -> None:
            store.append(RUN, created())
            store.append_many(RUN, [node_event(2), finished(3, "succeeded")])
            await store.flush()

        asyncio.run(scenario())
        assert store.writer_pid is None and set(writer_children()) <= before  # none started
        with contextlib.closing(sqlite3.connect(tmp_path / "runs.db")) as conn:
            assert conn.execute("SELECT status FROM runs").fetchall() == [("succeeded",)]
        assert [e.seq for e in store.events(RUN)] == [1, 2, 3]
    finally:
        store.close()


def test_sqlite_thread_writer_that_cannot_connect_says_so_at_the_first_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: SQLiteStore) -> object:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(SQLiteStore, "_connect", refuse)
    store = SQLiteStore(tmp_path / "runs.db", writer="thread")
    with pytest.raises(cp.StoreError, match=r"cannot open it for writing \(unable to open"):
        store.append(RUN, created())
    with pytest.raises(cp.StoreError, match="writer failed earlier"):
        store.append(RUN, created())
    with pytest.raises(cp.StoreError):
        store.close()


def test_sqlite_store_refuses_an_unknown_writer_mode(tmp_path: Path) -> None:
    with pytest.raises(cp.ConfigError, match="writer must be 'process' or 'thread', not 'fork'"):
        SQLiteStore(tmp_path / "runs.db", writer="fork")  # type: ignore[arg-type]
