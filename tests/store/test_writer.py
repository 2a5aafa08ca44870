"""The SQLite store's writer process, driven directly (:mod:`counterpoint.store.writer`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from counterpoint.events import Event, EventKind
from counterpoint.ids import RunId
from counterpoint.store import SQLiteStore, writer

from .helpers import created, entry, node_event


def test_writer_puts_many_rows_in_each_statement_and_the_latest_status_wins(
        tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteStore(path).migrate()
    conn = writer.connect(str(path), 5.0)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    out = writer.Writer(conn, owner_pid=4242, owner_token="boot/1", max_params=12)
    runs = [RunId(f"r-{i:02d}") for i in range(25)]
    first = {"n": 1, "events": [entry(r, [created(), node_event(2)]) for r in runs]}
    second = {"n": 2, "events": [  # r-00 resumes, then fails: the later status counts
        entry(runs[0], [Event(EventKind.RUN_RESUMED, 2.5, seq=3),
                        Event(EventKind.RUN_FINISHED, 3.0, data={"status": "failed"}, seq=4)]),
        *(entry(r, [Event(EventKind.RUN_FINISHED, 3.0, seq=3, data={
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
        assert (record.owner_pid, record.owner_token) == (4242, "boot/1")
    store.close()


def test_insert_statements_hold_powers_of_two_of_rows() -> None:
    """So their texts repeat (and stay in the statement cache) from commit to commit."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a, b, c)")
    texts: list[str] = []
    conn.set_trace_callback(texts.append)
    rows = [(i, str(i), i * 0.5) for i in range(23)]
    writer._insert(conn, "INSERT INTO t", rows, 14)  # 4 rows of 3 fit 14 parameters
    sizes = [text.count("(") for text in texts if text.startswith("INSERT")]
    assert sizes == [4, 4, 4, 4, 4, 2, 1], texts
    assert conn.execute("SELECT a, b, c FROM t ORDER BY a").fetchall() == rows
