"""One open SQLite store per file, process and thread, shared by every ``open_store`` of it.

Opening a :class:`~.sqlite.SQLiteStore` and starting its writer process costs tens of
milliseconds, more than a small run takes. :func:`open_shared` (what
:func:`~counterpoint.store.open_store` calls for a path) keeps one open store per
resolved path and hands out :class:`SharedStore` handles on it: a run that opens its
store by path reuses the writer process the previous run started.

Per thread as well: a store takes appends from one thread at a time (its append path
takes no lock, to cost nothing per event), while runs in two threads (``run_sync`` in a
thread pool) may append at the same moment. So each thread that opens the file gets a
store of its own, as each run did before; the runs of one thread, and the tasks of its
event loop, share one.

Lifecycle. Each handle counts as one reference; :meth:`SharedStore.close` makes what
the handle appended durable, then drops its reference. A store nobody references stays
open for :data:`IDLE_SECONDS` (a timer thread), then closes; :func:`close_idle_stores`
closes such stores at once, and every store still open closes at interpreter exit
(``atexit``). A store is not handed out again once its writer failed, it was closed,
or its file was deleted or replaced (a new store opens the file now at the path).

Fork safety. A forked child forgets the parent's stores (``os.register_at_fork``): its
``open_store`` opens a store of its own, with a writer of its own, and its exit closes
nothing of the parent's.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..events import Event
from ..ids import RunId
from .answers import AnswerCallback
from .base import RunRecord, RunStore
from .deletion import BLOB_GRACE, Deletion
from .sqlite import SQLiteStore

__all__ = ["IDLE_SECONDS", "SharedStore", "close_idle_stores", "open_shared"]

IDLE_SECONDS = 10.0
"""How long a store nobody references keeps its writer process, for the next run."""

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Entry:
    key: tuple[str, int]
    """(resolved path, thread id)."""
    store: SQLiteStore
    refs: int = 0
    idle: threading.Timer | None = None


_lock = threading.Lock()
_open: dict[tuple[str, int], _Entry] = {}


def open_shared(path: str | os.PathLike[str]) -> SharedStore:
    """A handle on this thread's open store of the file at ``path`` (opened now if
    there is none, or if the one open cannot be used any more). Safe to call from any
    thread; blocks as opening a :class:`~.sqlite.SQLiteStore` does."""
    key = (os.path.realpath(path), threading.get_ident())
    stale: _Entry | None = None
    with _lock:
        entry = _open.get(key)
        if entry is not None and not entry.store.reusable():
            stale, entry = entry, None
            del _open[key]
            _cancel_idle(stale)
        if entry is None:
            entry = _open[key] = _Entry(key, SQLiteStore(path))
        entry.refs += 1
        _cancel_idle(entry)
    if stale is not None and stale.refs == 0:
        _close_quietly(stale)
    return SharedStore(entry)


def close_idle_stores() -> None:
    """Close now every shared store that no handle references (each waits for its writer
    process to commit and exit). Safe to call from any thread."""
    with _lock:
        idle = [entry for entry in _open.values() if entry.refs == 0]
        for entry in idle:
            del _open[entry.key]
            _cancel_idle(entry)
    for entry in idle:
        _close_quietly(entry)


def _release(entry: _Entry) -> None:
    """Drop one reference; a store nobody references closes after :data:`IDLE_SECONDS`,
    or now if it is no longer handed out."""
    with _lock:
        entry.refs -= 1
        if entry.refs > 0:
            return
        if _open.get(entry.key) is entry:
            if entry.store.reusable():
                timer = threading.Timer(IDLE_SECONDS, _expire, (entry,))
                timer.name, timer.daemon = "counterpoint-store-idle", True
                entry.idle = timer
                timer.start()
                return
            del _open[entry.key]
    entry.store.close()  # raises what went wrong, to the last user


def _expire(entry: _Entry) -> None:
    with _lock:
        if entry.refs or _open.get(entry.key) is not entry or \
                entry.idle is not threading.current_thread():
            return  # used again, or closed already
        del _open[entry.key]
        entry.idle = None
    _close_quietly(entry)


def _cancel_idle(entry: _Entry) -> None:
    if entry.idle is not None:
        entry.idle.cancel()
        entry.idle = None


def _close_quietly(entry: _Entry) -> None:
    """Close a store no handle references: its users were told of any failure already
    (their close flushed), so what is left to say goes to the log."""
    try:
        entry.store.close()
    except StoreError as exc:
        _log.warning("closing the idle store %s: %s", entry.store.path, exc)


def _close_all() -> None:
    """At interpreter exit: close every store still open (what handles left unflushed
    is committed; an idle writer process exits cleanly)."""
    with _lock:
        entries = list(_open.values())
        _open.clear()
        for entry in entries:
            _cancel_idle(entry)
    for entry in entries:
        _close_quietly(entry)


def _forget_in_child() -> None:
    """After a fork, in the child: the parent's stores, their writers and their lock
    (held by a parent's thread, maybe) are the parent's."""
    global _lock, _open
    _lock = threading.Lock()
    _open = {}


atexit.register(_close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


class SharedStore(RunStore):
    """A handle on a shared :class:`~.sqlite.SQLiteStore` (see the module docstring).

    Every method is the shared store's; :meth:`close` closes only this handle. A closed
    handle raises :class:`~counterpoint.errors.StoreError` on every use.
    """

    def __init__(self, entry: _Entry) -> None:
        self._entry: _Entry | None = entry
        self._store: RunStore = entry.store
        self.store = entry.store
        """The shared store."""
        self.path: Path = entry.store.path
        self.location = entry.store.location

    @property
    def writer_pid(self) -> int | None:
        """The shared store's writer process (see :attr:`.SQLiteStore.writer_pid`)."""
        return self.store.writer_pid

    def close(self) -> None:
        """Make what was appended durable, then drop this handle's reference.
        Idempotent; raises as :meth:`flush_sync` does."""
        entry, self._entry = self._entry, None
        if entry is None:
            return
        self._store = _Closed(self.location)
        try:
            entry.store.flush_sync()
        finally:
            _release(entry)

    def append(self, run_id: RunId, event: Event) -> None:
        self._store.append_many(run_id, (event,))

    def append_many(self, run_id: RunId, events: Sequence[Event]) -> None:
        self._store.append_many(run_id, events)

    async def flush(self) -> None:
        await self._store.flush()

    def flush_sync(self) -> None:
        self._store.flush_sync()

    def settle_when_flushed(self, fut: asyncio.Future[None]) -> None:
        self._store.settle_when_flushed(fut)

    def events(self, run_id: RunId) -> list[Event]:
        return self._store.events(run_id)

    def run(self, run_id: RunId) -> RunRecord:
        return self._store.run(run_id)

    def runs(self, limit: int = 50) -> list[RunRecord]:
        return self._store.runs(limit)

    def top_runs(self, limit: int = 50) -> list[RunRecord]:
        return self._store.top_runs(limit)

    def forks(self, run_id: RunId) -> list[RunRecord]:
        return self._store.forks(run_id)

    def sub_runs(self, run_id: RunId) -> list[RunRecord]:
        return self._store.sub_runs(run_id)

    def ids_containing(self, text: str) -> list[RunId]:
        return self._store.ids_containing(text)

    def claim(self, run_id: RunId, *, pid: int, host: str) -> None:
        self._store.claim(run_id, pid=pid, host=host)

    def release(self, run_id: RunId, *, pid: int, host: str, previous: RunRecord) -> None:
        self._store.release(run_id, pid=pid, host=host, previous=previous)

    def delete_runs(self, run_ids: Iterable[RunId], *,
                    blob_grace: float = BLOB_GRACE) -> Deletion:
        return self._store.delete_runs(run_ids, blob_grace=blob_grace)

    def put_blob(self, text: str) -> str:
        return self._store.put_blob(text)

    def blob(self, digest: str) -> str | None:
        return self._store.blob(digest)

    def cache_get(self, key: str) -> str | None:
        return self._store.cache_get(key)

    def cache_put(self, key: str, response: str) -> None:
        self._store.cache_put(key, response)

    def cache_age(self, key: str) -> float | None:
        return self._store.cache_age(key)

    def estimates(self) -> Mapping[str, float]:
        return self._store.estimates()

    def record_durations(self, samples: Mapping[str, Sequence[float]]) -> None:
        self._store.record_durations(samples)

    def request_cancel(self, run_id: RunId) -> None:
        self._store.request_cancel(run_id)

    def cancel_requests(self) -> set[RunId]:
        return self._store.cancel_requests()

    def watch_cancel(self, run_id: RunId, loop: asyncio.AbstractEventLoop,
                     callback: Callable[[], None]) -> None:
        self._store.watch_cancel(run_id, loop, callback)

    def unwatch_cancel(self, run_id: RunId) -> None:
        self._store.unwatch_cancel(run_id)

    def answer_approval(self, run_id: RunId, approval_id: str, answer: dict[str, Any]) -> None:
        self._store.answer_approval(run_id, approval_id, answer)

    def approval_answers(self, run_id: RunId) -> dict[str, dict[str, Any]]:
        return self._store.approval_answers(run_id)

    def watch_answers(self, run_id: RunId, loop: asyncio.AbstractEventLoop,
                      callback: AnswerCallback) -> None:
        self._store.watch_answers(run_id, loop, callback)

    def unwatch_answers(self, run_id: RunId) -> None:
        self._store.unwatch_answers(run_id)


class _Closed(RunStore):
    """What a closed handle uses instead of its store: every use says it is closed."""

    def __init__(self, location: str) -> None:
        self.location = location

    def _closed(self) -> StoreError:
        return StoreError(f"store {self.location}: this handle was closed; open the store "
                          "again with open_store()")

    def delete_runs(self, run_ids: Iterable[RunId], *,
                    blob_grace: float = BLOB_GRACE) -> Deletion:
        raise self._closed()

    def append(self, run_id: RunId, event: Event) -> None:
        raise self._closed()

    def append_many(self, run_id: RunId, events: Sequence[Event]) -> None:
        raise self._closed()

    async def flush(self) -> None:
        raise self._closed()

    def flush_sync(self) -> None:
        raise self._closed()

    def settle_when_flushed(self, fut: asyncio.Future[None]) -> None:
        if not fut.done():
            fut.set_exception(self._closed())

    def events(self, run_id: RunId) -> list[Event]:
        raise self._closed()

    def run(self, run_id: RunId) -> RunRecord:
        raise self._closed()

    def runs(self, limit: int = 50) -> list[RunRecord]:
        raise self._closed()

    def top_runs(self, limit: int = 50) -> list[RunRecord]:
        raise self._closed()

    def forks(self, run_id: RunId) -> list[RunRecord]:
        raise self._closed()

    def sub_runs(self, run_id: RunId) -> list[RunRecord]:
        raise self._closed()

    def ids_containing(self, text: str) -> list[RunId]:
        raise self._closed()

    def claim(self, run_id: RunId, *, pid: int, host: str) -> None:
        raise self._closed()

    def release(self, run_id: RunId, *, pid: int, host: str, previous: RunRecord) -> None:
        raise self._closed()

    def put_blob(self, text: str) -> str:
        raise self._closed()

    def blob(self, digest: str) -> str | None:
        raise self._closed()

    def cache_get(self, key: str) -> str | None:
        raise self._closed()

    def cache_put(self, key: str, response: str) -> None:
        raise self._closed()

    def cache_age(self, key: str) -> float | None:
        raise self._closed()

    def estimates(self) -> Mapping[str, float]:
        raise self._closed()

    def record_durations(self, samples: Mapping[str, Sequence[float]]) -> None:
        raise self._closed()

    def request_cancel(self, run_id: RunId) -> None:
        raise self._closed()

    def cancel_requests(self) -> set[RunId]:
        raise self._closed()

    def watch_cancel(self, run_id: RunId, loop: asyncio.AbstractEventLoop,
                     callback: Callable[[], None]) -> None:
        raise self._closed()

    def unwatch_cancel(self, run_id: RunId) -> None:
        return None  # the runtime unwatches in a finally block

    def answer_approval(self, run_id: RunId, approval_id: str, answer: dict[str, Any]) -> None:
        raise self._closed()

    def approval_answers(self, run_id: RunId) -> dict[str, dict[str, Any]]:
        raise self._closed()

    def watch_answers(self, run_id: RunId, loop: asyncio.AbstractEventLoop,
                      callback: AnswerCallback) -> None:
        raise self._closed()

    def unwatch_answers(self, run_id: RunId) -> None:
        return None

    def close(self) -> None:
        return None

