"""The command-bus role: requests from any process to the process running a run."""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable

from ..ids import RunId


class CommandBus(abc.ABC):
    """Cancel requests, from any process, to the process running a run.

    :meth:`request_cancel` blocks briefly (it is durable when it returns) and may be
    called from any process; a request is answered by the run's finish. Watching is
    per process: callbacks are called on their loop, never in the caller's thread.
    """

    @abc.abstractmethod
    def request_cancel(self, run_id: RunId) -> None:
        """Ask the process running ``run_id`` to cancel it (seen by :meth:`cancel_requests`);
        raises :class:`~counterpoint.errors.RunNotFound`."""

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
        """Stop watching for a cancel of ``run_id``. Idempotent."""
