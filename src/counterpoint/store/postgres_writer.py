"""The PostgreSQL store's group commit: one thread, one connection, many appends per
transaction.

The event loop only queues (:meth:`GroupCommitter.queue_events`, a deque append). The
committer thread takes everything queued since its last commit and writes it in one
transaction: blobs first, then the run index's new rows, the events (one binary
``COPY``), the index's status changes, step statistics and cache entries (statements
sent in pipeline mode, so a commit costs one round trip per kind of row, not per row).
Transactions commit in the order their contents were queued, so what survives a crash
(of this process, or of the server) is a prefix of every run's events.

A dropped connection (a restarted server, a cut network, ``pg_terminate_backend``) does
not lose the batch: the committer reconnects, for up to ``reconnect_timeout`` seconds,
asks ``cp_writer_batches`` whether the interrupted transaction committed (every
transaction records its batch number there), and retries it only if it did not. If
the server stays away, or refuses a batch for a reason a retry cannot fix, the store
fails clearly: flushes raise :class:`~counterpoint.errors.StoreError` naming how far the
log is durable, and what was committed stays committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from ..errors import StoreError
from . import owners
from .base import RunningMeans
from .postgres_url import connect, explain, redact

__all__ = ["GATHER_SECONDS", "Batch", "GroupCommitter"]

GATHER_SECONDS = 0.002
"""How long the committer lets a burst of appends gather before it commits, unless a
flush is waiting: fewer, larger transactions."""
_EVENT_TYPES = ["text", "int4", "text", "text", "int4", "float8", "text", "text", "text"]
_CREATE = ("INSERT INTO cp_runs (run_id, graph, status, created_at, updated_at, parent, "
           "source, options, owner_pid, owner_host, owner_token, fork_of, fork_seq, fork_node)"
           " VALUES (%s, %s, 'running', %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
           "ON CONFLICT (run_id) DO UPDATE SET graph = excluded.graph, status = 'running', "
           "created_at = excluded.created_at, updated_at = excluded.updated_at, "
           "parent = excluded.parent, source = excluded.source, options = excluded.options, "
           "owner_pid = excluded.owner_pid, owner_host = excluded.owner_host, "
           "owner_token = excluded.owner_token, fork_of = excluded.fork_of, "
           "fork_seq = excluded.fork_seq, fork_node = excluded.fork_node")
_STATUS = ("UPDATE cp_runs SET status = %s, updated_at = %s, owner_pid = %s, owner_host = %s, "
           "owner_token = %s WHERE run_id = %s")
"""The process that writes a run's status becomes its owner (it runs it)."""
_Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]", int]


@dataclass(slots=True)
class Batch:
    """What one transaction writes (gathered from the queues by the committer)."""

    number: int
    events: list[tuple[Any, ...]] = field(default_factory=list)
    """Rows of ``cp_events``, in queue order."""
    created: list[tuple[Any, ...]] = field(default_factory=list)
    status: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    """Run -> its latest status change."""
    finished: list[str] = field(default_factory=list)
    blobs: list[tuple[str, str]] = field(default_factory=list)
    cache: list[tuple[str, str, float]] = field(default_factory=list)
    stats: list[tuple[str, int, float]] = field(default_factory=list)
    count: int = 0
    """How many events it holds."""


class GroupCommitter:
    """The store's write path (see the module docstring). Thread-safe queues in; one
    thread out. ``steps`` and ``stats_lock`` are the store's step estimates."""

    def __init__(self, url: str, *, lock_timeout: float, reconnect_timeout: float,
                 steps: RunningMeans, stats_lock: threading.Lock) -> None:
        self.url = url
        self.lock_timeout = lock_timeout
        self.reconnect_timeout = reconnect_timeout
        self.steps, self.stats_lock = steps, stats_lock
        self.writer_id = uuid.uuid4().hex
        """This committer's row in ``cp_writer_batches``."""
        self.queue: deque[tuple[Any, ...]] = deque()
        """Entries ``("events", rows, count, index changes)``, ``("blob", hash, text)``,
        ``("cache", key, response, at)``, in the order they must commit."""
        self.dirty_stats: set[str] = set()
        self.blob_pending: dict[str, str] = {}
        self.cache_pending: dict[str, str] = {}
        """Queued but not yet committed (read-your-writes)."""
        self.appended = 0
        self.committed = 0
        self.failure: StoreError | None = None
        self._waiters: deque[_Waiter] = deque()
        self._done = threading.Condition()
        self._wake = threading.Event()
        self._urgent = threading.Event()
        self._closing = False
        self._batches = 0
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._on_committed: Callable[[], None] | None = None

    # ------------------------------------------------------------------ the queue side
    def start(self) -> None:
        """Start the committer thread unless it runs already (every write calls this)."""
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is not None:
                return
            if self._closing:
                raise StoreError(f"store {redact(self.url)} is closed")
            self._conn = connect(self.url, lock_timeout=self.lock_timeout)
            self._thread = threading.Thread(target=self._loop, name="counterpoint-pg-writer",
                                            daemon=True)
            self._thread.start()

    def queued(self, count: int) -> None:
        """``count`` events were queued: wake the committer."""
        self.appended += count
        if not self._wake.is_set():
            self._wake.set()

    def poke(self) -> None:
        """Something other than events was queued."""
        self._wake.set()

    def raise_failure(self) -> None:
        if self.failure is not None:
            raise _again(self.failure) from self.failure

    async def flush(self) -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self.settle_when_flushed(fut)
        await fut

    def settle_when_flushed(self, fut: asyncio.Future[None]) -> None:
        target = self.appended
        with self._done:
            if self.failure is not None:
                fut.set_exception(_again(self.failure))
                return
            if self.committed >= target and not self.queue:
                fut.set_result(None)
                return
            self._waiters.append((fut.get_loop(), fut, target))
        self._urgent.set()
        self._wake.set()

    def flush_sync(self) -> None:
        if self._thread is None:
            self.raise_failure()
            return
        target = self.appended
        self._urgent.set()
        self._wake.set()
        with self._done:
            while self.committed < target and self.failure is None:
                self._done.wait()
        self.raise_failure()

    def close(self) -> None:
        """Commit what is queued, then stop the thread and close its connection."""
        with self._start_lock:
            self._closing = True
        self._urgent.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()

    # ------------------------------------------------------------------ the thread
    def _loop(self) -> None:
        while True:
            self._wake.wait()
            if not self._urgent.is_set() and not self._closing:
                self._urgent.wait(GATHER_SECONDS)
            self._wake.clear()
            self._urgent.clear()
            batch = self._gather()
            if batch is not None and self.failure is None:
                try:
                    self._commit(batch)
                except StoreError as exc:
                    self._fail(exc)
                else:
                    self._release(batch)
            if self._closing and not self.queue:
                break
        if self._conn is not None:
            self._conn.close()
        with self._done:  # anything still waiting fails as closed
            if self.failure is None and self.committed < self.appended:
                self.failure = StoreError(f"store {redact(self.url)} closed before "
                                          "every event was committed")
            self._settle_waiters()

    def _gather(self) -> Batch | None:
        queue = self.queue
        if not queue and not self.dirty_stats:
            return None
        self._batches += 1
        batch = Batch(self._batches)
        for _ in range(len(queue)):
            entry = queue.popleft()
            if entry[0] == "events":
                batch.events.extend(entry[1])
                batch.count += entry[2]
                for change in entry[3]:
                    self._index_change(batch, change)
            elif entry[0] == "blob":
                batch.blobs.append((entry[1], entry[2]))
            else:
                batch.cache.append((entry[1], entry[2], entry[3]))
        with self.stats_lock:
            for step in self.dirty_stats:
                count, mean = self.steps.stats[step]
                batch.stats.append((step, count, mean))
            self.dirty_stats.clear()
        return batch

    @staticmethod
    def _index_change(batch: Batch, change: tuple[Any, ...]) -> None:
        me = owners.this_process()
        kind, run_id, at, data = change
        if kind == "run_created":
            fork = data.get("forked_from") or {}
            batch.created.append((run_id, data.get("graph", "?"), at, at, data.get("parent"),
                                  _json(data.get("source", {})), _json(data.get("options", {})),
                                  me.pid, me.host, me.token, fork.get("run"), fork.get("seq"),
                                  fork.get("node")))
            batch.status.pop(run_id, None)
        elif kind == "run_finished":
            batch.status[run_id] = (data.get("status", "failed"), at, me.pid, me.host,
                                    me.token, run_id)
            batch.finished.append(run_id)
        else:  # run_resumed
            batch.status[run_id] = ("running", at, me.pid, me.host, me.token, run_id)

    def _commit(self, batch: Batch) -> None:
        """Write ``batch`` in one transaction; across a dropped connection, exactly once."""
        deadline = time.monotonic() + self.reconnect_timeout
        pause = 0.05
        while True:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = connect(self.url, lock_timeout=self.lock_timeout)
                    if self._landed(self._conn, batch.number):
                        return  # the dropped connection's commit went through
                self._write(self._conn, batch)
                return
            except (psycopg.OperationalError, StoreError) as exc:
                if isinstance(exc, psycopg.OperationalError) and \
                        not self._conn_lost(exc):
                    raise self._refused(batch, exc) from exc
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                if time.monotonic() + pause > deadline:
                    error = exc if isinstance(exc, StoreError) else \
                        explain(self.url, exc, lock_timeout=self.lock_timeout)
                    raise StoreError(
                        f"{error}; gave up reconnecting after {self.reconnect_timeout:g}s. "
                        f"{self.committed} events of this process are durable; resume the "
                        "run with `counterpoint resume RUN` once the server is back") from exc
                time.sleep(pause)  # a backoff between reconnection attempts, not a wait
                pause = min(pause * 2, 1.0)   # for a state (there is nothing to wait on)
            except psycopg.Error as exc:
                raise self._refused(batch, exc) from exc

    def _conn_lost(self, exc: psycopg.OperationalError) -> bool:
        return self._conn is None or self._conn.closed or self._conn.broken or \
            isinstance(exc, psycopg.errors.AdminShutdown)

    def _refused(self, batch: Batch, exc: psycopg.Error) -> StoreError:
        error = explain(self.url, exc, lock_timeout=self.lock_timeout)
        # the same class (a lock is StoreLocked, as on SQLite), with what is durable
        return type(error)(f"{error}; a batch of {batch.count} events was not stored "
                           f"({self.committed} events of this process are durable; "
                           "resume the run with `counterpoint resume RUN`)")

    def _landed(self, conn: psycopg.Connection[tuple[Any, ...]], number: int) -> bool:
        row = conn.execute("SELECT batch FROM cp_writer_batches WHERE writer = %s",
                           (self.writer_id,)).fetchone()
        conn.commit()
        return row is not None and int(row[0]) >= number

    def _write(self, conn: psycopg.Connection[tuple[Any, ...]], batch: Batch) -> None:
        with conn.transaction(), conn.cursor() as cur:
            if batch.blobs:
                now = time.time()  # stored again: touched, so deleting runs keeps it a while
                cur.executemany("INSERT INTO cp_blobs (hash, data, touched_at) VALUES "
                                "(%s, %s, %s) ON CONFLICT (hash) DO UPDATE SET touched_at = "
                                "EXCLUDED.touched_at",
                                [(h, text, now) for h, text in dict(batch.blobs).items()])
            if batch.created:
                cur.executemany(_CREATE, batch.created)
            if batch.events:
                with cur.copy("COPY cp_events (run_id, seq, kind, node, attempt, at, "
                              "data, value, blob) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(_EVENT_TYPES)
                    for row in batch.events:
                        copy.write_row(row)
            if batch.status:
                cur.executemany(_STATUS, list(batch.status.values()))
            if batch.finished:  # a run's finish answers its cancel requests
                cur.execute("UPDATE cp_commands SET done = TRUE WHERE run_id = ANY(%s) "
                            "AND kind = 'cancel' AND NOT done", (batch.finished,))
            if batch.stats:
                cur.executemany("INSERT INTO cp_step_stats (step, count, mean) VALUES "
                                "(%s, %s, %s) ON CONFLICT (step) DO UPDATE SET "
                                "count = excluded.count, mean = excluded.mean", batch.stats)
            if batch.cache:
                cur.executemany("INSERT INTO cp_model_cache (key, response, created_at) "
                                "VALUES (%s, %s, %s) ON CONFLICT (key) DO UPDATE SET "
                                "response = excluded.response, "
                                "created_at = excluded.created_at", batch.cache)
            cur.execute("INSERT INTO cp_writer_batches (writer, batch, at) VALUES "
                        "(%s, %s, %s) ON CONFLICT (writer) DO UPDATE SET "
                        "batch = excluded.batch, at = excluded.at",
                        (self.writer_id, batch.number, time.time()))

    def _release(self, batch: Batch) -> None:
        for digest, _ in batch.blobs:
            self.blob_pending.pop(digest, None)
        for key, response, _ in batch.cache:
            if self.cache_pending.get(key) is response:
                del self.cache_pending[key]
        with self._done:
            self.committed += batch.count
            self._settle_waiters()

    def _fail(self, exc: StoreError) -> None:
        with self._done:
            self.failure = exc
            self.queue.clear()
            self._settle_waiters()

    def _settle_waiters(self) -> None:
        """Resolve the flushes that are durable now, or fail them all. Under ``_done``."""
        self._done.notify_all()
        waiters, keep = self._waiters, deque[_Waiter]()
        while waiters:
            loop, fut, target = waiters.popleft()
            if self.failure is None and target > self.committed:
                keep.append((loop, fut, target))
                continue
            error = None if self.failure is None else _again(self.failure)
            with contextlib.suppress(RuntimeError):  # its loop closed: nobody waits now
                loop.call_soon_threadsafe(_settle, fut, error)
        self._waiters = keep


def _again(failure: StoreError) -> StoreError:
    """A fresh error of ``failure``'s class and message, for each caller it fails."""
    return type(failure)(str(failure))


def _settle(fut: asyncio.Future[None], error: BaseException | None) -> None:
    if fut.done():
        return
    if error is None:
        fut.set_result(None)
    else:
        fut.set_exception(error)


def _json(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()
