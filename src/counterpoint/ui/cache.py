"""Recently opened runs, projected once: a node's detail is not a pass over the whole run.

The store reads a run's log whole. Without this cache every node the page opens read
and folded the whole log again (1.0-1.5 s for a run of 100,000 nodes). A cached run
keeps its :class:`~counterpoint.ui.projection.RunView` (the folded state), its events and
an index of them by node; a finished run is never read again, a running one is read at
each look (the store has no cheaper read) but only the events after those folded are
folded in. At most :data:`KEEP` runs (and :data:`KEEP_EVENTS` events) are kept, the
least recently used dropped first. A run deleted by another process (``counterpoint
delete``, ``prune``) is dropped at the next look, and remembered: asking for it again
says it was deleted, not that it never was. Safe to call from several threads (one lock).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from ..errors import RunNotFound
from ..events import Event, EventKind
from ..ids import NodeId, RunId
from ..state import RunStatus
from ..store import RunRecord, RunStore
from .projection import RunView
from .tail import after

KEEP = 4
"""Most runs kept projected (each holds its whole log in memory)."""
KEEP_EVENTS = 300_000
"""Most events kept over all runs (the run looked at last is kept whatever its size):
a 100,000-node run's 200,000 events and projection took 185 MB (measured)."""
KEEP_DELETED = 1000
"""Most deleted runs remembered (to say "deleted" rather than "not found")."""


def deleted_message(run_id: RunId, location: str) -> str:
    """What the page says of a run it showed and another process deleted since."""
    return (f"run {run_id} was deleted from store {location} (by `counterpoint delete` or "
            "`counterpoint prune`) while the web view showed it; its log is gone: open "
            "the runs list for the runs the store still holds")


@dataclass
class Projected:
    """One run as last read: its view, its events, and those events by node."""

    record: RunRecord
    view: RunView
    events: list[Event] = field(default_factory=list)
    by_node: dict[str, list[Event]] = field(default_factory=dict)
    plan_rounds: list[Event] = field(default_factory=list)

    def add(self, events: list[Event]) -> None:
        self.view.feed(events, self.record)
        self.events.extend(events)
        for ev in events:
            if ev.node is not None:
                self.by_node.setdefault(str(ev.node), []).append(ev)
            if ev.kind is EventKind.PLAN_ROUND:
                self.plan_rounds.append(ev)

    def node_events(self, node: NodeId) -> list[Event]:
        """The events recorded for ``node``, in order."""
        return self.by_node.get(str(node), [])


class RunCache:
    """See the module docstring."""

    def __init__(self, store: RunStore, keep: int = KEEP) -> None:
        self.store = store
        self.keep = keep
        self._runs: OrderedDict[str, Projected] = OrderedDict()
        self._deleted: OrderedDict[str, None] = OrderedDict()
        self.lock = threading.RLock()
        """Held while a run is read or its view is used."""

    def get(self, run_id: RunId) -> Projected:
        """The run, up to date with its log (raises ``RunNotFound`` for an unknown run,
        saying so when the run was seen here and deleted since)."""
        with self.lock:
            try:
                record = self.store.run(run_id)
            except RunNotFound:
                if self._runs.pop(run_id, None) is None and run_id not in self._deleted:
                    raise
                self.forget(run_id)
                raise RunNotFound(deleted_message(run_id, self.store.location)) from None
            seen = self._runs.get(run_id)
            # a running run's log may grow without its record changing: read it again
            if seen is not None and seen.record == record and \
                    record.status != RunStatus.RUNNING:
                self._runs.move_to_end(run_id)
                return seen
            events = self.store.events(run_id)
            if seen is None:
                seen = Projected(record=record, view=RunView(record))
                seen.add(events)
            else:
                seen.record = record
                seen.add(after(events, seen.view.seq))
            self._runs[run_id] = seen
            self._runs.move_to_end(run_id)
            held = sum(len(p.events) for p in self._runs.values())
            while len(self._runs) > 1 and (len(self._runs) > self.keep or
                                           held > KEEP_EVENTS):
                held -= len(self._runs.popitem(last=False)[1].events)
            return seen

    def forget(self, run_id: RunId) -> None:
        """``run_id`` was deleted: drop it, and say so if it is asked for again."""
        with self.lock:
            self._runs.pop(run_id, None)
            self._deleted[run_id] = None
            self._deleted.move_to_end(run_id)
            while len(self._deleted) > KEEP_DELETED:
                self._deleted.popitem(last=False)
