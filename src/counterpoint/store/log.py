"""The event-log role: each run's append-only sequence of events.

Contract for every implementation:

* :meth:`EventLog.append` and :meth:`~EventLog.append_many` never block and are called
  from the event-loop thread only; events of one run are appended in sequence order.
* What survives a crash is a prefix of each run's event sequence, never a later event
  without the earlier ones.
* :meth:`~EventLog.flush` returns once everything appended before the call is durable
  (the flush barrier before an effect that cannot be repeated).
* :meth:`~EventLog.events` may block briefly and is safe to call from any thread.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Sequence

from ..events import Event
from ..ids import RunId


class EventLog(abc.ABC):
    """Where each run's events are recorded. See the module docstring for the contract."""

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

    def settle_when_batched(self, fut: asyncio.Future[None]) -> None:
        """:meth:`settle_when_flushed` for a waiter that can wait for the store's next batch:
        a store that gathers writes into batches need not send one early for it. A new
        run's steps wait for its first events this way, so thousands of runs started
        together share a few commits. This default is :meth:`settle_when_flushed`."""
        self.settle_when_flushed(fut)

    @abc.abstractmethod
    def events(self, run_id: RunId) -> list[Event]:
        """All durable events of a run, in order, with ``value`` resolved (``output``
        unset); raises :class:`~counterpoint.errors.RunNotFound`."""
