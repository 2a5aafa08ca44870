"""Recently opened runs, projected once: a node's detail is not a pass over the whole run.

The store reads a run's log whole. Without this cache every node the page opens read
and folded the whole log again (1.0-1.5 s for a run of 100,000 nodes). A cached run
keeps its :class:`~counterpoint.ui.projection.RunView` (the folded state), its events and
an index of them by node; a finished run is never read again, a running one is read at
each look (the store has no cheaper read) but only the events after those folded are
folded in. At most :data:`KEEP` runs (and :data:`KEEP_EVENTS` events) are kept, the
least recently used dropped first. Safe to call from several threads (one lock).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

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
        self.lock = threading.RLock()
        """Held while a run is read or its view is used."""

    def get(self, run_id: RunId) -> Projected:
        """The run, up to date with its log (raises ``RunNotFound`` for an unknown run)."""
        with self.lock:
            record = self.store.run(run_id)
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
