"""The run-store seam: :class:`RunStore`, the composite of the store's roles.

Each role is a small ABC in a module named for what it holds, with its contract in
that module's docstring:

========================  =============================================================
:class:`.EventLog`        ``append``, ``append_many``, ``flush``, ``flush_sync``,
                          ``settle_when_flushed``, ``events`` (:mod:`.log`)
:class:`.RunIndex`        ``run``, ``runs``, ``claim`` (:mod:`.index`)
:class:`.BlobStore`       ``put_blob``, ``blob`` (:mod:`.blobs`)
:class:`.ResponseCache`   ``cache_get``, ``cache_put`` (:mod:`.cache`)
:class:`.StepEstimates`   ``estimates``, ``record_durations`` (:mod:`.estimates`)
:class:`.CommandBus`      ``request_cancel``, ``cancel_requests``, ``watch_cancel``,
                          ``unwatch_cancel`` (:mod:`.commands`)
:class:`.AnswerBox`       ``answer_approval``, ``approval_answers``, ``watch_answers``,
                          ``unwatch_answers`` (:mod:`.answers`)
:class:`.RunDeletion`     ``delete_runs`` (:mod:`.deletion`)
========================  =============================================================

A part of counterpoint that needs one role takes that role's type (the model layer a
:class:`.ResponseCache`, ``counterpoint runs`` a :class:`.RunIndex`), so a fake for it
implements a handful of methods, not seventeen.

The roles are ABCs rather than Protocols: an implementation states which roles it
fills, a missing method fails when the class is instantiated (not at the first call,
deep in a run), :meth:`.EventLog.append_many` and :meth:`.EventLog.settle_when_flushed`
come with working defaults, and ``isinstance(x, RunStore)`` (the runtime's test for "a
store, not a path") stays an exact, cheap check.
"""

from __future__ import annotations

import abc

from .answers import AnswerBox
from .blobs import BlobStore
from .cache import ResponseCache
from .commands import CommandBus
from .deletion import BLOB_GRACE, Deletion, RunDeletion
from .estimates import ESTIMATE_DRIFT, ESTIMATE_FLOOR, RunningMeans, StepEstimates
from .index import ForkPoint, RunIndex, RunRecord
from .log import EventLog

__all__ = ["BLOB_GRACE", "ESTIMATE_DRIFT", "ESTIMATE_FLOOR", "AnswerBox", "BlobStore",
           "CommandBus", "Deletion", "EventLog", "ForkPoint", "ResponseCache", "RunDeletion",
           "RunIndex", "RunRecord", "RunStore", "RunningMeans", "StepEstimates"]


class RunStore(EventLog, RunIndex, BlobStore, ResponseCache, StepEstimates, CommandBus,
               AnswerBox, RunDeletion):
    """Where runs are recorded: every role of the store, in one object."""

    location: str = "memory"
    """Where the store lives, for messages (a file path or ``memory``)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Flush and release resources. Idempotent."""
