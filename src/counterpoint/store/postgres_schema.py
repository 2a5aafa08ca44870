"""The PostgreSQL store's schema: ordered, named migrations, and how a database is
checked and brought up to date.

Checking is a read (:func:`applied`); :func:`migrate` runs under a transaction-scoped
advisory lock, so processes (or machines) that open one new database at once apply each
migration once. A database holding a migration this version does not know is refused
with :class:`~counterpoint.errors.StoreTooNew` and left as it is (the rule of
:func:`.schema.check_applied`, which both stores share).

Every table's name starts with ``cp_``: the database may hold an application's own
tables too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import StoreCorrupt
from .schema import check_applied

if TYPE_CHECKING:
    import psycopg

MIGRATION_LOCK = 0x636F756E74  # "count": the advisory lock key migrations take

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("0001_initial", """
        CREATE TABLE cp_runs (
            run_id TEXT PRIMARY KEY, graph TEXT NOT NULL, status TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL,
            parent TEXT, source TEXT, options TEXT, owner_pid INTEGER, owner_host TEXT,
            owner_token TEXT, claimed_at DOUBLE PRECISION, fork_of TEXT, fork_seq INTEGER,
            fork_node TEXT);
        CREATE INDEX cp_runs_by_created ON cp_runs (created_at DESC);
        CREATE INDEX cp_runs_by_fork ON cp_runs (fork_of) WHERE fork_of IS NOT NULL;
        CREATE TABLE cp_events (
            run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, node TEXT,
            attempt INTEGER, at DOUBLE PRECISION NOT NULL, data TEXT, value TEXT,
            blob TEXT, PRIMARY KEY (run_id, seq));
        CREATE TABLE cp_blobs (hash TEXT PRIMARY KEY, data TEXT NOT NULL);
        CREATE TABLE cp_step_stats (step TEXT PRIMARY KEY, count BIGINT NOT NULL,
                                    mean DOUBLE PRECISION NOT NULL);
        CREATE TABLE cp_model_cache (key TEXT PRIMARY KEY, response TEXT NOT NULL,
                                     created_at DOUBLE PRECISION NOT NULL);
        CREATE TABLE cp_commands (
            id BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, kind TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL, done BOOLEAN NOT NULL DEFAULT FALSE,
            key TEXT UNIQUE, payload TEXT);
        CREATE INDEX cp_commands_open ON cp_commands (run_id) WHERE NOT done;
        CREATE TABLE cp_writer_batches (
            writer TEXT PRIMARY KEY, batch BIGINT NOT NULL, at DOUBLE PRECISION NOT NULL);
    """),
    # When each blob was last stored (see .deletion): a blob stored lately is kept when
    # runs are deleted, even if no event refers to it yet.
    ("0002_blob_times", """
        ALTER TABLE cp_blobs ADD COLUMN touched_at DOUBLE PRECISION;
    """),
    # The top-level runs, newest first, apart from sub-runs (RunIndex.top_runs).
    ("0003_top_runs", """
        CREATE INDEX cp_runs_top_by_created ON cp_runs (created_at DESC) WHERE parent IS NULL;
    """),
)
"""Ordered, named schema migrations. Append only; never edit a released one.
``cp_writer_batches`` records the last batch each writer committed, so a writer whose
connection dropped during a commit learns, once reconnected, whether it landed."""

RUN_COLUMNS = ("run_id, graph, status, created_at, updated_at, parent, source, options, "
               "owner_pid, owner_host, owner_token, claimed_at, fork_of, fork_seq, fork_node")
"""The run index's columns, in the order the store reads them."""


def applied(conn: psycopg.Connection[tuple[Any, ...]], where: str) -> list[str] | None:
    """The migrations applied to the database of ``conn``, or ``None`` if it holds none
    of counterpoint's tables yet."""
    row = conn.execute("SELECT to_regclass('cp_migrations') IS NOT NULL, "
                       "to_regclass('cp_runs') IS NOT NULL").fetchone()
    assert row is not None
    has_migrations, has_runs = row
    if not has_migrations:
        if has_runs:
            raise StoreCorrupt(f"{where}: holds counterpoint's tables without their "
                               "migrations table; the database was not modified")
        return None
    return [str(r[0]) for r in conn.execute("SELECT name FROM cp_migrations ORDER BY id")]


def migrate(conn: psycopg.Connection[tuple[Any, ...]],
            migrations: Sequence[tuple[str, str]], where: str) -> None:
    """Apply the migrations the database of ``conn`` lacks, in one transaction under the
    migration lock. Idempotent; safe from many processes at once."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS cp_migrations (id SERIAL PRIMARY KEY, "
                     "name TEXT UNIQUE NOT NULL, applied_at DOUBLE PRECISION NOT NULL)")
        names = applied(conn, where) or []
        if check_applied(names, migrations, where):
            return
        for name, sql in migrations[len(names):]:
            conn.execute(sql.encode())
            conn.execute("INSERT INTO cp_migrations (name, applied_at) VALUES (%s, %s)",
                         (name, time.time()))
