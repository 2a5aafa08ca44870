"""The run-index role: one record per run, projected from its run-level events, and
the claim that makes one process the run's owner.

Contract for every implementation:

* The index follows the log: a run's record appears with its ``run_created`` event and
  its status changes with ``run_resumed`` / ``run_finished``, once they are durable.
* :meth:`RunIndex.run` and :meth:`~RunIndex.runs` may block briefly and are safe to
  call from any thread.
* :meth:`~RunIndex.claim` is synchronous and decisive: it checks and takes ownership in
  one step that no other claim, in any process, interleaves with.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..ids import RunId


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


class RunIndex(abc.ABC):
    """The index of runs. See the module docstring for the contract."""

    @abc.abstractmethod
    def run(self, run_id: RunId) -> RunRecord:
        """The index record of a run; raises :class:`~counterpoint.errors.RunNotFound`."""

    @abc.abstractmethod
    def runs(self, limit: int = 50) -> list[RunRecord]:
        """Runs, newest first."""

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
