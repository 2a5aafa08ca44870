"""The SQLite store's writer process: it commits what :class:`~.sqlite.SQLiteStore` sends.

SQLite's own work (binding rows, stepping statements, writing the WAL) runs here, in a
process of its own, so it takes no turns at the GIL of the process running the event
loop. The store starts one at its first write with
``python -P writer.py DB OWNER_PID BUSY_TIMEOUT OWNER_TOKEN``:
run by path, this module imports only the standard library and orjson. On Linux the
writer is killed when the thread that started it ends (the store's shipping thread,
which lives until the store closes, or the whole process when it dies), so a crashed
process leaves no writer behind that could commit after it.

Protocol. The store writes frames to the writer's stdin: ``b"<length>\\n"`` then that
many bytes of one JSON object, a *batch*::

    {"n": 7,                                   # batch number, counting up from 1
     "events": [[run_id, first, last, rows, count, run_level], ...],
     "blobs": [[sha256, text], ...], "cache": [[key, response, at], ...],
     "stats": [[step, count, mean], ...], "seen": [run_id, ...]}

``rows`` are a run's events ``first..last`` as JSON rows without the array's brackets,
``run_level`` says whether they include an event that updates the run index, and
``seen`` are runs whose cancel request the store has seen. The writer commits every
batch it holds in one transaction and answers ``b"<n>\\n"``, the number of the last
batch committed; on an error it answers ``b"!<message>\\n"`` and exits with 1.
``b"0\\n"`` (:data:`CLOSE`) closes: the writer commits what it holds and exits with 0
(the end of input is not enough: a process forked from the store's keeps it open).
At the end of input without it (the store's process died), a batch cut off there is
dropped whole, so the log keeps a prefix of every run's events, and it exits with 2.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import signal
import socket
import sqlite3
import sys
import time
from collections.abc import Sequence
from typing import Any

import orjson

MAX_PARAMS = 32766
"""Most parameters bound to one statement (SQLite's default limit since 3.32; a lower
limit of the linked SQLite is used instead)."""
_READ_SIZE = 1 << 20
_NO_PIPE_SELECT = sys.platform == "win32"
"""Windows' select takes sockets only: there the writer commits what one read brought."""
_RUN_CREATED = "run_created"
_RUN_FINISHED = "run_finished"
_RUN_RESUMED = "run_resumed"
_CREATE = ("INSERT OR REPLACE INTO runs (run_id, graph, status, created_at, updated_at, parent, "
           "source, options, owner_pid, owner_host, owner_token, fork_of, fork_seq, fork_node)")
_STATUS_UPSERT = ("INSERT INTO runs (run_id, status, updated_at, graph, created_at, owner_pid, "
                  "owner_host, owner_token)")
_STATUS_UPDATE = (" ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, "
                  "updated_at = excluded.updated_at, owner_pid = excluded.owner_pid, "
                  "owner_host = excluded.owner_host, owner_token = excluded.owner_token")
"""The run index's status changes: one statement for many runs (an upsert; SQLite 3.24+).
The process that writes a run's status becomes its owner (it runs it)."""
Batch = dict[str, Any]


def connect(path: str, busy_timeout: float) -> sqlite3.Connection:
    """A connection to the store's file with the store's settings."""
    # room in the statement cache for every multi-row insert text (see _insert)
    conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None,
                           check_same_thread=False, cached_statements=512)
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


class Writer:
    """Commits batches to one connection (the writer process's loop, or a test)."""

    def __init__(self, conn: sqlite3.Connection, *, owner_pid: int,
                 owner_host: str | None = None, owner_token: str | None = None,
                 max_params: int = MAX_PARAMS) -> None:
        self.conn = conn
        self.owner_pid = owner_pid
        self.owner_host = owner_host or socket.gethostname()
        self.owner_token = owner_token
        """Tells the owner from a later process with its pid (see ``owners.py``)."""
        self.limit = min(max_params, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
        self.cancel_seen: set[str] = set()
        """Runs whose cancel request the store saw: their finish answers the request."""

    def commit(self, batches: Sequence[Batch]) -> None:
        """Write ``batches`` in one transaction."""
        segments: dict[str, list[Any]] = {}  # run -> [run, first, last, [rows, ...]]
        created: list[tuple[Any, ...]] = []
        status: dict[str, tuple[str, str, float]] = {}  # run -> its latest (run, status, at)
        blobs: list[tuple[str, str]] = []
        stats: dict[str, tuple[Any, ...]] = {}
        cache: list[tuple[str, str, float]] = []
        pid, host, token = self.owner_pid, self.owner_host, self.owner_token
        for batch in batches:
            self.cancel_seen.update(batch.get("seen", ()))
            blobs.extend(map(tuple, batch.get("blobs", ())))
            cache.extend(map(tuple, batch.get("cache", ())))
            for row in batch.get("stats", ()):
                stats[row[0]] = tuple(row)
            for run_id, first, last, rows, _count, run_level in batch["events"]:
                segment = segments.get(run_id)
                if segment is None:
                    segments[run_id] = [run_id, first, last, [rows]]
                else:
                    segment[2] = last
                    segment[3].append(rows)
                if run_level:  # the run index is a projection of these events
                    for _seq, kind, _node, _attempt, at, data, _v, _b in orjson.loads(
                            "[" + rows + "]"):
                        if kind == _RUN_CREATED:
                            d = data or {}
                            fork = d.get("forked_from") or {}
                            created.append((run_id, d.get("graph", "?"), "running", at, at,
                                            d.get("parent"),
                                            orjson.dumps(d.get("source", {})).decode(),
                                            orjson.dumps(d.get("options", {})).decode(),
                                            pid, host, token, fork.get("run"),
                                            fork.get("seq"), fork.get("node")))
                        elif kind == _RUN_FINISHED:
                            status[run_id] = (run_id, (data or {}).get("status", "failed"), at)
                        elif kind == _RUN_RESUMED:
                            status[run_id] = (run_id, "running", at)
        conn, limit = self.conn, self.limit
        for attempt in range(20):  # each waits up to the busy timeout for another writer
            try:
                conn.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError:
                if attempt == 19:
                    raise
                time.sleep(0.05 * (attempt + 1))
        try:
            if blobs:
                now = time.time()  # stored again: touched, so deleting runs keeps it a while
                _insert(conn, "INSERT INTO blobs (hash, data, touched_at)",
                        [(h, text, now) for h, text in dict(blobs).items()], limit,
                        " ON CONFLICT (hash) DO UPDATE SET touched_at = excluded.touched_at")
            if created:
                _insert(conn, _CREATE, created, limit)
            if segments:
                _insert(conn, "INSERT INTO segments", [
                    (s[0], s[1], s[2], "[" + ",".join(s[3]) + "]") for s in segments.values()],
                    limit)
            if status:  # one statement for them all; a run's row exists before its status
                # changes (created above or earlier), so the insert half never applies
                _insert(conn, _STATUS_UPSERT,
                        [(*s, "?", s[2], pid, host, token) for s in status.values()], limit,
                        _STATUS_UPDATE)
                answered = [(s[0],) for s in status.values() if s[1] != "running" and s[0] in
                            self.cancel_seen]
                if answered:  # cancel requests the store saw are answered by the finish
                    conn.executemany("UPDATE commands SET done=1 WHERE run_id=? AND done=0",
                                     answered)
            if stats:
                _insert(conn, "INSERT OR REPLACE INTO step_stats", list(stats.values()), limit)
            if cache:
                _insert(conn, "INSERT OR REPLACE INTO model_cache", cache, limit)
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):  # the error above is the one to report
                conn.execute("ROLLBACK")
            raise


def _insert(conn: sqlite3.Connection, head: str, rows: Sequence[Sequence[Any]],
            limit: int, tail: str = "") -> None:
    """``head VALUES (...), (...), ... tail`` with many rows per statement, at most ``limit``
    parameters each.

    Statements hold a power of two of rows (the binary digits of the count), so their
    texts repeat and the connection's statement cache spares SQLite parsing thousands
    of placeholders again for every commit.
    """
    width = len(rows[0])
    per = 1 << (max(1, limit // width).bit_length() - 1)
    start = 0
    while start < len(rows):
        size = min(per, 1 << ((len(rows) - start).bit_length() - 1))
        chunk = rows[start:start + size]
        start += size
        conn.execute(_values(head, width, size, tail),
                     [value for row in chunk for value in row])


@functools.lru_cache(maxsize=256)
def _values(head: str, width: int, count: int, tail: str = "") -> str:
    """The text of ``head VALUES`` with ``count`` rows of ``width`` placeholders, then
    ``tail``."""
    one = "(" + ",".join("?" * width) + ")"
    return f"{head} VALUES {','.join([one] * count)}{tail}"


CLOSE = b"0\n"
"""The frame that closes the writer."""


def frame(batch: Batch) -> bytes:
    """``batch`` as the store sends it."""
    body = orjson.dumps(batch)
    return b"%d\n%b" % (len(body), body)


class Frames:
    """Reads batches from a file descriptor, as many at a time as have arrived."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()

    def take(self) -> list[Batch] | None:
        """Every whole batch that has arrived, waiting for one if none has; ``None`` at the
        end of input (a batch cut off there is dropped). :data:`CLOSE` reads as ``{}``."""
        batches: list[Batch] = []
        while True:
            batch = self._next()
            if batch is not None:
                batches.append(batch)
                continue
            if batches and (_NO_PIPE_SELECT or not select.select([self.fd], [], [], 0)[0]):
                return batches
            chunk = os.read(self.fd, _READ_SIZE)
            if not chunk:
                return batches or None
            self.buffer += chunk

    def _next(self) -> Batch | None:
        buffer = self.buffer
        newline = buffer.find(b"\n")
        if newline < 0:
            return None
        size = int(buffer[:newline])
        end = newline + 1 + size
        if len(buffer) < end:
            return None
        batch: Batch = orjson.loads(memoryview(buffer)[newline + 1:end]) if size else {}
        del buffer[:end]
        return batch


def _die_with_parent(owner_pid: int) -> None:
    """Live exactly as long as the store: ignore SIGINT and SIGTERM (the store's process
    may handle them and still have events to commit; it starts the writer in a session
    of its own, so a terminal's Ctrl-C does not reach it anyway); on Linux, be killed when
    the thread that started this process ends; exit now if that process is gone already."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != owner_pid:
        os._exit(3)


def main(argv: Sequence[str]) -> int:
    """``writer.py DB OWNER_PID [BUSY_TIMEOUT [OWNER_TOKEN]]``: commit batches from stdin
    until its end (``-`` for an unknown token)."""
    path, owner_pid = argv[1], int(argv[2])
    busy_timeout = float(argv[3]) if len(argv) > 3 else 5.0
    owner_token = argv[4] if len(argv) > 4 and argv[4] != "-" else None
    _die_with_parent(owner_pid)
    conn: sqlite3.Connection | None = None
    try:
        conn = connect(path, busy_timeout)
        writer = Writer(conn, owner_pid=owner_pid, owner_token=owner_token)
        frames = Frames(sys.stdin.fileno())
        while (batches := frames.take()) is not None:
            closing = {} in batches
            batches = batches[:batches.index({})] if closing else batches
            if batches:
                writer.commit(batches)
                os.write(sys.stdout.fileno(), b"%d\n" % batches[-1]["n"])
            if closing:
                return 0
    except BaseException as exc:  # the store reports it: the writer must never die silently
        message = f"{exc}" if isinstance(exc, sqlite3.Error) else f"{type(exc).__name__}: {exc}"
        os.write(sys.stdout.fileno(), b"!" + message.replace("\n", " ").encode() + b"\n")
        return 1
    finally:
        if conn is not None:
            conn.close()
    return 2  # the store's process ended without closing


if __name__ == "__main__":
    sys.exit(main(sys.argv))
