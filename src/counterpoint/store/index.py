"""The run-index role: one record per run, projected from its run-level events, and
the claim that makes one process the run's owner.

Contract for every implementation:

* The index follows the log: a run's record appears with its ``run_created`` event and
  its status changes with ``run_resumed`` / ``run_finished``, once they are durable.
* :meth:`RunIndex.run` and :meth:`~RunIndex.runs` may block briefly and are safe to
  call from any thread.
* A record's :attr:`~RunRecord.forked_from` comes from its ``run_created`` event, and
  :meth:`~RunIndex.forks` finds a run's forks from the records alone: the parent's own
  log is never rewritten; :meth:`~RunIndex.sub_runs` finds the runs under a run (ids
  ``RUN/...``) the same way.
* :meth:`~RunIndex.claim` is synchronous and decisive: it checks and takes ownership in
  one step that no other claim, in any process, interleaves with;
  :meth:`~RunIndex.release` gives back a claim a process took and could not use.
"""

from __future__ import annotations

import abc
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..ids import NodeId, RunId


@dataclass(frozen=True, kw_only=True, slots=True)
class ForkPoint:
    """Where a forked run came from: its parent run and how much of its log it read."""

    run: RunId
    """The run it was forked from."""
    seq: int
    """The parent's last event the fork read: outputs recorded after it are not reused."""
    node: NodeId | None = None
    """The node the fork was made at (``--at NODE``), if it was made at a node."""


def fork_point(data: Mapping[str, Any] | None) -> ForkPoint | None:
    """The :class:`ForkPoint` that a ``run_created`` event's ``data["forked_from"]``
    records (``{"run", "seq", "node"}``), or ``None``."""
    link = (data or {}).get("forked_from")
    if not isinstance(link, Mapping) or not link.get("run"):
        return None
    node = link.get("node")
    return ForkPoint(run=RunId(str(link["run"])), seq=int(link.get("seq") or 0),
                     node=NodeId(str(node)) if node else None)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    """One row of the run index (a projection of the run's first and last events)."""

    run_id: RunId
    graph: str
    status: str
    created_at: float
    updated_at: float
    parent: RunId | None = None
    source: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    owner_pid: int | None = None
    """The process that runs (or last ran) the run."""
    owner_host: str | None = None
    """The host of :attr:`owner_pid`."""
    owner_token: str | None = None
    """Tells :attr:`owner_pid` from a later process given the same pid
    (:func:`~counterpoint.store.owners.process_token`); ``None`` if unknown."""
    claimed_at: float | None = None
    """When the owner took the run over with :meth:`RunIndex.claim` (``None``: the owner
    is the process that created the run)."""
    forked_from: ForkPoint | None = None
    """The run this one was forked from (``None``: not a fork); the other way round,
    :meth:`RunIndex.forks` lists a run's forks."""


def record_from_row(row: Sequence[Any]) -> RunRecord:
    """A run index row as both stores keep it (their schemas' ``RUN_COLUMNS``: run_id,
    graph, status, created_at, updated_at, parent, source, options, owner_pid, owner_host,
    owner_token, claimed_at, fork_of, fork_seq, fork_node) as a record."""
    return RunRecord(run_id=RunId(row[0]), graph=row[1], status=row[2], created_at=row[3],
                     updated_at=row[4], parent=row[5], source=orjson.loads(row[6] or "{}"),
                     options=orjson.loads(row[7] or "{}"), owner_pid=row[8],
                     owner_host=row[9], owner_token=row[10], claimed_at=row[11],
                     forked_from=None if row[12] is None else ForkPoint(
                         run=RunId(row[12]), seq=int(row[13] or 0),
                         node=NodeId(row[14]) if row[14] else None))


class RunIndex(abc.ABC):
    """The index of runs. See the module docstring for the contract."""

    @abc.abstractmethod
    def run(self, run_id: RunId) -> RunRecord:
        """The index record of a run; raises :class:`~counterpoint.errors.RunNotFound`."""

    @abc.abstractmethod
    def runs(self, limit: int = 50) -> list[RunRecord]:
        """Runs, newest first."""

    def top_runs(self, limit: int = 50) -> list[RunRecord]:
        """Runs that are not sub-runs (``RUN/node``), newest first: what the run lists
        show (a map over a sub-graph makes a sub-run per item, which would fill them).

        This default reads ever more of the newest records; stores override it with a
        read of an index of the top-level runs.
        """
        asked = max(limit * 4, 64)
        while True:
            records = self.runs(asked)
            top = [r for r in records if r.parent is None]
            if len(top) >= limit or len(records) < asked:
                return top[:limit]
            asked *= 8

    def forks(self, run_id: RunId) -> list[RunRecord]:
        """The runs forked from ``run_id``, oldest first (empty if there are none).

        This default reads every record; stores override it with an indexed lookup.
        """
        found = [r for r in self.runs(limit=sys.maxsize)
                 if r.forked_from is not None and r.forked_from.run == run_id]
        return sorted(found, key=lambda r: r.created_at)

    def sub_runs(self, run_id: RunId) -> list[RunRecord]:
        """The runs under ``run_id`` (its sub-runs ``RUN/node``, theirs, and so on),
        oldest first (empty if it has none, or is not in the store).

        This default reads every record; stores override it with a lookup of the ids
        that start with ``RUN/``.
        """
        prefix = f"{run_id}/"
        found = [r for r in self.runs(limit=sys.maxsize) if r.run_id.startswith(prefix)]
        return sorted(found, key=lambda r: r.created_at)

    def ids_containing(self, text: str) -> list[RunId]:
        """The ids of the runs whose id contains ``text`` (at least: a store may also
        give ids that contain it in another letter case), in no particular order: what
        resolving a start of an id or of its serial needs, without reading records.

        This default reads every record; stores override it with a read of the ids only.
        """
        return [r.run_id for r in self.runs(limit=sys.maxsize) if text in r.run_id]

    @abc.abstractmethod
    def claim(self, run_id: RunId, *, pid: int, host: str) -> None:
        """Make process ``pid`` on ``host`` the owner of ``run_id``, or refuse.

        In one transaction: a run that is not finished is taken over if its recorded
        owner is gone (its pid on this host no longer runs, or is now another process)
        or is ``pid`` itself; otherwise :class:`~counterpoint.errors.RunClaimed` is raised,
        naming the owner. A finished run is left as it is (nothing to take over). Sees
        every event this store appended before the call. Blocks (up to the store's lock
        timeout, then :class:`~counterpoint.errors.StoreLocked`); safe to call from any
        thread; raises :class:`~counterpoint.errors.RunNotFound`.
        """

    @abc.abstractmethod
    def release(self, run_id: RunId, *, pid: int, host: str, previous: RunRecord) -> None:
        """Undo a :meth:`claim` by process ``pid`` on ``host`` that nothing came of (a
        resume that failed before it ran anything): the run's owner is put back as
        ``previous`` (its record read before the claim) recorded it. Does nothing if
        ``pid`` on ``host`` does not own the run. Blocks, is safe from any thread and
        idempotent, as :meth:`claim` is.
        """
