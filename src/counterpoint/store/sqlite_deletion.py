"""Deleting runs from a SQLite store (:meth:`.sqlite.SQLiteStore.delete_runs`), inside the
``BEGIN IMMEDIATE`` transaction the store opens for it. The rules are :mod:`.deletion`'s."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from ..errors import RunNotFound
from ..ids import RunId
from .deletion import DIGEST, Deletion, doomed
from .index import RunRecord, record_from_row
from .schema import RUN_COLUMNS

CHUNK = 500
"""Run ids (or blob names) bound in one statement (SQLite allows 999 at the least)."""


def delete(conn: sqlite3.Connection, run_ids: Sequence[RunId], touched_before: float,
           not_found: Callable[[RunId], RunNotFound]) -> Deletion:
    """Delete ``run_ids`` with their sub-runs, then the blobs no event refers to that were
    last stored before ``touched_before``; ``not_found`` makes the error of an unknown id."""
    def record_of(run_id: RunId) -> RunRecord | None:
        row = conn.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?",
                           (run_id,)).fetchone()
        return None if row is None else record_from_row(row)

    ids = doomed(run_ids, record_of, not_found, lambda: [r for (r,) in conn.execute(
        "SELECT run_id FROM runs WHERE parent IS NOT NULL ORDER BY created_at")])
    events = 0
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start:start + CHUNK]
        marks = ",".join("?" * len(chunk))
        events += conn.execute("SELECT COALESCE(SUM(last - first + 1), 0) FROM segments "
                               f"WHERE run_id IN ({marks})", chunk).fetchone()[0]
        for table in ("segments", "commands", "runs"):
            conn.execute(f"DELETE FROM {table} WHERE run_id IN ({marks})", chunk)
    return Deletion(runs=tuple(ids), events=events, blobs=collect_blobs(conn, touched_before))


def collect_blobs(conn: sqlite3.Connection, touched_before: float) -> int:
    """Delete the blobs last stored before ``touched_before`` (or at an unknown time) that
    no remaining event mentions; returns how many."""
    unused = {h for (h,) in conn.execute(
        "SELECT hash FROM blobs WHERE touched_at IS NULL OR touched_at < ?", (touched_before,))}
    if unused:
        for (text,) in conn.execute("SELECT events FROM segments"):
            unused.difference_update(DIGEST.findall(text))
            if not unused:
                return 0
    names = list(unused)
    for start in range(0, len(names), CHUNK):
        chunk = names[start:start + CHUNK]
        conn.execute(f"DELETE FROM blobs WHERE hash IN ({','.join('?' * len(chunk))})", chunk)
    return len(names)
