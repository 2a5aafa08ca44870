"""Following a run's log as another process writes it: one loop per open stream.

The store has no cross-process notification, so a follower looks again every
:data:`POLL_SECONDS`. Looking is cheap when nothing happened: for a store in a file, the
file and its write-ahead log are ``stat``-ed first and the log is read only when one of
them changed (a PostgreSQL store is read at each look). The store reads a run's log
whole, so a follower of a long live run waits at least twice as long as its last read
took before it reads again: following costs at most a third of a core, however long the
log grows. New events are those after the
last ``seq`` delivered; the log is the source, so a follower that starts late misses
nothing and sees nothing twice.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from ..errors import RunNotFound
from ..events import Event
from ..ids import RunId
from ..state import RunStatus
from ..store import RunRecord, RunStore, is_file_location

POLL_SECONDS = 0.1
"""How often a follower looks for new events of a running run."""
WATCH_SECONDS = 1.0
"""How often the stream of a finished run looks whether the run was deleted."""
RECHECK_POLLS = 20
"""Every this many looks, the run's record is read even if the file did not change: its
process may have died (the run is then shown interrupted)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Batch:
    """What a follower found since it last looked."""

    record: RunRecord
    """The run's index record as it is now."""
    events: list[Event]
    """Events after the ``seq`` delivered before, in order."""


def after(events: Sequence[Event], seq: int) -> list[Event]:
    """The events of a log with a ``seq`` greater than ``seq``."""
    if 0 <= seq < len(events) and events[seq].seq == seq + 1:
        return list(events[seq:])  # the usual case: seq n is at index n - 1
    return [ev for ev in events if ev.seq > seq]


class _Probe:
    """Tells whether a store's file may have changed since it was last asked."""

    def __init__(self, store: RunStore) -> None:
        where = store.location
        self.paths = [where, where + "-wal"] if is_file_location(where) else []
        self.seen: list[tuple[int, int]] | None = None

    def changed(self) -> bool:
        if not self.paths:
            return True  # in memory or a database server: nothing to stat; read it
        now = []
        for path in self.paths:
            try:
                st = os.stat(path)
                now.append((st.st_mtime_ns, st.st_size))
            except FileNotFoundError:
                now.append((0, 0))
        if now == self.seen:
            return False
        self.seen = now
        return True


async def follow(store: RunStore, run_id: RunId, seq: int = 0, *,
                 poll: float = POLL_SECONDS) -> AsyncIterator[Batch]:
    """Batches of the run's new events (after ``seq``) as they become durable.

    The first batch comes at once (possibly without events); the iteration ends after
    the batch holding the run's end, or at once for a run that had ended. Reads happen
    in a worker thread: the store's reads may block briefly.
    """
    probe = _Probe(store)
    record: RunRecord | None = None
    took = 0.0
    looks = 0
    while True:
        looks += 1
        if record is None or probe.changed() or looks % RECHECK_POLLS == 0:
            began = time.monotonic()
            fresh, events = await asyncio.to_thread(_read, store, run_id)
            took = time.monotonic() - began
            new = after(events, seq)
            if record is None or new or fresh != record or looks % RECHECK_POLLS == 0:
                record = fresh
                if new:
                    seq = new[-1].seq
                yield Batch(record=record, events=new)
            if record.status != RunStatus.RUNNING:
                return
        await asyncio.sleep(max(poll, 2 * took))


class StoreFile:
    """Tells whether the store's file was deleted or replaced since it was first seen
    (``rm``, a copy over it, a restored backup): the open store still reads the file it
    opened, so the web view would go on showing runs that are no longer at the path.
    Stats the file only; a store that is not a file is never replaced."""

    def __init__(self, store: RunStore) -> None:
        self.location = store.location
        self.path = store.location if is_file_location(store.location) else None
        self.seen: tuple[int, int] | None = None
        self.replaced()  # the file as it is now, if there is one

    def replaced(self) -> bool:
        if self.path is None:
            return False
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return self.seen is not None
        except OSError:
            return False
        if st.st_size == 0:  # not written yet: the store has not opened it either
            return False
        if self.seen is None:
            self.seen = (st.st_dev, st.st_ino)
        return self.seen != (st.st_dev, st.st_ino)

    def message(self) -> str:
        return (f"the store file {self.location} was deleted or replaced after this web "
                "view opened it, which still reads the file it opened: restart "
                "`counterpoint ui` to see the runs at that path now")


async def until_deleted(store: RunStore, run_id: RunId, *, poll: float = WATCH_SECONDS,
                        file: StoreFile | None = None) -> bool:
    """Returns once ``run_id`` is no longer in the store: another process deleted it
    (``counterpoint delete``, ``prune``): ``True``; or once ``file`` was replaced:
    ``False``. The run's record is read when the store's file changed, and every
    :data:`RECHECK_POLLS` looks in any case; a finished run's log is never read again.
    Never returns while the run exists."""
    probe = _Probe(store)
    probe.changed()
    looks = 0
    while True:
        await asyncio.sleep(poll)
        looks += 1
        if probe.changed() or looks % RECHECK_POLLS == 0:
            if file is not None and file.replaced():
                return False
            try:
                await asyncio.to_thread(store.run, run_id)
            except RunNotFound:
                return True


def _read(store: RunStore, run_id: RunId) -> tuple[RunRecord, list[Event]]:
    # the record first: a log read after it holds at least the events it reflects
    record = store.run(run_id)
    return record, store.events(run_id)
