"""The deletion role: removing finished runs from a store, and the blobs nothing refers to.

A store only grows as runs are recorded; :meth:`RunDeletion.delete_runs` is how it
shrinks, and :func:`prune` picks the runs to delete by age, count and status (what
``counterpoint delete`` and ``counterpoint prune`` do).

Contract for every implementation:

* :meth:`~RunDeletion.delete_runs` is all or nothing, in one transaction: the named runs,
  each with its sub-runs (``RUN/node``), their events, index records and commands, or
  none of them. It refuses (:class:`~counterpoint.errors.RunClaimed`) a run that is still
  running in a live process, and (:class:`~counterpoint.errors.UserError`) a sub-run
  named without its root; an unknown id raises
  :class:`~counterpoint.errors.RunNotFound`. An interrupted run (its process died) may be
  deleted: it will not be resumed.
* A run forked from a deleted run keeps its own log whole (forks copy what they reuse);
  its :attr:`~.RunIndex.RunRecord.forked_from` still names the deleted run.
* In the same transaction it removes every blob that no remaining event refers to and
  that was not stored or used again in the last ``blob_grace`` seconds. The grace covers
  a blob that a live process has stored for an event it has not written yet. A process
  reuses a blob it stored (sends only its digest) within one run only, so a blob removed
  here is stored again by the next run that needs it.
* The step estimates and the response cache are kept (they do not belong to a run).
"""

from __future__ import annotations

import abc
import re
import sys
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from ..errors import RunClaimed, UserError
from ..ids import RunId, parents
from .index import RunIndex, RunRecord
from .owners import owner_alive, owner_of, run_owner_alive

BLOB_GRACE = 3600.0
"""Seconds a blob is kept after it was last stored, whether or not an event refers to it."""
FINISHED = ("succeeded", "failed", "cancelled", "timed_out")
"""The statuses :func:`prune` deletes by default: runs that ended."""
DIGEST = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
"""A blob's name (a SHA-256 in hex), as events refer to one: in their ``blob`` column or
in their data (a model call's ``request`` and ``response``). Anything in a log that looks
like one keeps the blob of that name: the search may keep too much, never too little."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Deletion:
    """What :meth:`RunDeletion.delete_runs` (or :func:`prune`) removed, or would remove."""

    runs: tuple[RunId, ...] = ()
    """The runs removed, sub-runs included, in the order they were named."""
    events: int = 0
    """Their events."""
    blobs: int = 0
    """Blobs removed because nothing refers to them any more."""


class RunDeletion(abc.ABC):
    """Deletes runs. See the module docstring for the contract."""

    @abc.abstractmethod
    def delete_runs(self, run_ids: Iterable[RunId], *,
                    blob_grace: float = BLOB_GRACE) -> Deletion:
        """Delete ``run_ids`` with their sub-runs, and the blobs nothing refers to any
        more (stored more than ``blob_grace`` seconds ago), in one transaction."""


def doomed(run_ids: Iterable[RunId], record_of: Callable[[RunId], RunRecord | None],
           not_found: Callable[[RunId], Exception],
           sub_runs: Callable[[], Iterable[str]]) -> list[RunId]:
    """What deleting ``run_ids`` deletes: each of them, checked (``record_of`` finds its
    record; it must be a root run that no live process runs), then the sub-runs under
    them, from ``sub_runs`` (every sub-run id of the store, oldest first). Raises before
    anything is deleted: ``not_found(run_id)`` for an unknown id, :func:`refuse_live`'s."""
    named: dict[RunId, None] = {}
    for run_id in run_ids:
        record = record_of(run_id)
        if record is None:
            raise not_found(run_id)
        refuse_live(record)
        named[run_id] = None
    return [*named, *(RunId(sub) for sub in under(named, sub_runs()) if sub not in named)]


def under(roots: Collection[str], sub_runs: Iterable[str]) -> list[str]:
    """Those of ``sub_runs`` (ids ``RUN/node...``) that are under one of ``roots``: one
    look-up per ``/`` of each id, not a comparison with every root."""
    return [sub for sub in sub_runs if any(p in roots for p in parents(sub))]


def refuse_live(record: RunRecord) -> None:
    """Raise :class:`RunClaimed` if ``record``'s run is running in a live process, and
    :class:`UserError` if it is a sub-run (it goes with its root)."""
    if record.parent is not None:
        root = record.run_id.split("/", 1)[0]
        raise UserError(f"run {record.run_id} is a sub-run of {record.parent}; its log is part "
                        f"of its root's: delete the root run {root} instead")
    owner = owner_of(record)
    if record.status == "running" and owner is not None and owner_alive(owner):
        raise RunClaimed(f"run {record.run_id} is still running in process {owner.pid} on "
                         f"{owner.host}; cancel it first with `counterpoint cancel "
                         f"{record.run_id}`, or wait for it to finish. Nothing was deleted")


def digests(texts: Iterable[str | None]) -> set[str]:
    """The blob names that ``texts`` (stored events, as text) mention (see :data:`DIGEST`)."""
    found: set[str] = set()
    for text in texts:
        if text:
            found.update(DIGEST.findall(text))
    return found


def prune(store: RunIndex, *, older_than: float | None = None, keep: int = 0,
          statuses: Collection[str] = FINISHED, dry_run: bool = False,
          blob_grace: float = BLOB_GRACE, now: float | None = None) -> Deletion:
    """Delete the runs of ``store`` (root runs, with their sub-runs) whose status is one of
    ``statuses`` and that were last updated more than ``older_than`` seconds before ``now``
    (any age if ``None``), sparing the ``keep`` newest of those. ``dry_run``: delete
    nothing and return what would be deleted (its ``events`` and ``blobs`` are 0)."""
    if keep < 0:
        raise UserError(f"keep must be 0 or more, not {keep}")
    if older_than is not None and older_than < 0:
        raise UserError(f"older_than must be 0 seconds or more, not {older_than:g}")
    unknown = sorted(set(statuses) - {*FINISHED, "running"})
    if unknown:
        raise UserError(f"unknown run status {', '.join(unknown)}; use one of "
                        f"{', '.join((*FINISHED, 'running'))}")
    if not isinstance(store, RunDeletion):
        raise UserError(f"{type(store).__name__} cannot delete runs")
    cutoff = None if older_than is None else (time.time() if now is None else now) - older_than
    roots = [r for r in store.runs(sys.maxsize) if r.parent is None and r.status in statuses]
    chosen = [r for r in roots[keep:] if cutoff is None or r.updated_at < cutoff]
    if "running" in statuses:  # interrupted runs only: a live one is never deleted
        chosen = [r for r in chosen if r.status != "running" or not run_owner_alive(r)]
    ids: Sequence[RunId] = [r.run_id for r in chosen]
    if dry_run or not ids:
        return Deletion(runs=tuple(ids))
    return store.delete_runs(ids, blob_grace=blob_grace)
