"""The SQLite store's write path: hands queued rows to the writer process and settles flushes.

:class:`Shipper`, the base of :class:`~.sqlite.SQLiteStore`, owns everything between a
queued event and its commit: the shipping thread (which starts the writer process,
:mod:`.writer`, and sends it what has gathered as one batch), the answer thread (which
reads the batch numbers the writer has committed), the flushes waiting for those
commits, and what happens to all of them when the writer fails. With
``writer="thread"`` the shipping thread commits each batch itself, with the same
:class:`~.writer.Writer` on a connection of its own, and settles the flushes it satisfies
(no process, no answer thread). The store queues rows
itself (its append path touches the same deques, with no call in between); reads,
opening and migrating stay in :mod:`.sqlite`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import StoreError, StoreWriterLost
from ..ids import RunId
from . import owners
from . import writer as _writer
from .base import RunningMeans

__all__ = ["GATHER_SECONDS", "Shipper"]

_POLL_SECONDS = 0.25
GATHER_SECONDS = 0.002
"""How long the shipping thread lets a burst of events gather before it sends them,
unless a flush is waiting: fewer, larger batches and transactions. A crash still
leaves a prefix of every run's events."""
_REAP_SECONDS = 5.0
"""How long a writer whose pipes closed is waited for, to say how it ended."""
_WRITER_SCRIPT = _writer.__file__
_Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]", int]


class Shipper:
    """The write path of :class:`~.sqlite.SQLiteStore` (see the module docstring). The
    store provides what it names below: its path, its step estimates, its cancel
    watchers, and the methods that open connections, poll cancels and spawn the writer."""

    path: Path
    _busy_timeout: float
    _steps: RunningMeans
    _cancel_watch: dict[RunId, tuple[asyncio.AbstractEventLoop, Callable[[], None]]]

    def _connect(self) -> sqlite3.Connection:
        raise NotImplementedError

    def _prepare_to_write(self) -> None:
        raise NotImplementedError

    def _poll_cancels(self, conn: sqlite3.Connection) -> None:
        raise NotImplementedError

    def _spawn(self) -> subprocess.Popen[bytes]:
        """Start the writer process (:mod:`.writer`), from the shipping thread: on Linux it
        is killed when that thread ends, which is when the store closes or the process dies.
        """
        me = owners.this_process()
        return subprocess.Popen(
            [sys.executable, "-P", _WRITER_SCRIPT, str(self.path), str(me.pid),
             repr(self._busy_timeout), me.token or "-"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
            start_new_session=True)  # a terminal's Ctrl-C is for the store's process only

    def _init_shipping(self, in_thread: bool = False) -> None:
        """The write path's state: the queues, the counters, the threads' handles."""
        self._in_thread = in_thread
        """Whether the shipping thread commits batches itself (``writer="thread"``) instead
        of sending them to a writer process."""
        self._committer: _writer.Writer | None = None
        self._cache_pending: dict[str, str] = {}
        self._blob_pending: dict[str, str] = {}
        """Cache entries queued but not yet committed (read-your-writes)."""
        self._dirty_stats: set[str] = set()
        self._stats_lock = threading.Lock()
        self._queue: deque[tuple[RunId, int, int, str, int, bool]] = deque()
        """Events to write, as (run id, first seq, last seq, their rows as JSON text without
        the array's brackets, how many, whether one updates the run index): a batch's
        ``events`` as they are. Encoded when appended, so the queue holds nothing the
        collector walks. Text, not orjson's bytes: each of those keeps a 4 KiB buffer
        (10,000 concurrent runs peaked at 600 MB)."""
        self._side: deque[tuple[Any, ...]] = deque()
        """Blobs and model-cache entries; queued before the events that need them."""
        self._waiters: deque[_Waiter] = deque()
        self._release_lock = threading.Lock()
        """Flushes are released by the shipping and the answer-reading threads."""
        self._appended = 0
        self._committed = 0
        self._shipped: deque[tuple[int, int, list[str], list[tuple[str, str, float]]]] = deque()
        """Batches sent and not yet committed: (number, events appended up to its end, its
        blobs, its cache entries)."""
        self._failure: BaseException | None = None
        self._wake = threading.Event()
        self._urgent = threading.Event()
        """Set when someone waits for the writer (flush, close): commit without gathering."""
        self._wake_flag = [False]
        """Cheap mirror of ``_wake.is_set()`` for the append path (a list: mutable in place)."""
        self._closing = False
        self._seen_unsent: list[RunId] = []
        self._process: subprocess.Popen[bytes] | None = None
        self._writer: threading.Thread | None = None
        """The shipping thread, started with the writer process by the first write (see
        :meth:`_start_writer`): a store opened only to read starts neither."""
        self._start_lock = threading.Lock()

    def _start_writer(self) -> None:
        """Start the shipping thread, which starts the writer process, unless it runs
        already (every write calls this); a store that is closing starts nothing (its
        flushes then fail as closed)."""
        if self._writer is not None:
            return
        with self._start_lock:
            if self._writer is not None or self._closing:
                return
            self._prepare_to_write()  # raises before anything starts; the next write retries
            started = threading.Event()
            self._writer = threading.Thread(target=self._ship_loop, args=(started,),
                                            name="counterpoint-store", daemon=True)
            self._writer.start()
            started.wait()
        if self._process is None and self._committer is None:  # it could not be started
            if self._in_thread:
                raise StoreError(f"store {self.path}: cannot open it for writing "
                                 f"({self._failure}); check the file and its folder")
            raise StoreError(f"store {self.path}: cannot start its writer process "
                             f"({self._failure}); check that {sys.executable} runs")

    @property
    def writer_pid(self) -> int | None:
        """The process id of the store's writer process (``None`` before the store's first
        write and once it has ended)."""
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    async def flush(self) -> None:
        if self._failure is None and self._committed >= self._appended:
            return  # nothing to wait for
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.settle_when_flushed(fut)
        await fut

    def settle_when_flushed(self, fut: asyncio.Future[None]) -> None:
        self._settle(fut, hurry=True)

    def settle_when_batched(self, fut: asyncio.Future[None]) -> None:
        # the first waiter hurries the writer (a lone run waits no batch delay); those
        # queued behind it wait at most GATHER_SECONDS for the batch after
        self._settle(fut, hurry=not self._waiters)

    def _settle(self, fut: asyncio.Future[None], *, hurry: bool) -> None:
        error = self._failure_error()
        if error is not None:
            fut.set_exception(error)
            return
        target = self._appended
        if self._committed >= target:
            fut.set_result(None)
            return
        self._waiters.append((fut.get_loop(), fut, target))  # released as commits land
        if hurry:
            self._hurry()
        if self._failure is not None:  # it failed after the check above: never wait forever
            self._fail_waiters()
        elif self._writer is None or not self._writer.is_alive():
            fut.set_exception(StoreError(f"store {self.path} is closed"))

    def flush_sync(self) -> None:
        target = self._appended
        self._hurry()
        writer = self._writer
        while self._committed < target and self._failure is None and writer is not None \
                and writer.is_alive():
            time.sleep(0.001)
        self._raise_failure()
        if self._committed < target:  # what :meth:`flush` says in the same case
            raise StoreError(f"store {self.path} is closed")

    def _hurry(self) -> None:
        """Wake the writer and have it commit without gathering (someone waits for it).

        Events already set are left alone (``set`` takes a lock and notifies, and
        thousands of runs ending together each ask): the writer clears them only before
        it drains the queue, so a set one still means a drain after this call's appends.
        """
        if not self._urgent.is_set():
            self._urgent.set()
        if not self._wake.is_set():
            self._wake.set()

    def _raise_failure(self) -> None:
        error = self._failure_error()
        if error is not None:
            raise error

    def _failure_error(self) -> StoreError | None:
        """A new error for a caller of the store once writing failed (``None`` before)."""
        if self._failure is None:
            return None
        lost = StoreWriterLost if isinstance(self._failure, _WriterEnded) else StoreError
        return lost(f"store {self.path}: writing failed: {self._failure}")

    def _ship_loop(self, started: threading.Event) -> None:
        """The shipping thread: hand what gathers to the writer as batches (sent to the
        writer process, or committed here when the store writes in this thread)."""
        process: subprocess.Popen[bytes] | None = None
        committer: _writer.Writer | None = None
        acks: threading.Thread | None = None
        try:
            if self._in_thread:
                me = owners.this_process()
                committer = _writer.Writer(self._connect(), owner_pid=me.pid,
                                           owner_host=me.host, owner_token=me.token)
            else:
                process = self._spawn()
        except BaseException as exc:  # reported by _start_writer
            self._failure = exc
            started.set()
            return
        self._process = process
        self._committer = committer
        started.set()
        fd = -1
        if process is not None:
            acks = threading.Thread(target=self._ack_loop, args=(process,),
                                    name="counterpoint-store-acks", daemon=True)
            acks.start()
            assert process.stdin is not None
            fd = process.stdin.fileno()
        number = 0
        shipped = 0  # events sent
        next_poll = 0.0
        poll_conn: sqlite3.Connection | None = None
        try:
            while self._failure is None:
                self._wake.wait(timeout=_POLL_SECONDS)
                if not self._urgent.is_set() and not self._closing:
                    self._urgent.wait(GATHER_SECONDS)
                self._urgent.clear()
                self._wake.clear()
                # after clear(), before draining: an append from here on sets the event again,
                # and one from before is in the queue this pass drains
                self._wake_flag[0] = False
                events: list[tuple[RunId, int, int, str, int, bool]] = []
                queue = self._queue
                while queue:
                    events.append(queue.popleft())
                blobs: list[tuple[str, str]] = []  # drained after: they cover every event above
                cache: list[tuple[str, str, float]] = []
                while self._side:
                    item = self._side.popleft()
                    if item[0] == "blob":
                        blobs.append((item[1], item[2]))
                    else:
                        cache.append((item[1], item[2], item[3]))
                batch: dict[str, Any] = {"events": events}
                if blobs:
                    batch["blobs"] = blobs
                if cache:
                    batch["cache"] = cache
                if self._dirty_stats:
                    with self._stats_lock:
                        dirty, self._dirty_stats = self._dirty_stats, set()
                        batch["stats"] = [(k, *self._steps.stats[k]) for k in dirty]
                if self._seen_unsent:
                    batch["seen"], self._seen_unsent = self._seen_unsent, []
                if len(batch) > 1 or events:
                    number += 1
                    batch["n"] = number
                    shipped += sum([entry[4] for entry in events])
                    # recorded before it is sent: the writer may answer at once
                    self._shipped.append((number, shipped, [b[0] for b in blobs], cache))
                    if committer is not None:
                        committer.commit((batch,))
                        self._acknowledge(number)
                    else:
                        data = memoryview(_writer.frame(batch))
                        try:
                            while data:
                                data = data[os.write(fd, data):]
                        except BrokenPipeError:
                            assert process is not None  # no committer: a writer process
                            raise _ended(process) from None
                self._release_waiters()  # a flush may have come just after its commit
                now = time.monotonic()
                if self._cancel_watch and now >= next_poll:
                    next_poll = now + _POLL_SECONDS
                    if poll_conn is None:
                        poll_conn = self._connect()
                    self._poll_cancels(poll_conn)
                if self._closing and not self._queue and not self._side:
                    break
        except BaseException as exc:  # the writer must never die silently
            if self._failure is None:
                self._failure = exc
        finally:
            if poll_conn is not None:
                poll_conn.close()
            if committer is not None:
                committer.conn.close()
            if process is not None:
                self._stop_process(process)
            if acks is not None:
                acks.join()  # it records a writer that ended before committing everything
            self._fail_waiters()

    def _stop_process(self, process: subprocess.Popen[bytes]) -> None:
        """End the writer process: it commits what it holds and exits (killed instead once
        writing failed). Waited for here: on Linux the writer dies when this thread ends."""
        assert process.stdin is not None
        with contextlib.suppress(OSError):
            if self._failure is None:
                os.write(process.stdin.fileno(), _writer.CLOSE)
            process.stdin.close()
        if self._failure is not None:
            process.kill()
        process.wait()

    def _ack_loop(self, process: subprocess.Popen[bytes]) -> None:
        """Read what the writer process answers: release flushes, or record its failure."""
        assert process.stdout is not None
        try:
            for line in process.stdout:
                if line.startswith(b"!"):
                    raise _WriterFailed(line[1:].decode(errors="replace").strip())
                try:
                    number = int(line)
                except ValueError:
                    raise _WriterFailed(f"the writer process answered {line[:200]!r}") from None
                self._acknowledge(number)
            if not self._closing or self._committed < self._appended:
                raise _ended(process)
        except BaseException as exc:  # the writer must never fail silently
            if self._failure is None:
                self._failure = exc
            self._fail_waiters()
            self._wake.set()  # the shipping thread ends

    def _acknowledge(self, number: int) -> None:
        """Batches up to ``number`` are committed: count their events, forget their
        pending blobs and cache entries, release the flushes they satisfy."""
        shipped = self._shipped
        while shipped and shipped[0][0] <= number:
            _, committed, blobs, cache = shipped.popleft()
            self._committed = committed
            for digest in blobs:
                self._blob_pending.pop(digest, None)
            for key, response, _ in cache:
                if self._cache_pending.get(key) is response:
                    del self._cache_pending[key]
        self._release_waiters()

    def _fail_waiters(self) -> None:
        while self._waiters:
            error = self._failure_error()
            if error is None:
                return
            loop, fut, _ = self._waiters.popleft()
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_fail, fut, error)

    def _release_waiters(self) -> None:
        committed = self._committed
        waiters = self._waiters
        ready: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
        # targets grow in the order waiters arrive, so the satisfied ones are at the front:
        # no walk over thousands of runs still waiting (a waiter queued out of order by
        # another thread is released by the next commit, which its flush asked for)
        with self._release_lock:
            while waiters and waiters[0][2] <= committed:
                waiter = waiters.popleft()
                ready.setdefault(waiter[0], []).append(waiter[1])
        for loop, futures in ready.items():  # one wake-up per loop, not one per waiter
            with contextlib.suppress(RuntimeError):  # that loop has closed
                loop.call_soon_threadsafe(_resolve_all, futures)

class _WriterFailed(RuntimeError):
    """What the writer process reported, or how it ended."""


class _WriterEnded(_WriterFailed):
    """The writer process ended before it committed everything (killed, or crashed)."""


def _ended(process: subprocess.Popen[bytes]) -> _WriterEnded:
    """How ``process``, the writer, ended: its pid and its exit status or signal."""
    with contextlib.suppress(subprocess.TimeoutExpired):  # its pipes closed: it is exiting
        process.wait(timeout=_REAP_SECONDS)
    code = process.returncode
    if code is None:
        how = "unexpectedly"
    elif code < 0:
        try:
            how = f"(killed by signal {-code}, {signal.Signals(-code).name})"
        except ValueError:
            how = f"(killed by signal {-code})"
    else:
        how = f"(exit code {code}) before it committed everything"
    return _WriterEnded(f"its writer process (pid {process.pid}) ended {how}")


def _resolve_all(futures: list[asyncio.Future[None]]) -> None:
    for fut in futures:
        if not fut.done():
            fut.set_result(None)


def _fail(fut: asyncio.Future[None], error: StoreError) -> None:
    if not fut.done():
        fut.set_exception(error)

