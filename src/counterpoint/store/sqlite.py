"""The default run store: one SQLite file in WAL mode, written by a writer process.

The event loop only queues events (their rows encoded as JSON, then a deque append).
A shipping thread (:mod:`.shipping`) hands what has gathered to the store's writer
process (:mod:`.writer`) as one batch, and the writer commits every batch it holds in one
transaction. SQLite's work (binding rows, stepping statements, writing the WAL) thus
takes no turns at the GIL of the process running the event loop: with a writer
thread, ten thousand concurrent runs lost a tenth of the loop's time to it, and the
commit that a finishing run waits for took three times its CPU time in waiting for
the GIL. The thread and the process start with the store's first write, so a store
opened only to read (``counterpoint runs``, ``show``) starts neither.

``SQLiteStore(path, writer="thread")`` commits in the shipping thread instead, with the
same :class:`~.writer.Writer` and the same batches, in the same order: no process, no
pipe, no encoding of batches. That is for a process that is one of several keeping
every core busy (a shard of :mod:`counterpoint.ray.shards`): there the writer process
takes a core's time the event loops need, and its pipe and framing cost CPU of their
own. Everything below holds for both (a crash kills the thread with its process).

Opening reads, and never waits for a writer: it checks the schema with a read (WAL
readers do not block) and creates nothing. The file and its directories are created,
and the schema migrated, at the first write (:meth:`SQLiteStore.migrate`); a file
holding an older schema is migrated when it is opened. Reads of a store whose file does
not exist yet find nothing. :meth:`SQLiteStore.claim` is the one synchronous write: a
transaction on a connection of the calling process, not a batch for the writer.

Batches commit in the order they were queued, so a crash (even SIGKILL) leaves a
prefix of every run's events; on Linux the writer dies with the process that started
it, so nothing commits after a crash. With ``synchronous=NORMAL`` in WAL mode a
committed transaction survives the process being killed; only a power loss can drop
the newest ones, and then still as a suffix.

Large values (node outputs over :data:`BLOB_THRESHOLD` bytes) are stored once in
the ``blobs`` table by SHA-256 and referenced from the events.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import orjson

from ..errors import ConfigError, StoreCorrupt, StoreError
from ..events import KIND_OF, Event, EventKind
from ..ids import NodeId, RunId
from . import answer_rows, owners, paths, schema, sqlite_access, sqlite_deletion
from . import writer as _writer
from .answers import AnswerCallback
from .base import RunningMeans, RunRecord, RunStore
from .deletion import BLOB_GRACE, Deletion
from .schema import MIGRATIONS
from .shipping import GATHER_SECONDS, Shipper
from .sqlite_index import SQLiteIndex

__all__ = ["BLOB_THRESHOLD", "GATHER_SECONDS", "MIGRATIONS", "SQLiteStore", "WriterMode"]

BLOB_THRESHOLD = 1024
"""Outputs whose JSON is longer than this many characters are stored by content hash."""

_dumps = orjson.dumps
_RUN_LEVEL = frozenset({EventKind.RUN_CREATED, EventKind.RUN_FINISHED, EventKind.RUN_RESUMED})
"""Events that also update the run index."""
T = TypeVar("T")
WriterMode = Literal["process", "thread"]
"""Where a store's commits run: its writer process (the default), or its shipping thread
(for a process whose cores are all taken anyway: see the module docstring)."""


class SQLiteStore(Shipper, SQLiteIndex, RunStore):
    """A run store in one SQLite file. See the module docstring."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0,
                 migrations: Sequence[tuple[str, str]] = MIGRATIONS,
                 writer: WriterMode = "process") -> None:
        if writer not in ("process", "thread"):
            raise ConfigError(f"store {path}: writer must be 'process' or 'thread', not "
                              f"{writer!r}")
        self.path = Path(path)
        self.location = str(self.path)
        self._busy_timeout = busy_timeout
        self._migrations = tuple(migrations)
        self._read_lock = threading.RLock()
        self._reader: sqlite3.Connection | None = None
        """The connection reads use, opened with the file (``None`` while there is none)."""
        self._identity: tuple[int, int] | None = None
        """(device, inode) of the file :attr:`_reader` opened."""
        self._access = sqlite_access.READ_WRITE
        """How :attr:`_reader` opened the file (:mod:`.sqlite_access`)."""
        self._ready = False
        """Whether the file exists and holds every migration (a write needs no more)."""
        self._steps = RunningMeans()
        self._known_blobs: dict[str, RunId] = {}
        """Blob -> the run whose events sent it last: a run sends a blob once, a later run
        again (runs may have been deleted since, and their blobs with them)."""
        self._init_shipping(in_thread=writer == "thread")
        self._cancel_watch: dict[RunId, tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = {}
        self._cancel_seen: set[RunId] = set()
        self._answer_watch: dict[RunId, tuple[asyncio.AbstractEventLoop, AnswerCallback]] = {}
        self._answers_seen: set[str] = set()
        with self._read_lock:
            reader = self._open_reader()
            if reader is not None:  # the estimates of earlier runs, read once
                self._steps = RunningMeans({
                    row[0]: (row[1], row[2])
                    for row in reader.execute("SELECT step, count, mean FROM step_stats")})

    # ------------------------------------------------------------------ opening
    def _connect(self) -> sqlite3.Connection:
        return _writer.connect(str(self.path), self._busy_timeout)

    def _open_reader(self) -> sqlite3.Connection | None:
        """The reading connection, opened if the file exists (``None`` if it does not
        yet). Checks the schema with a read; migrates only a file that lacks migrations.
        Called under :attr:`_read_lock`."""
        if self._reader is not None:
            if not sqlite_access.changed(self.path, self._access):
                return self._reader
            self._reader.close()  # read as immutable, and a writer may have started
            self._reader = None
        if self._closing:
            raise StoreError(f"store {self.path} is closed")
        try:
            info = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            problem = paths.creation_problem(self.path)
            if problem is not None:
                raise paths.error(self.path, problem) from None
            return None
        except OSError as exc:
            raise paths.os_error(self.path, exc, writing=False) from exc
        problem = paths.existing_problem(self.path, writing=False)
        if problem is not None:
            raise paths.error(self.path, problem)
        if info.st_size == 0:
            return None  # created by something else, or by an older counterpoint: empty
        access = sqlite_access.choose(self.path)
        if isinstance(access, str):
            raise paths.error(self.path, access)
        conn = schema.open_existing(self.path, self._migrations, self._busy_timeout,
                                    options=access.options, read_only=access.read_only)
        if conn is None:
            return None  # no tables yet: as if there were no file
        self._reader, self._identity, self._ready = conn, (info.st_dev, info.st_ino), True
        self._access = access
        return conn

    @property
    def read_only(self) -> bool:
        """Whether the store file was opened read-only (it cannot be written: a read-only
        folder or mount, an immutable file); a write to it is refused."""
        return self._access.read_only

    def migrate(self) -> None:
        """Create the file (and its directories) if it does not exist, and apply the
        migrations it lacks, now. The first write does this itself; idempotent; blocks
        while another process holds the write lock (up to the busy timeout, then
        :class:`~counterpoint.errors.StoreLocked`)."""
        if self._ready:
            return
        with self._read_lock:
            if self._open_reader() is not None:  # the file exists; any migration is done
                return
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise paths.os_error(self.path, exc) from exc
            schema.migrate(self.path, self._migrations, self._busy_timeout)
            self._open_reader()

    def _prepare_to_write(self) -> None:
        """Before the first write, and before each write of this process's own
        connections: the file exists with its schema and can be written (a store read
        through a read-only connection is refused here: :mod:`.sqlite_access`)."""
        self.migrate()
        problem = paths.existing_problem(self.path, writing=True)
        if problem is not None:
            raise paths.error(self.path, problem)
        if self._access.read_only:  # writable since it was opened (remounted, chattr -i):
            with self._read_lock:  # read what this store writes from now on
                if self._reader is not None:
                    self._reader.close()
                self._reader, self._access = None, sqlite_access.READ_WRITE

    def reusable(self) -> bool:
        """Whether this store can serve another user (:mod:`.shared`): it is not closed,
        writing has not failed, and the file it has open is still the one at
        :attr:`path` (not deleted or replaced since). Reads the file's status only."""
        if self._closing or self._failure is not None:
            return False
        identity = self._identity
        if identity is None:
            return True
        try:
            info = os.stat(self.path)
        except OSError:
            return False
        return (info.st_dev, info.st_ino) == identity

    # ------------------------------------------------------------------ writing
    def append(self, run_id: RunId, event: Event) -> None:
        self.append_many(run_id, (event,))

    def append_many(self, run_id: RunId, events: Sequence[Event]) -> None:
        if self._failure is not None:
            raise StoreError(f"store {self.path}: the writer failed earlier: {self._failure}")
        if not events:
            return
        self._start_writer()
        rows = []
        for event in events:
            value, blob = event.value, None
            if value is not None and len(value) > BLOB_THRESHOLD:
                blob = hashlib.sha256(value.encode()).hexdigest()
                if self._known_blobs.get(blob) != run_id:
                    self._known_blobs[blob] = run_id
                    self._side.append(("blob", blob, value))
                value = None
            rows.append((event.seq, event.kind, event.node, event.attempt, event.at,
                         event.data, value, blob))  # the kind, a str: JSON has its value
            # (the writer reads the run index's changes from these rows)
        try:
            text = _dumps(rows).decode()
        except TypeError:  # orjson.JSONEncodeError: queue those before the culprit, then raise
            text = self._queue_until_unstorable(run_id, events, rows)
        self._queue_rows(run_id, events, text)

    def _queue_rows(self, run_id: RunId, events: Sequence[Event], text: str) -> None:
        """Queue ``events`` as one entry, ``text`` being their rows as a JSON array."""
        run_level = False
        for event in events:
            if event.kind in _RUN_LEVEL:
                run_level = True
                break
        self._queue.append((run_id, events[0].seq, events[-1].seq, text[1:-1], len(events),
                            run_level))
        self._appended += len(events)
        if not self._wake_flag[0]:
            self._wake_flag[0] = True
            self._wake.set()

    def _queue_until_unstorable(self, run_id: RunId, events: Sequence[Event],
                                rows: list[tuple[Any, ...]]) -> str:
        for i, row in enumerate(rows):
            try:
                _dumps(row)
            except TypeError as exc:
                if i:
                    self._queue_rows(run_id, events[:i], _dumps(rows[:i]).decode())
                event = events[i]
                raise StoreError(
                    f"run {run_id}: event {event.seq} ({event.kind}"
                    f"{', node ' + repr(event.node) if event.node else ''}) cannot be "
                    f"stored: {exc}; event data must be JSON-compatible") from exc
        raise AssertionError("unreachable: the rows serialize one by one")  # pragma: no cover

    def put_blob(self, text: str) -> str:
        """See :meth:`.BlobStore.put_blob`; sent to the writer every time (it marks the
        blob as used again, which keeps it when runs are deleted: see :mod:`.deletion`)."""
        digest = hashlib.sha256(text.encode()).hexdigest()
        self._start_writer()
        self._blob_pending[digest] = text
        self._side.append(("blob", digest, text))
        self._wake.set()
        return digest

    def blob(self, digest: str) -> str | None:
        pending = self._blob_pending.get(digest)
        if pending is not None:
            return pending
        with self._read_lock:
            reader = self._open_reader()
            if reader is None:
                return None
            row = reader.execute("SELECT data FROM blobs WHERE hash = ?", (digest,)).fetchone()
        return None if row is None else str(row[0])

    def cache_get(self, key: str) -> str | None:
        pending = self._cache_pending.get(key)
        if pending is not None:
            return pending
        with self._read_lock:
            reader = self._open_reader()
            if reader is None:
                return None
            row = reader.execute("SELECT response FROM model_cache WHERE key = ?",
                                 (key,)).fetchone()
        return None if row is None else str(row[0])

    def cache_age(self, key: str) -> float | None:
        if key in self._cache_pending:
            return 0.0  # written moments ago, not yet committed
        with self._read_lock:
            reader = self._open_reader()
            if reader is None:
                return None
            row = reader.execute("SELECT created_at FROM model_cache WHERE key = ?",
                                 (key,)).fetchone()
        return None if row is None else max(0.0, time.time() - float(row[0]))

    def cache_put(self, key: str, response: str) -> None:
        self._raise_failure()
        self._start_writer()
        self._cache_pending[key] = response
        self._side.append(("cache", key, response, time.time()))
        self._wake.set()

    def record_durations(self, samples: Mapping[str, Sequence[float]]) -> None:
        self._start_writer()
        with self._stats_lock:  # the writer reads both when it commits
            self._steps.fold(samples)
            self._dirty_stats.update(samples)  # written with the next commit

    # ------------------------------------------------------------------ cancel
    def request_cancel(self, run_id: RunId) -> None:
        self.run(run_id)
        self._prepare_to_write()
        conn = self._connect()
        try:
            conn.execute("INSERT INTO commands (run_id, kind, created_at) VALUES (?, ?, ?)",
                         (run_id, "cancel", time.time()))
        except sqlite3.Error as exc:
            raise schema.explain(self.path, exc, self._busy_timeout, writing=True) from exc
        finally:
            conn.close()

    def cancel_requests(self) -> set[RunId]:
        with self._read_lock:
            reader = self._open_reader()
            if reader is None:
                return set()
            rows = reader.execute(
                "SELECT DISTINCT c.run_id FROM commands c JOIN runs r ON r.run_id = c.run_id "
                "WHERE c.done=0 AND c.kind='cancel' AND r.status='running'")
            return {RunId(r[0]) for r in rows}

    def watch_cancel(self, run_id: RunId, loop: asyncio.AbstractEventLoop,
                     callback: Callable[[], None]) -> None:
        """Call ``callback`` on ``loop`` when a cancel of ``run_id`` is requested (the
        shipping thread polls for requests)."""
        self._start_writer()
        self._cancel_watch[run_id] = (loop, callback)

    def unwatch_cancel(self, run_id: RunId) -> None:
        self._cancel_watch.pop(run_id, None)

    def _poll_cancels(self, conn: sqlite3.Connection) -> None:
        rows = conn.execute("SELECT DISTINCT c.run_id, r.status FROM commands c JOIN runs r "
                            "ON r.run_id = c.run_id WHERE c.done=0 AND c.kind='cancel'")
        finished = [(run_id,) for run_id, status in rows if status != "running"]
        if finished:  # requests for runs that ended anyway (e.g. finished before the request)
            conn.executemany("UPDATE commands SET done=1 WHERE run_id=? AND done=0", finished)
        rows = conn.execute("SELECT DISTINCT run_id FROM commands WHERE done=0 AND kind='cancel'")
        for (run_id,) in rows:
            watcher = self._cancel_watch.get(run_id)
            if watcher is not None and run_id not in self._cancel_seen:
                self._cancel_seen.add(run_id)
                self._seen_unsent.append(run_id)  # its finish answers the request
                watcher[0].call_soon_threadsafe(watcher[1])
        if self._answer_watch:
            answer_rows.poll(conn, dict(self._answer_watch), self._answers_seen)

    # ------------------------------------------------------------------ answers
    def answer_approval(self, run_id: RunId, approval_id: str, answer: dict[str, Any]) -> None:
        self.run(run_id)
        self._prepare_to_write()
        conn = self._connect()
        try:
            answer_rows.insert(conn, run_id, approval_id, answer)
        except sqlite3.Error as exc:
            raise schema.explain(self.path, exc, self._busy_timeout, writing=True) from exc
        finally:
            conn.close()

    def approval_answers(self, run_id: RunId) -> dict[str, dict[str, Any]]:
        with self._read_lock:
            reader = self._open_reader()
            return {} if reader is None else answer_rows.of_run(reader, run_id)

    def watch_answers(self, run_id: RunId, loop: asyncio.AbstractEventLoop,
                      callback: AnswerCallback) -> None:
        self._start_writer()  # the shipping thread polls for answers with the cancels
        self._answer_watch[run_id] = (loop, callback)

    def unwatch_answers(self, run_id: RunId) -> None:
        self._answer_watch.pop(run_id, None)

    # ------------------------------------------------------------------ run index
    def claim(self, run_id: RunId, *, pid: int, host: str) -> None:
        """See :meth:`.RunIndex.claim`. One ``BEGIN IMMEDIATE`` transaction on a connection
        of this process: claims made at the same moment by several processes are taken
        one after the other, and each sees the owner the one before it recorded."""
        by = owners.claimant(pid, host)

        def take(conn: sqlite3.Connection) -> None:
            row = conn.execute(f"SELECT {owners.CLAIM_COLUMNS} FROM runs WHERE run_id = ?",
                               (run_id,)).fetchone()
            if row is None:
                raise self._not_found(run_id)
            if owners.check_claim(run_id, row, by):
                conn.execute("UPDATE runs SET owner_pid = ?, owner_host = ?, owner_token = ?,"
                             " claimed_at = ? WHERE run_id = ?",
                             (by.pid, by.host, by.token, time.time(), run_id))

        self._transaction(run_id, take)

    def release(self, run_id: RunId, *, pid: int, host: str, previous: RunRecord) -> None:
        values = owners.release_values(run_id, pid, host, previous)
        self._transaction(run_id, lambda conn: conn.execute(
            owners.release_update("runs", "?"), values))

    def delete_runs(self, run_ids: Iterable[RunId], *,
                    blob_grace: float = BLOB_GRACE) -> Deletion:
        """See :meth:`.RunDeletion.delete_runs`: one ``BEGIN IMMEDIATE`` transaction, as a
        claim is (a resume and a delete of one run are taken one after the other)."""
        ids = list(dict.fromkeys(run_ids))
        if not ids:
            return Deletion()
        return self._transaction(ids[0], lambda conn: sqlite_deletion.delete(
            conn, ids, time.time() - blob_grace, self._not_found))

    def _transaction(self, run_id: RunId, action: Callable[[sqlite3.Connection], T]) -> T:
        """``action`` in one ``BEGIN IMMEDIATE`` transaction on a connection of this
        process, after this store's own events are durable (it sees them)."""
        if self._committed < self._appended:
            self.flush_sync()
        with self._read_lock:
            if self._open_reader() is None:
                raise self._not_found(run_id)
        self._prepare_to_write()
        conn = self._connect()
        try:
            with schema.immediate(conn):
                return action(conn)
        except sqlite3.Error as exc:
            raise schema.explain(self.path, exc, self._busy_timeout, writing=True) from exc
        finally:
            conn.close()

    # ------------------------------------------------------------------ reading
    def events(self, run_id: RunId) -> list[Event]:
        with self._read_lock:
            reader = self._open_reader()
            if reader is None:
                raise self._not_found(run_id)
            segments = reader.execute(
                "SELECT events FROM segments WHERE run_id = ? ORDER BY first",
                (run_id,)).fetchall()
            if not segments:
                self.run(run_id)
            out: list[Event] = []
            for (payload,) in segments:
                for seq, kind, node, attempt, at, data, value, blob in orjson.loads(payload):
                    if blob is not None:
                        row = reader.execute("SELECT data FROM blobs WHERE hash = ?",
                                             (blob,)).fetchone()
                        if row is None:
                            raise StoreCorrupt(f"store {self.path}: run {run_id} event {seq} "
                                               f"refers to missing blob {blob}")
                        value = row[0]
                    out.append(Event(KIND_OF.get(kind) or EventKind(kind), at,
                                     NodeId(node) if node is not None else None, attempt,
                                     data, value, None, seq))
        return out

    def estimates(self) -> Mapping[str, float]:
        return self._steps.published()

    def close(self) -> None:
        if self._closing:
            return
        with self._start_lock:  # no writer starts from now on
            self._closing = True
        self._hurry()
        if self._writer is not None:
            self._writer.join()
        with self._read_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None
        self._raise_failure()

