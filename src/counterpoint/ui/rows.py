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
from ..ids import RunId
from ..state import RunStatus
from ..store import RunRecord, RunStore
from .projection import run_row, run_totals

LIVE_ROW_SECONDS = 5.0
"""A running run's nodes, tokens and cost in the runs list are at most about this old."""
SLOWER = 20.0
"""A running run's log is read again only after this many times its last read took."""
SCAN_SECONDS = 10.0
"""When sub-runs crowd the newest records, the top-level runs beyond them are looked for
again at most this often (a top-level run hidden behind more than four times the list's
length of newer sub-runs may show up this late)."""
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
        self._scan_lock = threading.Lock()
        self._scanned: tuple[float, float, list[RunId]] | None = None
        """When the last scan of every record was made, what it took, what it found."""
        self._filling = threading.Lock()
        """Held by the one caller reading logs: another caller skips, it does not wait."""

    def records(self, limit: int, *, sub_runs: bool = False) -> list[RunRecord]:
        """The newest ``limit`` runs' index records; sub-runs (``RUN/node``) only if
        ``sub_runs``, as ``counterpoint runs`` lists them: a map over a sub-graph has a
        sub-run per item, which would push every other run out of the list."""
        if sub_runs:
            return self.store.runs(limit)
        window = limit * 4
        recent = self.store.runs(window)
        top = [r for r in recent if r.parent is None]
        if len(top) >= limit or len(recent) < window:
            return top[:limit]  # the usual case: the newest records hold enough of them
        # sub-runs crowd the newest records (a map over a sub-graph): the index has no
        # "top-level only" read, and a scan of every record (270 ms for 20,000 sub-runs)
        # is made at most every SCAN_SECONDS and SLOWER times its cost; in between, the
        # runs it found are read again by id (a status may change), with the newest
        # records' own
        with self._scan_lock:
            now = time.monotonic()
            if self._scanned is None or now - self._scanned[0] >= max(
                    SCAN_SECONDS, SLOWER * self._scanned[1]):
                found = self._scan(limit)
                self._scanned = (now, time.monotonic() - now, [r.run_id for r in found])
                return found
            known = self._scanned[2]
        fresh = {r.run_id: r for r in top}
        for run_id in known:
            if run_id not in fresh:
                try:
                    fresh[run_id] = self.store.run(run_id)
                except RunNotFound:  # deleted since
                    continue
        return sorted(fresh.values(), key=lambda r: r.created_at, reverse=True)[:limit]

    def _scan(self, limit: int) -> list[RunRecord]:
        asked = limit * 32
        while True:  # ask for more until enough
            records = self.store.runs(asked)
            top = [r for r in records if r.parent is None]
            if len(top) >= limit or len(records) < asked:
                return top[:limit]
            asked *= 8

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
