"""Store conformance (every store) and the SQLite store's own failure modes."""

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

import orjson
import pytest

import counterpoint as cp
from counterpoint.events import Event, EventKind
from counterpoint.ids import NodeId, RunId
from counterpoint.store import RunStore, SQLiteStore, open_store
from counterpoint.store.sqlite import BLOB_THRESHOLD, MIGRATIONS

RUN = RunId("r-test")


def created(seq: int = 1, at: float = 1.0, graph: str = "g") -> Event:
    return Event(EventKind.RUN_CREATED, at, data={"graph": graph, "source": {"file": "x.py"},
                                                  "options": {}}, seq=seq)


def node_event(seq: int, kind: EventKind = EventKind.NODE_READY, value: str | None = None,
               data: dict[str, object] | None = None) -> Event:
    return Event(kind, float(seq), NodeId(f"n{seq}"), 1, data, value, seq=seq)


# ----------------------------------------------------------------- conformance
def test_events_round_trip_in_order(store: RunStore) -> None:
    store.append(RUN, created())
    for seq in range(2, 50):
        store.append(RUN, node_event(seq, data={"k": seq} if seq % 7 == 0 else None))
    store.flush_sync()
    events = store.events(RUN)
    assert [e.seq for e in events] == list(range(1, 50))
    assert events[0].kind is EventKind.RUN_CREATED
    assert events[7].data == {"k": 8} or events[6].data == {"k": 7}
    assert all(e.output is None for e in events)


def test_append_many_keeps_order_and_stores_what_precedes_an_unstorable_event(
        store: RunStore) -> None:
    store.append_many(RUN, [])  # nothing to queue: not an error
    store.append_many(RUN, [created(), *(node_event(seq) for seq in range(2, 6))])
    store.append_many(RUN, [node_event(6, data={"k": 6})])
    bad = Event(EventKind.NODE_FAILED, 9.0, NodeId("n9"), 1, data={"error": object()}, seq=9)
    if isinstance(store, SQLiteStore):  # the memory store keeps objects as they are
        with pytest.raises(cp.StoreError, match=r"event 9 \(node_failed, node 'n9'\) cannot "
                                                r"be stored"):
            store.append_many(RUN, [node_event(7), node_event(8), bad, node_event(10)])
    else:
        store.append_many(RUN, [node_event(7), node_event(8)])
    store.flush_sync()
    events = store.events(RUN)
    assert [e.seq for e in events] == list(range(1, 9))  # the events before it, in order
    assert events[5].data == {"k": 6}
    assert store.run(RUN).status == "running"


def test_values_survive_including_large_ones_stored_once(store: RunStore) -> None:
    big = '"' + "x" * (BLOB_THRESHOLD * 4) + '"'
    store.append(RUN, created())
    store.append(RUN, node_event(2, EventKind.NODE_SUCCEEDED, value=big))
    store.append(RUN, node_event(3, EventKind.NODE_SUCCEEDED, value=big))
    store.append(RUN, node_event(4, EventKind.NODE_SUCCEEDED, value="42"))
    store.flush_sync()
    values = [e.value for e in store.events(RUN)]
    assert values == [None, big, big, "42"]
    if isinstance(store, SQLiteStore):
        conn = sqlite3.connect(store.path)
        assert conn.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 1
        stored = conn.execute("SELECT SUM(LENGTH(events)) FROM segments").fetchone()[0]
        assert stored < len(big)  # the value is referenced, not copied
        conn.close()


def test_run_index_follows_the_log(store: RunStore) -> None:
    store.append(RUN, created(at=1.0))
    other = RunId("r-other")
    store.append(other, created(at=2.0, graph="h"))
    store.append(RUN, Event(EventKind.RUN_FINISHED, 3.0, data={"status": "succeeded"}, seq=2))
    store.flush_sync()
    assert [r.run_id for r in store.runs()] == [other, RUN]
    record = store.run(RUN)
    assert record.status == "succeeded" and record.graph == "g"
    assert record.source == {"file": "x.py"}
    assert store.run(other).status == "running"


def test_unknown_run_is_a_clear_error(store: RunStore) -> None:
    with pytest.raises(cp.RunNotFound, match="run r-missing not found"):
        store.run(RunId("r-missing"))
    with pytest.raises(cp.RunNotFound, match="r-missing"):
        store.events(RunId("r-missing"))


def test_flush_barrier_makes_appends_durable(store: RunStore) -> None:
    async def scenario() -> None:
        store.append(RUN, created())
        for seq in range(2, 200):
            store.append(RUN, node_event(seq))
        await store.flush()
        assert len(store.events(RUN)) == 199

    asyncio.run(scenario())


def test_settle_when_flushed_resolves_a_future_once_appends_are_durable(
        store: RunStore) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        store.append(RUN, created())
        for seq in range(2, 200):
            store.append(RUN, node_event(seq))
        fut: asyncio.Future[None] = loop.create_future()
        store.settle_when_flushed(fut)
        if isinstance(store, SQLiteStore):  # resolved from the writer's answer, on the loop
            assert not fut.done()
        await asyncio.wait_for(fut, timeout=30)
        assert len(store.events(RUN)) == 199
        again: asyncio.Future[None] = loop.create_future()
        store.settle_when_flushed(again)  # nothing new: resolved at once
        assert again.done() and again.exception() is None

    asyncio.run(scenario())


def test_settle_when_flushed_defaults_to_flush_for_other_stores() -> None:
    """A store that only implements flush() gets the seam's default: fut follows it."""

    class Slow(cp.MemoryStore):
        fail = False
        settle_when_flushed = RunStore.settle_when_flushed

        async def flush(self) -> None:
            await asyncio.sleep(0.01)
            if self.fail:
                raise cp.StoreError("disk full")

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        store = Slow()
        ok: asyncio.Future[None] = loop.create_future()
        store.settle_when_flushed(ok)
        assert not ok.done()  # it waits for flush()
        await asyncio.wait_for(ok, timeout=30)
        store.fail = True
        failed: asyncio.Future[None] = loop.create_future()
        store.settle_when_flushed(failed)
        with pytest.raises(cp.StoreError, match="disk full"):
            await asyncio.wait_for(failed, timeout=30)

    asyncio.run(scenario())


def test_a_top_level_run_returns_with_its_log_durable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")

    async def step() -> int:
        return 1

    g = cp.Graph("durable")
    g.add("a", step)
    result = asyncio.run(cp.run(g, store=store))  # no flush of our own
    kinds = [e.kind for e in store.events(result.run_id)]
    assert kinds[0] is EventKind.RUN_CREATED and kinds[-1] is EventKind.RUN_FINISHED
    assert store.run(result.run_id).status == "succeeded"
    store.close()


def test_estimates_fold_observed_durations(store: RunStore) -> None:
    assert store.estimates() == {}
    store.record_durations({"m:f": [1.0, 3.0]})
    store.record_durations({"m:f": [2.0]})
    assert store.estimates() == {"m:f": pytest.approx(2.0)}


def test_estimates_are_republished_only_when_a_mean_moves_enough(store: RunStore) -> None:
    # the same mapping object while means hold: runs of a graph reuse its ranks
    store.record_durations({"m:slow": [1.0], "m:tiny": [0.00002]})
    first = store.estimates()
    store.record_durations({"m:tiny": [0.00004]})  # +50%, but 10 µs: no rank cares
    assert store.estimates() is first
    store.record_durations({"m:slow": [1.02]})  # +1%
    assert store.estimates() is first
    store.record_durations({"m:slow": [1.5, 1.5]})  # +25%, +255 ms
    moved = store.estimates()
    assert moved is not first and moved["m:slow"] == pytest.approx(1.255)
    store.record_durations({"m:new": [0.0001]})  # a step seen for the first time
    assert store.estimates()["m:new"] == pytest.approx(0.0001)


def test_cancel_requests_reach_watchers(store: RunStore) -> None:
    store.append(RUN, created())
    store.flush_sync()

    async def scenario() -> None:
        seen = asyncio.Event()
        store.watch_cancel(RUN, asyncio.get_running_loop(), seen.set)
        store.request_cancel(RUN)
        await asyncio.wait_for(seen.wait(), timeout=5)
        store.unwatch_cancel(RUN)

    asyncio.run(scenario())
    assert RUN in store.cancel_requests()
    with pytest.raises(cp.RunNotFound):
        store.request_cancel(RunId("r-missing"))


# ----------------------------------------------------------------- sqlite only
def test_sqlite_keeps_the_latest_status_of_many_runs(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    runs = [RunId(f"r-{i:02d}") for i in range(25)]
    for i, run in enumerate(runs):
        store.append(run, created())
        store.append(run, node_event(2, EventKind.NODE_STARTED))
        if i == 0:  # two status changes of one run in one batch: the later one counts
            store.append(run, Event(EventKind.RUN_RESUMED, 2.5, seq=3))
            store.append(run, Event(EventKind.RUN_FINISHED, 3.0, data={"status": "failed"},
                                    seq=4))
        else:
            store.append(run, Event(EventKind.RUN_FINISHED, 3.0, seq=3, data={
                "status": "succeeded" if i % 2 else "failed"}))
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


def _entry(run: RunId, events: list[Event]) -> tuple[object, ...]:
    """One ``events`` entry of a writer batch (the layout :mod:`counterpoint.store.writer`
    documents), for driving the writer without a store."""
    rows = [(e.seq, e.kind, e.node, e.attempt, e.at, e.data, e.value, None) for e in events]
    return (run, events[0].seq, events[-1].seq, orjson.dumps(rows).decode()[1:-1],
            len(events), any(e.kind.startswith("run_") for e in events))


def test_sqlite_writer_puts_many_rows_in_each_statement_and_the_latest_status_wins(
        tmp_path: Path) -> None:
    from counterpoint.store import writer

    path = tmp_path / "runs.db"
    SQLiteStore(path).close()  # the schema
    conn = writer.connect(str(path), 5.0)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    out = writer.Writer(conn, owner_pid=4242, max_params=12)  # 3 segment rows per statement
    runs = [RunId(f"r-{i:02d}") for i in range(25)]
    first = {"n": 1, "events": [_entry(r, [created(), node_event(2)]) for r in runs]}
    second = {"n": 2, "events": [  # r-00 resumes, then fails: the later status counts
        _entry(runs[0], [Event(EventKind.RUN_RESUMED, 2.5, seq=3),
                         Event(EventKind.RUN_FINISHED, 3.0, data={"status": "failed"}, seq=4)]),
        *(_entry(r, [Event(EventKind.RUN_FINISHED, 3.0, seq=3, data={
            "status": "succeeded" if i % 2 else "failed"})]) for i, r in enumerate(runs) if i)]}
    out.commit([first, second])  # one transaction: each run's two entries, one segment
    conn.close()
    inserts = [t for t in statements if t.startswith("INSERT INTO segments")]
    assert len(inserts) > 1 and all(t.count("(") <= 3 for t in inserts), inserts  # chunked
    assert statements.count("BEGIN IMMEDIATE") == 1
    store = SQLiteStore(path)
    for i, run in enumerate(runs):
        assert [e.seq for e in store.events(run)] == list(range(1, 5 if i == 0 else 4))
        record = store.run(run)
        assert record.status == ("succeeded" if i % 2 else "failed")
        assert record.owner_pid == 4242
    store.close()


def test_sqlite_insert_statements_hold_powers_of_two_of_rows() -> None:
    """So their texts repeat (and stay in the statement cache) from commit to commit."""
    from counterpoint.store.writer import _insert

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a, b, c)")
    texts: list[str] = []
    conn.set_trace_callback(texts.append)
    rows = [(i, str(i), i * 0.5) for i in range(23)]
    _insert(conn, "INSERT INTO t", rows, 14)  # 4 rows of 3 fit 14 parameters
    sizes = [text.count("(") for text in texts if text.startswith("INSERT")]
    assert sizes == [4, 4, 4, 4, 4, 2, 1], texts
    assert conn.execute("SELECT a, b, c FROM t ORDER BY a").fetchall() == rows


def test_sqlite_estimates_persist_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    first = SQLiteStore(path)
    first.record_durations({"m:f": [0.5]})
    first.close()
    second = SQLiteStore(path)
    assert second.estimates() == {"m:f": pytest.approx(0.5)}
    second.close()


def test_sqlite_uses_wal_and_records_named_migrations(sqlite_store: SQLiteStore) -> None:
    conn = sqlite3.connect(sqlite_store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY rowid")]
    assert names == [name for name, _ in MIGRATIONS]
    conn.close()


def test_sqlite_files_opened_at_once_by_several_processes_migrate_once(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    script = ("import sys; from counterpoint.store import SQLiteStore; "
              "SQLiteStore(sys.argv[1]).close()")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path)],
                              stderr=subprocess.PIPE, text=True) for _ in range(6)]
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errors
    conn = sqlite3.connect(path)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY rowid")]
    finally:
        conn.close()
    assert names == [name for name, _ in MIGRATIONS]


def test_sqlite_applies_new_migrations_in_order(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteStore(path, migrations=MIGRATIONS[:1]).close()
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY rowid")] == \
        [name for name, _ in MIGRATIONS]
    conn.close()


def test_sqlite_migration_keeps_the_events_written_before_it(tmp_path: Path) -> None:
    """A log written under the first three migrations reads the same after 0004 (segments
    moved to a table in insertion order), and the run goes on being appended to."""
    path = tmp_path / "runs.db"
    old = SQLiteStore(path, migrations=MIGRATIONS[:3])
    old.append(RUN, created())
    for seq in range(2, 30):
        old.append(RUN, node_event(seq, value=f'"v{seq}"' if seq % 3 else None))
        if seq % 7 == 0:
            old.flush_sync()  # several segments
    other = RunId("r-other")
    old.append(other, created(graph="h"))
    old.close()
    before = SQLiteStore(path, migrations=MIGRATIONS[:3])
    expected = [(e.seq, e.kind, e.node, e.value) for e in before.events(RUN)]
    before.close()
    store = SQLiteStore(path)
    assert [(e.seq, e.kind, e.node, e.value) for e in store.events(RUN)] == expected
    assert len(expected) == 29
    store.append(RUN, node_event(30, EventKind.NODE_STARTED))
    store.flush_sync()
    assert [e.seq for e in store.events(RUN)] == list(range(1, 31))
    assert [e.seq for e in store.events(other)] == [1]
    assert store.run(other).graph == "h"
    store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT sql FROM sqlite_master WHERE name = 'segments_by_run'").fetchone()
    with pytest.raises(sqlite3.IntegrityError):  # still one segment per (run, first)
        conn.execute("INSERT INTO segments VALUES (?, 1, 1, '[]')", (RUN,))
    conn.close()


def test_sqlite_newer_schema_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    newer = (*MIGRATIONS, ("9999_from_the_future", "CREATE TABLE future (x INTEGER)"))
    SQLiteStore(path, migrations=newer).close()
    before = path.read_bytes()
    with pytest.raises(cp.StoreTooNew, match=r"newer counterpoint .*9999_from_the_future"):
        SQLiteStore(path)
    assert path.read_bytes() == before


def test_sqlite_corrupt_file_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(b"this is not a database, it is a shopping list\n" * 100)
    before = path.read_bytes()
    with pytest.raises(cp.StoreCorrupt, match=str(path)):
        SQLiteStore(path)
    assert path.read_bytes() == before


def test_sqlite_foreign_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(cp.StoreCorrupt, match="not a counterpoint database"):
        SQLiteStore(path)


def test_sqlite_locked_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        with pytest.raises(cp.StoreLocked, match="locked by another process"):
            SQLiteStore(path, busy_timeout=0.2)
        assert time.monotonic() - started < 30  # bounded by the busy timeout, not forever
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    SQLiteStore(path).close()  # usable again once the lock is gone


def test_open_store_honours_the_environment(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "elsewhere" / "x.db"
    monkeypatch.setenv("COUNTERPOINT_DB", str(target))
    store = open_store()
    assert isinstance(store, SQLiteStore) and store.path == target
    store.close()
    assert target.exists()
    assert isinstance(open_store("memory"), cp.MemoryStore)


def test_sqlite_crash_leaves_a_prefix(tmp_path: Path) -> None:
    """A writer killed mid-stream leaves each run's events as a gap-free prefix."""
    import subprocess
    import sys

    path = tmp_path / "runs.db"
    script = f"""
import os, signal, time
from counterpoint.store import SQLiteStore
from counterpoint.events import Event, EventKind
store = SQLiteStore({str(path)!r})
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
    store.close()


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie nobody reaped counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


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
        assert not _gone(writer)
        proc.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while not _gone(writer) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(writer)
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


def _writer_children() -> list[int]:
    """This process's children running the store's writer script (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            if int(stat[1]) == os.getpid() and b"writer.py" in cmdline:
                found.append(int(entry))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sqlite_store_opened_to_read_starts_no_writer_and_a_write_starts_one(
        tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    store.append(RUN, created())
    store.close()
    before = set(_writer_children())
    reader = SQLiteStore(path)
    try:
        assert [r.run_id for r in reader.runs()] == [RUN] and len(reader.events(RUN)) == 1
        reader.flush_sync()  # nothing to wait for
        asyncio.run(asyncio.wait_for(reader.flush(), timeout=10))
        assert reader.writer_pid is None and set(_writer_children()) == before
        reader.append(RUN, node_event(2))
        writer = reader.writer_pid
        assert writer is not None and writer in _writer_children()
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
    assert closed.writer_pid is None and set(_writer_children()) == before
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
        with pytest.raises(cp.StoreError, match="writer process ended unexpectedly"):
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
    import counterpoint.store.sqlite as sqlite_module

    script = tmp_path / "babbling_writer.py"
    script.write_text("import sys\nprint('hello', flush=True)\nsys.stdin.buffer.read()\n")
    monkeypatch.setattr(sqlite_module, "_WRITER_SCRIPT", str(script))
    store = SQLiteStore(tmp_path / "runs.db")

    async def scenario() -> None:
        with pytest.raises(cp.StoreError, match=r"the writer process answered b'hello\\n'"):
            store.append(RUN, created())  # raises here if the answer was read already
            await asyncio.wait_for(store.flush(), timeout=30)

    asyncio.run(scenario())
    with pytest.raises(cp.StoreError):
        store.close()


def test_sqlite_writer_failure_is_reported_not_hung(tmp_path: Path) -> None:
    """If the writer thread dies (here: the events table vanished), appends and flushes
    raise a StoreError instead of waiting forever."""
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
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
