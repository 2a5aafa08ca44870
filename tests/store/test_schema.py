"""The SQLite store's schema: named migrations, applied once and in order, and files it
refuses untouched (:mod:`counterpoint.store.schema`)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.ids import RunId
from counterpoint.store import SQLiteStore
from counterpoint.store.schema import MIGRATIONS

from .helpers import RUN, created, node_event, write_lock_held


def _applied(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY rowid")]
    finally:
        conn.close()


def test_sqlite_uses_wal_and_records_named_migrations(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    store.append(RUN, created())
    store.close()
    conn = sqlite3.connect(store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    assert _applied(store.path) == [name for name, _ in MIGRATIONS]


def test_sqlite_files_created_at_once_by_several_processes_migrate_once(
        tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    script = ("import sys; from counterpoint.store import SQLiteStore; "
              "SQLiteStore(sys.argv[1]).migrate()")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path)],
                              stderr=subprocess.PIPE, text=True) for _ in range(6)]
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errors
    assert _applied(path) == [name for name, _ in MIGRATIONS]


def test_sqlite_applies_new_migrations_in_order_when_it_opens_an_older_file(
        tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteStore(path, migrations=MIGRATIONS[:1]).migrate()
    assert _applied(path) == [MIGRATIONS[0][0]]
    SQLiteStore(path).close()
    assert _applied(path) == [name for name, _ in MIGRATIONS]


def test_sqlite_migration_keeps_the_events_written_before_it(tmp_path: Path) -> None:
    """A log written under the first three migrations (rows as that version wrote them)
    reads the same after the later ones, and the run goes on being appended to."""
    path = tmp_path / "runs.db"
    SQLiteStore(path, migrations=MIGRATIONS[:3]).migrate()
    other = RunId("r-other")
    conn = sqlite3.connect(path)
    conn.executemany("INSERT INTO runs VALUES (?, ?, 'running', 1.0, 1.0, NULL, '{}', '{}', "
                     "4242, 'old-host')", [(RUN, "g"), (other, "h")])
    segments = [(RUN, 1, 7, [created(), *(node_event(s) for s in range(2, 8))]),
                (other, 1, 1, [created(graph="h")]),
                (RUN, 8, 29, [node_event(s, value=f'"v{s}"' if s % 3 else None)
                              for s in range(8, 30)])]
    for run, first, last, events in segments:
        rows = [[e.seq, e.kind.value, e.node, e.attempt, e.at, e.data, e.value, None]
                for e in events]
        conn.execute("INSERT INTO segments VALUES (?, ?, ?, ?)",
                     (run, first, last, json.dumps(rows)))
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    events = store.events(RUN)
    assert [e.seq for e in events] == list(range(1, 30))
    assert events[0].kind is EventKind.RUN_CREATED and events[9].value == '"v10"'
    record = store.run(RUN)
    assert (record.owner_pid, record.owner_host, record.owner_token) == (4242, "old-host", None)
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
    SQLiteStore(path, migrations=newer).migrate()
    before = path.read_bytes()
    with pytest.raises(cp.StoreTooNew, match=rf"store {path}: written by a newer counterpoint "
                                             r".*9999_from_the_future.*upgrade counterpoint"):
        SQLiteStore(path)
    assert path.read_bytes() == before


def test_sqlite_corrupt_file_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(b"this is not a database, it is a shopping list\n" * 100)
    before = path.read_bytes()
    with pytest.raises(cp.StoreCorrupt, match=rf"store {path}: not a readable SQLite database"
                                              r".*move it away or use another --db"):
        SQLiteStore(path)
    assert path.read_bytes() == before


def test_sqlite_foreign_database_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(cp.StoreCorrupt, match=rf"store {path}: this SQLite file is not a "
                                              r"counterpoint database.*--db"):
        SQLiteStore(path)
    assert path.read_bytes() == before


def test_sqlite_file_to_migrate_while_locked_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteStore(path, migrations=MIGRATIONS[:-1]).migrate()
    with write_lock_held(path), pytest.raises(cp.StoreLocked,
                                              match=rf"store {path}: .*locked by another "
                                                    r"process \(waited 0.2s\)"):
        SQLiteStore(path, busy_timeout=0.2)
    SQLiteStore(path).close()  # usable (and migrated) once the lock is gone
    assert _applied(path) == [name for name, _ in MIGRATIONS]
