"""The SQLite store's schema: ordered, named migrations, and how a file is checked and
brought up to date.

Checking is a read (:func:`applied`), so opening a store to read never waits for a
process that holds the write lock; :func:`migrate` takes the write lock, and runs only
when a file is created or holds fewer migrations than this version knows.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import StoreCorrupt, StoreError, StoreLocked, StoreTooNew
from . import paths

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("0001_initial", """
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY, graph TEXT NOT NULL, status TEXT NOT NULL,
            created_at REAL NOT NULL, updated_at REAL NOT NULL, parent TEXT,
            source TEXT, options TEXT, owner_pid INTEGER, owner_host TEXT);
        CREATE INDEX runs_by_created ON runs (created_at DESC);
        CREATE TABLE segments (
            run_id TEXT NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL,
            events TEXT NOT NULL, PRIMARY KEY (run_id, first)) WITHOUT ROWID;
        CREATE TABLE blobs (hash TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE step_stats (step TEXT PRIMARY KEY, count INTEGER NOT NULL,
                                 mean REAL NOT NULL);
    """),
    ("0002_commands", """
        CREATE TABLE commands (
            id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, kind TEXT NOT NULL,
            created_at REAL NOT NULL, done INTEGER NOT NULL DEFAULT 0);
        CREATE INDEX commands_open ON commands (done, run_id);
    """),
    ("0003_model_cache", """
        CREATE TABLE model_cache (
            key TEXT PRIMARY KEY, response TEXT NOT NULL, created_at REAL NOT NULL
        ) WITHOUT ROWID;
    """),
    # Segments in insertion order, found through a small index: the rows of concurrent
    # runs go to the end of the table instead of into pages all over a tree clustered by
    # run (a WITHOUT ROWID table keeps whole rows in its key's order, and SQLite advises
    # it only for rows far smaller than a page).
    ("0004_segments_in_insertion_order", """
        CREATE TABLE segments_new (
            run_id TEXT NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL,
            events TEXT NOT NULL);
        INSERT INTO segments_new (run_id, first, last, events)
            SELECT run_id, first, last, events FROM segments ORDER BY run_id, first;
        DROP TABLE segments;
        ALTER TABLE segments_new RENAME TO segments;
        CREATE UNIQUE INDEX segments_by_run ON segments (run_id, first);
    """),
    # Who owns a run, beyond its pid: a token that a later process given the same pid
    # does not share (see .owners), and when the owner took the run over by a claim.
    ("0005_run_owner_identity", """
        ALTER TABLE runs ADD COLUMN owner_token TEXT;
        ALTER TABLE runs ADD COLUMN claimed_at REAL;
    """),
    # Commands that carry data (an approval's answer), at most one per key: the unique
    # key is what makes the first of two answers to one approval win.
    ("0006_command_payloads", """
        ALTER TABLE commands ADD COLUMN key TEXT;
        ALTER TABLE commands ADD COLUMN payload TEXT;
        CREATE UNIQUE INDEX commands_by_key ON commands (key);
    """),
    # Lineage of forked runs: the run (and the point of its log) a run was forked from,
    # indexed so that a run's forks are found without reading every record.
    ("0007_run_forks", """
        ALTER TABLE runs ADD COLUMN fork_of TEXT;
        ALTER TABLE runs ADD COLUMN fork_seq INTEGER;
        ALTER TABLE runs ADD COLUMN fork_node TEXT;
        CREATE INDEX runs_by_fork ON runs (fork_of) WHERE fork_of IS NOT NULL;
    """),
    # When each blob was last stored: deleting runs removes the blobs nothing refers to,
    # but not one stored lately (it may be for an event not written yet; see .deletion).
    ("0008_blob_times", """
        ALTER TABLE blobs ADD COLUMN touched_at REAL;
    """),
    # The top-level runs, newest first, apart from sub-runs (RunIndex.top_runs): a map
    # over a sub-graph adds a sub-run per item, and the run lists skip them.
    ("0009_top_runs", """
        CREATE INDEX runs_top_by_created ON runs (created_at DESC) WHERE parent IS NULL;
    """),
)
"""Ordered, named schema migrations. Append only; never edit a released one."""

RUN_COLUMNS = ("run_id, graph, status, created_at, updated_at, parent, source, options, "
               "owner_pid, owner_host, owner_token, claimed_at, fork_of, fork_seq, fork_node")
"""The run index's columns, in the order :func:`.index.record_from_row` reads them."""



def applied(conn: sqlite3.Connection, where: str) -> list[str] | None:
    """The migrations applied to the file of ``conn`` (a read: no lock is waited for
    in WAL mode), or ``None`` if it holds no tables yet."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        return None
    if "migrations" not in tables:
        raise StoreCorrupt(
            f"{where}: this SQLite file is not a counterpoint database (tables: "
            f"{', '.join(sorted(tables))}); the file was not modified; "
            f"{paths.ELSEWHERE.removeprefix('or ')}")
    return [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY rowid")]


def check_applied(names: list[str], migrations: Sequence[tuple[str, str]],
                  where: str) -> bool:
    """Whether ``names`` are all of ``migrations``; ``False`` if some are still to apply.
    Refuses a file whose applied migrations this version does not know, or out of order."""
    known = [name for name, _ in migrations]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise StoreTooNew(
            f"{where}: written by a newer counterpoint (unknown migrations: "
            f"{', '.join(unknown)}); upgrade counterpoint to use it. The file was not modified")
    if names != known[:len(names)]:
        raise StoreCorrupt(f"{where}: migrations applied out of order: {names}; the file "
                           "was not modified")
    return len(names) == len(known)


def migrate(path: Path, migrations: Sequence[tuple[str, str]], busy_timeout: float) -> None:
    """Create the file at ``path`` if needed and apply the migrations it lacks, under
    the write lock (waiting up to ``busy_timeout`` for it). Idempotent; safe to call
    from several processes at once (each reads what is applied again under the lock)."""
    where = f"store {path}"
    try:
        conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    except sqlite3.Error as exc:
        raise explain(path, exc, busy_timeout, writing=True) from exc
    try:
        names = applied(conn, where)  # before anything changes the file (its journal mode)
        if names is not None and check_applied(names, migrations, where):
            return
        conn.execute("PRAGMA journal_mode=WAL")
        with immediate(conn):
            conn.execute("CREATE TABLE IF NOT EXISTS migrations "
                         "(name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
            # read again under the write lock: another process opening the same new file
            # may have migrated it while this one waited ("table runs already exists")
            names = [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY rowid")]
            check_applied(names, migrations, where)
            for name, sql in migrations[len(names):]:
                for statement in sql.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT INTO migrations VALUES (?, ?)", (name, time.time()))
    except sqlite3.Error as exc:
        raise explain(path, exc, busy_timeout, writing=True) from exc
    finally:
        conn.close()


def open_existing(path: Path, migrations: Sequence[tuple[str, str]],
                  busy_timeout: float, *, options: str = "mode=rw",
                  read_only: bool = False) -> sqlite3.Connection | None:
    """A reading connection to the store file at ``path``, which exists, its schema
    checked with a read and migrated if it lacks migrations; ``None`` if the file holds
    no tables yet. Never creates the file. ``options`` is the URI's query (see
    :mod:`.sqlite_access`); a ``read_only`` store lacking migrations is refused, since
    applying them would write it."""
    uri = "file:" + urllib.parse.quote(str(path.absolute())) + "?" + options
    where = f"store {path}"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout, isolation_level=None,
                               check_same_thread=False)
    except sqlite3.Error as exc:
        raise explain(path, exc, busy_timeout, writing=False) from exc
    try:
        names = applied(conn, where)
        if names is None:
            conn.close()
            return None
        if not check_applied(names, migrations, where):
            if read_only:
                missing = [name for name, _ in migrations[len(names):]]
                raise StoreError(
                    f"{where}: written by an older counterpoint (it lacks migrations "
                    f"{', '.join(missing)}), and it cannot be written to apply them: "
                    f"{paths.writing_problem(path) or 'it is read-only'}")
            migrate(path, migrations, busy_timeout)
    except sqlite3.Error as exc:
        conn.close()
        raise explain(path, exc, busy_timeout, writing=False) from exc
    except BaseException:
        conn.close()
        raise
    return conn


@contextlib.contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One ``BEGIN IMMEDIATE`` transaction: committed if the block ends normally, rolled
    back if it raises (the block's error is the one reported, not the rollback's)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


def explain(path: Path, exc: sqlite3.Error, busy_timeout: float, *,
            writing: bool) -> StoreError:
    """What ``exc``, raised by SQLite while using the store at ``path``, means for the
    user: the OS's reason if the file system stands in the way, else SQLite's."""
    message = str(exc)
    where = f"store {path}"
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in message or
                                                      "busy" in message):
        return StoreLocked(
            f"{where}: the database is locked by another process (waited "
            f"{busy_timeout:g}s); wait for it to finish or use another --db")
    problem = paths.existing_problem(path, writing=writing) if path.exists() else \
        paths.creation_problem(path)
    if problem is not None:
        return paths.error(path, problem)
    if isinstance(exc, sqlite3.OperationalError) and "readonly" in message:
        return paths.error(path, f"cannot be written ({message}); check that the file and "
                                 f"its directory are writable {paths.ELSEWHERE}")
    if isinstance(exc, sqlite3.OperationalError) and "unable to open" in message:
        return paths.error(path, f"cannot be opened ({message}); check the path and its "
                                 f"permissions {paths.ELSEWHERE}")
    if isinstance(exc, sqlite3.OperationalError):
        return StoreCorrupt(f"{where}: cannot be read as a counterpoint database ({message}); "
                            "the file was not modified")
    return StoreCorrupt(f"{where}: not a readable SQLite database ({message}); the file was "
                        "not modified; move it away or use another --db")
