"""The run-store seam: an append-only event log per run, plus small indexes.

Contract for every implementation:

* :meth:`RunStore.append` never blocks and is called from the event-loop thread
  only; events of one run are appended in sequence order.
* What survives a crash is a prefix of each run's event sequence, never a later
  event without the earlier ones.
* :meth:`RunStore.flush` returns once everything appended before the call is
  durable (the flush barrier before an effect that cannot be repeated).
* Reads (:meth:`events`, :meth:`runs`, :meth:`run`) may block briefly and are
  safe to call from any thread.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..events import Event
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
    owner_host: str | None = None


class RunStore(abc.ABC):
    """Where runs are recorded. See the module docstring for the contract."""

    location: str = "memory"
    """Where the store lives, for messages (a file path or ``memory``)."""

    @abc.abstractmethod
    def append(self, run_id: RunId, event: Event) -> None:
        """Queue ``event`` (its ``seq`` already set) for durable storage. Never blocks."""

    def append_many(self, run_id: RunId, events: Sequence[Event]) -> None:
        """:meth:`append` each of ``events`` in order (stores may take them in one go).

        If one cannot be stored, the events before it are queued and the error is raised.
        """
        for event in events:
            self.append(run_id, event)

    @abc.abstractmethod
    async def flush(self) -> None:
        """Wait until every event appended so far is durable."""

    @abc.abstractmethod
    def flush_sync(self) -> None:
        """Blocking :meth:`flush`, for use outside an event loop."""

    def settle_when_flushed(self, fut: asyncio.Future[None]) -> None:
        """Resolve ``fut`` (a future of the running loop) once every event appended so far
        is durable, or fail it as :meth:`flush` fails: a run waits for its end and its log
        as one future. This default runs :meth:`flush` in a task; the built-in stores
        resolve ``fut`` directly."""
        def settle(done: asyncio.Future[None]) -> None:
            if fut.done():
                return
            exc = None if done.cancelled() else done.exception()
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)

        asyncio.ensure_future(self.flush()).add_done_callback(settle)

    @abc.abstractmethod
    def events(self, run_id: RunId) -> list[Event]:
        """All durable events of a run, in order, with ``value`` resolved (``output`` unset)."""

    @abc.abstractmethod
    def run(self, run_id: RunId) -> RunRecord:
        """The index record of a run; raises :class:`~counterpoint.errors.RunNotFound`."""

    @abc.abstractmethod
    def runs(self, limit: int = 50) -> list[RunRecord]:
        """Runs, newest first."""

    @abc.abstractmethod
    def estimates(self) -> Mapping[str, float]:
        """Mean duration in seconds of each step key seen in earlier runs."""

    @abc.abstractmethod
    def record_durations(self, samples: Mapping[str, Sequence[float]]) -> None:
        """Fold observed durations into the estimates. Never blocks."""

    @abc.abstractmethod
    def request_cancel(self, run_id: RunId) -> None:
        """Ask the process running ``run_id`` to cancel it (seen by :meth:`cancel_requests`)."""

    @abc.abstractmethod
    def cancel_requests(self) -> set[RunId]:
        """Runs whose cancellation was requested and not yet acknowledged."""

    @abc.abstractmethod
    def watch_cancel(self, run_id: RunId, loop: asyncio.AbstractEventLoop,
                     callback: Callable[[], None]) -> None:
        """Call ``callback`` on ``loop`` once a cancel of ``run_id`` is requested (from any
        process), until :meth:`unwatch_cancel`."""

    @abc.abstractmethod
    def unwatch_cancel(self, run_id: RunId) -> None:
        """Stop watching for a cancel of ``run_id``."""

    @abc.abstractmethod
    def put_blob(self, text: str) -> str:
        """Store ``text`` once by content; returns its SHA-256. Never blocks.

        Durable no later than the next event appended after it (events that refer
        to a blob never reach the disk without it).
        """

    @abc.abstractmethod
    def blob(self, digest: str) -> str | None:
        """The text stored under ``digest``, or ``None``."""

    @abc.abstractmethod
    def cache_get(self, key: str) -> str | None:
        """A cached model response (JSON text) for ``key``, or ``None``."""

    @abc.abstractmethod
    def cache_put(self, key: str, response: str) -> None:
        """Remember a model response under ``key``. Never blocks; visible to
        :meth:`cache_get` at once, durable with the next commit."""

    @abc.abstractmethod
    def close(self) -> None:
        """Flush and release resources. Idempotent."""


ESTIMATE_DRIFT = 0.05
"""Relative change of a step's mean duration that makes stores publish new estimates.

Ranks are insensitive to small changes, and keeping the estimates object stable
lets every run of a graph reuse the ranks computed for the first one."""
ESTIMATE_FLOOR = 0.001
"""Seconds: a mean that moved less than this is not republished, however large the
relative change (a trivial step's 20 µs becoming 30 µs changes no rank that matters,
but rebuilt the ranks of a 1,000-node graph for every run)."""


class StepEstimates:
    """Mean duration of each step key, folded from observed run times.

    Stores keep one; :meth:`published` returns the same mapping object until a
    mean drifts by more than :data:`ESTIMATE_DRIFT` and :data:`ESTIMATE_FLOOR`, so runs
    of a graph can reuse the ranks computed for the first one. Not thread-safe: callers
    that share it with another thread lock around :meth:`fold` and their reads of
    :attr:`stats`.
    """

    def __init__(self, stats: Mapping[str, tuple[int, float]] | None = None) -> None:
        self.stats: dict[str, tuple[int, float]] = dict(stats or {})
        """step key -> (sample count, running mean in seconds)."""
        self._published: dict[str, float] | None = None

    def published(self) -> Mapping[str, float]:
        """The current estimates (step key -> seconds)."""
        if self._published is None:
            self._published = {k: mean for k, (_, mean) in self.stats.items()}
        return self._published

    def fold(self, samples: Mapping[str, Sequence[float]]) -> None:
        """Add observed durations; republish if a mean is new or drifted."""
        published = self._published
        drifted = published is None
        for key, values in samples.items():
            if not values:
                continue
            count, mean = self.stats.get(key, (0, 0.0))
            count += len(values)  # the running mean over the old and the new samples, at once
            mean += (sum(values) - len(values) * mean) / count
            self.stats[key] = (count, mean)
            if not drifted:
                old = published.get(key)  # type: ignore[union-attr]
                drifted = old is None or \
                    abs(mean - old) > max(ESTIMATE_DRIFT * old, ESTIMATE_FLOOR)
        if drifted:
            self._published = None
