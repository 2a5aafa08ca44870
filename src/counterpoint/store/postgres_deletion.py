"""Deleting runs from a PostgreSQL store (:meth:`.postgres.PostgresStore.delete_runs`), in
the transaction the store opens for it. The rules are :mod:`.deletion`'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import RunNotFound
from ..ids import RunId
from .deletion import DIGEST, Deletion, doomed
from .index import RunRecord, record_from_row
from .postgres_schema import RUN_COLUMNS

if TYPE_CHECKING:
    import psycopg

SCAN_ROWS = 2000
"""Rows of events fetched at a time while looking for the blobs they mention."""


def delete(conn: psycopg.Connection[tuple[Any, ...]], run_ids: Sequence[RunId],
           touched_before: float, not_found: Callable[[RunId], RunNotFound]) -> Deletion:
    """Delete ``run_ids`` with their sub-runs, then the blobs no event refers to that were
    last stored before ``touched_before``; ``not_found`` makes the error of an unknown id."""
    def record_of(run_id: RunId) -> RunRecord | None:  # locked, as a claim reads it
        row = conn.execute(f"SELECT {RUN_COLUMNS} FROM cp_runs WHERE run_id = %s FOR UPDATE",
                           (run_id,)).fetchone()
        return None if row is None else record_from_row(row)

    ids = doomed(run_ids, record_of, not_found, lambda: [str(r) for (r,) in conn.execute(
        "SELECT run_id FROM cp_runs WHERE parent IS NOT NULL ORDER BY created_at")])
    events = conn.execute("DELETE FROM cp_events WHERE run_id = ANY(%s)", (ids,)).rowcount
    conn.execute("DELETE FROM cp_commands WHERE run_id = ANY(%s)", (ids,))
    conn.execute("DELETE FROM cp_runs WHERE run_id = ANY(%s)", (ids,))
    return Deletion(runs=tuple(ids), events=max(events, 0),
                    blobs=collect_blobs(conn, touched_before))


def collect_blobs(conn: psycopg.Connection[tuple[Any, ...]], touched_before: float) -> int:
    """Delete the blobs last stored before ``touched_before`` (or at an unknown time) that
    no remaining event mentions; returns how many. The delete checks the time again, so a
    blob a writer stores meanwhile (in its own transaction) is kept."""
    unused = {str(h) for (h,) in conn.execute(
        "SELECT b.hash FROM cp_blobs b WHERE (b.touched_at IS NULL OR b.touched_at < %s) "
        "AND NOT EXISTS (SELECT 1 FROM cp_events e WHERE e.blob = b.hash)",
        (touched_before,))}
    if unused:
        with conn.cursor(name="counterpoint_blob_scan") as scan:  # server side: streamed
            scan.itersize = SCAN_ROWS
            scan.execute("SELECT data, value FROM cp_events "
                         "WHERE data IS NOT NULL OR value IS NOT NULL")
            for data, value in scan:
                if data:
                    unused.difference_update(DIGEST.findall(data))
                if value:
                    unused.difference_update(DIGEST.findall(value))
                if not unused:
                    break
    if not unused:
        return 0
    cur = conn.execute("DELETE FROM cp_blobs WHERE hash = ANY(%s) AND "
                       "(touched_at IS NULL OR touched_at < %s)", (list(unused), touched_before))
    return max(cur.rowcount, 0)
