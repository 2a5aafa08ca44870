"""The runs list's rows: the run index, with each run's nodes, tokens and cost filled in apart.

A row's status, graph, times and duration come from the run's index record, so the
list costs one query of the index however many runs the store holds. Its nodes,
tokens and cost are in the run's log, which the store reads whole (a 100,000-node
run's takes about a second): they are filled in by :meth:`RunRows.fill`, which the
runs stream calls between its frames, never by the request that sends the list.
A finished run's log is read once; a running run's again at most every
:data:`LIVE_ROW_SECONDS`, and at most every :data:`SLOWER` times as long as its last
read took, so a long live run costs the server a bounded share of a core.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..errors import RunNotFound
from ..state import RunStatus
from ..store import RunRecord, RunStore
from .projection import run_row, run_totals

LIVE_ROW_SECONDS = 5.0
"""A running run's nodes, tokens and cost in the runs list are at most about this old."""
SLOWER = 20.0
"""A running run's log is read again only after this many times its last read took."""
KEEP = 20_000
"""Most runs whose totals are kept (the least recently filled are dropped first)."""


@dataclass(frozen=True, slots=True)
class _Totals:
    updated_at: float
    status: str
    totals: dict[str, Any]
    read_at: float
    took: float


class RunRows:
    """See the module docstring. Safe to call from several threads."""

    def __init__(self, store: RunStore, keep: int = KEEP) -> None:
        self.store = store
        self.keep = keep
        self._totals: OrderedDict[str, _Totals] = OrderedDict()
        self._filling = threading.Lock()
        """Held by the one caller reading logs: another caller skips, it does not wait."""

    def records(self, limit: int, *, sub_runs: bool = False) -> list[RunRecord]:
        """The newest ``limit`` runs' index records; sub-runs (``RUN/node``) only if
        ``sub_runs``, as ``counterpoint runs`` lists them: a map over a sub-graph has a
        sub-run per item, which would push every other run out of the list (the store's
        index of top-level runs: :meth:`~counterpoint.store.RunIndex.top_runs`)."""
        return self.store.runs(limit) if sub_runs else self.store.top_runs(limit)

    def rows(self, records: list[RunRecord]) -> list[dict[str, Any]]:
        """The rows of ``records``, with the totals filled in so far (``None`` until then)."""
        out = []
        for record in records:
            row = run_row(record)
            known = self._totals.get(record.run_id)
            if known is not None:  # a running run's may be a little old: see fill()
                totals = dict(known.totals)
                if totals.pop("asking", 0) and row["status"] == "interrupted":
                    row["status"] = "waiting"  # its process ended to wait for a person
                row.update(totals)
            out.append(row)
        return out

    def fill(self, records: list[RunRecord], budget: float) -> bool:
        """Read the logs of the runs among ``records`` whose totals are missing or stale,
        newest first, starting no read after ``budget`` seconds; whether any totals
        changed. Returns at once if another caller is filling. Blocks on the store."""
        if not self._filling.acquire(blocking=False):
            return False
        try:
            deadline = time.monotonic() + budget
            changed = False
            for record in records:
                if time.monotonic() > deadline:
                    break
                if not self._due(record):
                    continue
                began = time.monotonic()
                try:
                    events = self.store.events(record.run_id)
                except RunNotFound:  # deleted since the index was read
                    continue
                now = time.monotonic()
                totals = run_totals(events)
                known = self._totals.get(record.run_id)
                changed = changed or known is None or known.totals != totals
                self._totals[record.run_id] = _Totals(record.updated_at, record.status,
                                                      totals, now, now - began)
                self._totals.move_to_end(record.run_id)
                while len(self._totals) > self.keep:
                    self._totals.popitem(last=False)
            return changed
        finally:
            self._filling.release()

    def _due(self, record: RunRecord) -> bool:
        known = self._totals.get(record.run_id)
        if known is None or known.updated_at != record.updated_at or \
                known.status != record.status:
            return True
        if record.status != RunStatus.RUNNING:
            return False
        return time.monotonic() - known.read_at >= max(LIVE_ROW_SECONDS, SLOWER * known.took)
