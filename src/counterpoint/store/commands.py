"""The command-bus role: requests from any process to the process running a run."""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable
from typing import Any

from ..ids import RunId

AnswerCallback = Callable[[str, dict[str, Any]], None]
"""Called with an approval's id and its answer (see :meth:`CommandBus.watch_answers`)."""


class CommandBus(abc.ABC):
    """Cancel requests and approvals' answers, from any process, to the process running
    a run.

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

    @abc.abstractmethod
    def answer_approval(self, run_id: RunId, approval_id: str, answer: dict[str, Any]) -> None:
        """Record ``answer`` to ``approval_id`` of ``run_id`` durably, once (it blocks
        briefly; safe from any process at once): the first answer wins, a later one raises
        :class:`~counterpoint.errors.ApprovalAnswered`. The run takes it from
        :meth:`approval_answers` or :meth:`watch_answers`."""

    @abc.abstractmethod
    def approval_answers(self, run_id: RunId) -> dict[str, dict[str, Any]]:
        """Every answer recorded for ``run_id``'s approvals, by approval id."""

    @abc.abstractmethod
    def watch_answers(self, run_id: RunId, loop: asyncio.AbstractEventLoop,
                      callback: AnswerCallback) -> None:
        """Call ``callback(approval_id, answer)`` on ``loop`` for every answer recorded for
        ``run_id`` (from any process), until :meth:`unwatch_answers`; an answer may be
        given more than once (the run keeps the first)."""

    @abc.abstractmethod
    def unwatch_answers(self, run_id: RunId) -> None:
        """Stop watching for answers to ``run_id``'s approvals. Idempotent."""
