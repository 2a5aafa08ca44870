"""A run store in a PostgreSQL database, which several processes and machines share.

Why psycopg 3: one driver gives the sync API the store's roles need (reads and claims
are synchronous, from any thread), binary ``COPY`` for the events of a group commit,
pipeline mode for its other statements (``executemany``), ``LISTEN``/``NOTIFY`` for the
command bus, and ``psycopg_pool`` for the reading connections; asyncpg is async-only,
and would need a loop thread of its own behind every synchronous call.

Layout: :mod:`.postgres_url` (URLs, passwords, errors), :mod:`.postgres_schema`
(migrations), :mod:`.postgres_writer` (group commit), :mod:`.postgres_commands`
(cancels and answers). Opening checks the schema with a read and creates nothing; the
first write applies the migrations. A run is claimed by one process at a time: the
claim reads the run's row ``FOR UPDATE``, so concurrent claims from any machine are
taken one after the other and each sees the owner the one before it recorded.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import orjson
import psycopg
import psycopg_pool

from ..errors import RunNotFound, StoreCorrupt, StoreError, StoreTooNew
from ..events import KIND_OF, Event, EventKind
from ..ids import NodeId, RunId
from . import owners, postgres_deletion
from . import postgres_commands as commands
from .answers import AnswerCallback
from .base import RunningMeans, RunRecord, RunStore
from .deletion import BLOB_GRACE, Deletion
from .index import record_from_row
from .postgres_schema import MIGRATIONS, RUN_COLUMNS, applied, migrate
from .postgres_url import check, connect, explain, redact
from .postgres_writer import GroupCommitter

__all__ = ["BLOB_THRESHOLD", "PostgresStore"]

BLOB_THRESHOLD = 1024
"""Outputs whose JSON is longer than this many characters are stored by content hash."""
_RUN_LEVEL = frozenset({EventKind.RUN_CREATED, EventKind.RUN_FINISHED, EventKind.RUN_RESUMED})
T = TypeVar("T")


class PostgresStore(RunStore):
    """A run store in the PostgreSQL database at ``url`` (see the module docstring).

    ``lock_timeout``: seconds a claim waits for another's row lock before
    :class:`~counterpoint.errors.StoreLocked`. ``reconnect_timeout``: seconds the writer
    keeps reconnecting after a dropped connection before the store fails.
    """

    def __init__(self, url: str, *, lock_timeout: float = 5.0,
                 reconnect_timeout: float = 30.0,
                 migrations: Sequence[tuple[str, str]] = MIGRATIONS) -> None:
        self.url = check(url)
        self.location = redact(url)
        self._lock_timeout = lock_timeout
        self._migrations = tuple(migrations)
        self._ready = False
        self._closed = False
        self._steps = RunningMeans()
        self._stats_lock = threading.Lock()
        self._known_blobs: dict[str, RunId] = {}
        """Blob -> the run whose events sent it last (as in the SQLite store)."""
        conn = connect(url, lock_timeout=lock_timeout)  # a clear error if it cannot
        try:
            names = self._applied(conn)
            if names is not None:
                self._ready = self._check(names)
                if self._ready:
                    self._steps = RunningMeans({
                        str(r[0]): (int(r[1]), float(r[2])) for r in
                        conn.execute("SELECT step, count, mean FROM cp_step_stats")})
            conn.rollback()
        except psycopg.Error as exc:
            raise explain(url, exc, lock_timeout=lock_timeout) from None
        finally:
            conn.close()
        self._pool = psycopg_pool.ConnectionPool(
            url, min_size=1, max_size=4, num_workers=1, open=False, name="counterpoint",
            check=psycopg_pool.ConnectionPool.check_connection,
            kwargs={"options": f"-c lock_timeout={int(lock_timeout * 1000)}",
                    "application_name": "counterpoint"})
        self._pool.open(wait=False)
        self._writer = GroupCommitter(url, lock_timeout=lock_timeout,
                                      reconnect_timeout=reconnect_timeout, steps=self._steps,
                                      stats_lock=self._stats_lock)
        self._listener = commands.Listener(url, lock_timeout=lock_timeout)

    # ------------------------------------------------------------------ schema
    def _applied(self, conn: psycopg.Connection[tuple[Any, ...]]) -> list[str] | None:
        return applied(conn, f"store {self.location}")

    def _check(self, names: list[str]) -> bool:
        from .schema import check_applied

        try:
            return check_applied(names, self._migrations, f"store {self.location}")
        except StoreTooNew as exc:
            raise StoreTooNew(str(exc).replace("The file was", "The database was")) from None

    def migrate(self) -> None:
        """Apply the migrations the database lacks, now (the first write does this
        itself). Idempotent; safe from many processes at once."""
        if self._ready:
            return
        conn = connect(self.url, lock_timeout=self._lock_timeout)
        try:
            migrate(conn, self._migrations, f"store {self.location}")
        except StoreTooNew as exc:
            raise StoreTooNew(str(exc).replace("The file was", "The database was")) from None
        except psycopg.Error as exc:
            raise explain(self.url, exc, lock_timeout=self._lock_timeout) from None
        finally:
            conn.close()
        self._ready = True

    def _start(self) -> None:
        if self._closed:
            raise StoreError(f"store {self.location} is closed")
        self.migrate()
        self._writer.start()

    def _schema(self) -> bool:
        """Whether the database holds counterpoint's tables. Until it does, each look asks
        again: another process may have made them since (its first run), and a reader
        opened on the fresh database (`counterpoint ui`) must then see its runs."""
        if not self._ready:
            names = self._pooled(self._applied)
            self._ready = names is not None and self._check(names)
        return self._ready

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of one query on a pooled connection (none before the schema exists)."""
        if not self._schema():
            return []
        return self._pooled(lambda conn: conn.execute(sql, params).fetchall())

    def _pooled(self, work: Callable[[psycopg.Connection[tuple[Any, ...]]], T]) -> T:
        try:
            with self._pool.connection(timeout=30) as conn:
                return work(conn)
        except psycopg_pool.PoolTimeout as exc:
            raise StoreError(f"store {self.location}: no connection to the server within "
                             "30s; check that it runs") from exc
        except psycopg.Error as exc:
            raise explain(self.url, exc, lock_timeout=self._lock_timeout) from None

    # ------------------------------------------------------------------ writing
    def append(self, run_id: RunId, event: Event) -> None:
        self.append_many(run_id, (event,))

    def append_many(self, run_id: RunId, events: Sequence[Event]) -> None:
        self._writer.raise_failure()
        if not events:
            return
        self._start()
        rows: list[tuple[Any, ...]] = []
        changes: list[tuple[Any, ...]] = []
        for event in events:
            try:
                data = None if event.data is None else orjson.dumps(event.data).decode()
            except TypeError as exc:
                if rows:
                    self._queue(rows, changes)
                raise StoreError(
                    f"run {run_id}: event {event.seq} ({event.kind}"
                    f"{', node ' + repr(event.node) if event.node else ''}) cannot be "
                    f"stored: {exc}; event data must be JSON-compatible") from exc
            value, blob = event.value, None
            if value is not None and len(value) > BLOB_THRESHOLD:
                blob = hashlib.sha256(value.encode()).hexdigest()
                if self._known_blobs.get(blob) != run_id:  # once a run: see put_blob
                    self._known_blobs[blob] = run_id
                    self.put_blob(value)
                value = None
            rows.append((run_id, event.seq, str(event.kind), event.node, event.attempt,
                         event.at, data, value, blob))
            if event.kind in _RUN_LEVEL:
                changes.append((str(event.kind), run_id, event.at, event.data or {}))
        self._queue(rows, changes)

    def _queue(self, rows: list[tuple[Any, ...]], changes: list[tuple[Any, ...]]) -> None:
        self._writer.queue.append(("events", rows, len(rows), changes))
        self._writer.queued(len(rows))

    async def flush(self) -> None:
        await self._writer.flush()

    def settle_when_flushed(self, fut: asyncio.Future[None]) -> None:
        self._writer.settle_when_flushed(fut)

    def flush_sync(self) -> None:
        self._writer.flush_sync()

    def put_blob(self, text: str) -> str:
        """See :meth:`.BlobStore.put_blob`; sent to the writer every time (it marks the
        blob as used again, which keeps it when runs are deleted: see :mod:`.deletion`)."""
        digest = hashlib.sha256(text.encode()).hexdigest()
        self._start()
        self._writer.blob_pending[digest] = text
        self._writer.queue.append(("blob", digest, text))
        self._writer.poke()
        return digest

    def blob(self, digest: str) -> str | None:
        pending = self._writer.blob_pending.get(digest)
        if pending is not None:
            return pending
        rows = self._read("SELECT data FROM cp_blobs WHERE hash = %s", (digest,))
        return str(rows[0][0]) if rows else None

    def cache_get(self, key: str) -> str | None:
        pending = self._writer.cache_pending.get(key)
        if pending is not None:
            return pending
        rows = self._read("SELECT response FROM cp_model_cache WHERE key = %s", (key,))
        return str(rows[0][0]) if rows else None

    def cache_age(self, key: str) -> float | None:
        if key in self._writer.cache_pending:
            return 0.0  # written moments ago, not yet committed
        rows = self._read("SELECT created_at FROM cp_model_cache WHERE key = %s", (key,))
        return max(0.0, time.time() - float(rows[0][0])) if rows else None

    def cache_put(self, key: str, response: str) -> None:
        self._writer.raise_failure()
        self._start()
        self._writer.cache_pending[key] = response
        self._writer.queue.append(("cache", key, response, time.time()))
        self._writer.poke()

    def estimates(self) -> Mapping[str, float]:
        return self._steps.published()

    def record_durations(self, samples: Mapping[str, Sequence[float]]) -> None:
        self._start()
        with self._stats_lock:
            self._steps.fold(samples)
            self._writer.dirty_stats.update(k for k, v in samples.items() if v)
        self._writer.poke()

    # ------------------------------------------------------------------ commands
    def _direct(self, action: Callable[[psycopg.Connection[tuple[Any, ...]]], Any]) -> Any:
        try:
            with self._pool.connection(timeout=30) as conn:
                return action(conn)
        except psycopg.Error as exc:
            raise explain(self.url, exc, lock_timeout=self._lock_timeout) from None

    def request_cancel(self, run_id: RunId) -> None:
        self.run(run_id)
        self._direct(lambda conn: commands.request_cancel(conn, run_id))

    def cancel_requests(self) -> set[RunId]:
        if not self._schema():
            return set()
        result: set[RunId] = self._direct(commands.open_cancels)
        return result

    def watch_cancel(self, run_id: RunId, loop: asyncio.AbstractEventLoop,
                     callback: Callable[[], None]) -> None:
        self._listener.cancel_watch[run_id] = (loop, callback)
        self._start()
        self._listener.start()

    def unwatch_cancel(self, run_id: RunId) -> None:
        self._listener.cancel_watch.pop(run_id, None)

    def answer_approval(self, run_id: RunId, approval_id: str, answer: dict[str, Any]) -> None:
        self.run(run_id)
        self._direct(lambda conn: commands.answer(conn, run_id, approval_id, answer))

    def approval_answers(self, run_id: RunId) -> dict[str, dict[str, Any]]:
        if not self._schema():
            return {}
        result: dict[str, dict[str, Any]] = self._direct(
            lambda conn: commands.answers_of(conn, run_id))
        return result

    def watch_answers(self, run_id: RunId, loop: asyncio.AbstractEventLoop,
                      callback: AnswerCallback) -> None:
        self._listener.answer_watch[run_id] = (loop, callback)
        self._start()
        self._listener.start()

    def unwatch_answers(self, run_id: RunId) -> None:
        self._listener.answer_watch.pop(run_id, None)

    # ------------------------------------------------------------------ run index
    def claim(self, run_id: RunId, *, pid: int, host: str) -> None:
        """See :meth:`.RunIndex.claim`: the run's row is read ``FOR UPDATE`` in one
        transaction, so claims from any process or machine are taken one at a time."""
        by = owners.claimant(pid, host)

        def take(conn: psycopg.Connection[tuple[Any, ...]]) -> None:
            row = conn.execute(f"SELECT {owners.CLAIM_COLUMNS} FROM cp_runs "
                               "WHERE run_id = %s FOR UPDATE", (run_id,)).fetchone()
            if row is None:
                raise self._not_found(run_id)
            if owners.check_claim(run_id, row, by):
                conn.execute("UPDATE cp_runs SET owner_pid = %s, owner_host = %s, "
                             "owner_token = %s, claimed_at = %s WHERE run_id = %s",
                             (by.pid, by.host, by.token, time.time(), run_id))

        self._transaction(run_id, take)

    def release(self, run_id: RunId, *, pid: int, host: str, previous: RunRecord) -> None:
        values = owners.release_values(run_id, pid, host, previous)
        self._transaction(run_id, lambda conn: conn.execute(
            owners.release_update("cp_runs", "%s"), values))

    def delete_runs(self, run_ids: Iterable[RunId], *,
                    blob_grace: float = BLOB_GRACE) -> Deletion:
        """See :meth:`.RunDeletion.delete_runs`: one transaction, the runs' rows read ``FOR
        UPDATE`` as a claim reads them (a resume and a delete of one run take turns)."""
        ids = list(dict.fromkeys(run_ids))
        if not ids:
            return Deletion()
        return self._transaction(ids[0], lambda conn: postgres_deletion.delete(
            conn, ids, time.time() - blob_grace, self._not_found))

    def _transaction(self, run_id: RunId,
                     action: Callable[[psycopg.Connection[tuple[Any, ...]]], T]) -> T:
        """``action`` in one transaction on a connection of its own, after this store's
        own events are durable (it sees them)."""
        if self._writer.committed < self._writer.appended:
            self.flush_sync()
        if not self._schema():
            raise self._not_found(run_id)
        conn = connect(self.url, lock_timeout=self._lock_timeout)
        try:
            with conn.transaction():
                return action(conn)
        except psycopg.Error as exc:
            raise explain(self.url, exc, lock_timeout=self._lock_timeout) from None
        finally:
            conn.close()

    def run(self, run_id: RunId) -> RunRecord:
        rows = self._read(f"SELECT {RUN_COLUMNS} FROM cp_runs WHERE run_id = %s", (run_id,))
        if not rows:
            raise self._not_found(run_id)
        return record_from_row(rows[0])

    def runs(self, limit: int = 50) -> list[RunRecord]:
        return [record_from_row(r) for r in self._read(
            f"SELECT {RUN_COLUMNS} FROM cp_runs ORDER BY created_at DESC LIMIT %s", (limit,))]

    def ids_containing(self, text: str) -> list[RunId]:
        return [RunId(r[0]) for r in self._read(
            "SELECT run_id FROM cp_runs WHERE strpos(run_id, %s) > 0", (text,))]

    def top_runs(self, limit: int = 50) -> list[RunRecord]:
        return [record_from_row(r) for r in self._read(
            f"SELECT {RUN_COLUMNS} FROM cp_runs WHERE parent IS NULL ORDER BY created_at DESC "
            "LIMIT %s", (limit,))]

    def forks(self, run_id: RunId) -> list[RunRecord]:
        return [record_from_row(r) for r in self._read(
            f"SELECT {RUN_COLUMNS} FROM cp_runs WHERE fork_of = %s ORDER BY created_at",
            (run_id,))]

    def sub_runs(self, run_id: RunId) -> list[RunRecord]:
        # compared as bytes: the database's collation may order "/" anywhere
        return [record_from_row(r) for r in self._read(
            f"SELECT {RUN_COLUMNS} FROM cp_runs WHERE starts_with(run_id, %s) "
            "ORDER BY created_at", (f"{run_id}/",))]

    def _not_found(self, run_id: RunId) -> RunNotFound:
        return RunNotFound(f"run {run_id} not found in store {self.location}; list runs "
                           "with `counterpoint runs`")

    def events(self, run_id: RunId) -> list[Event]:
        rows = self._read(
            "SELECT e.seq, e.kind, e.node, e.attempt, e.at, e.data, "
            "COALESCE(e.value, b.data), e.blob, b.hash IS NULL FROM cp_events e "
            "LEFT JOIN cp_blobs b ON b.hash = e.blob WHERE e.run_id = %s ORDER BY e.seq",
            (run_id,))
        if not rows:
            self.run(run_id)
        out: list[Event] = []
        for seq, kind, node, attempt, at, data, value, blob, missing in rows:
            if blob is not None and missing:
                raise StoreCorrupt(f"store {self.location}: run {run_id} event {seq} refers "
                                   f"to missing blob {blob}")
            out.append(Event(KIND_OF.get(kind) or EventKind(kind), at,
                             NodeId(node) if node is not None else None,
                             attempt, None if data is None else orjson.loads(data), value,
                             None, seq))
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.close()
            if self._listener is not None:
                waker = None
                with self._pool.connection(timeout=5) as conn:
                    waker = conn
                    self._listener.stop(waker)
        except (psycopg.Error, psycopg_pool.PoolTimeout):
            self._listener.stop(None)
        finally:
            self._pool.close()
        self._writer.raise_failure()

