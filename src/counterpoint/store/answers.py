"""The answer-box role: approvals' answers, from any process, to the process running a run."""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable
from typing import Any

from ..ids import RunId

AnswerCallback = Callable[[str, dict[str, Any]], None]
"""Called with an approval's id and its answer (see :meth:`AnswerBox.watch_answers`)."""


class AnswerBox(abc.ABC):
    """Answers to a run's approvals (:mod:`counterpoint.approval`), from any process.

    :meth:`answer_approval` is durable when it returns and safe from many processes at
    once: the first answer to an approval wins. Watching is per process: callbacks are
    called on their loop, never in the caller's thread.
    """

    @abc.abstractmethod
    def answer_approval(self, run_id: RunId, approval_id: str, answer: dict[str, Any]) -> None:
        """Record ``answer`` to ``approval_id`` of ``run_id`` durably, once (it blocks
        briefly): a later answer raises :class:`~counterpoint.errors.ApprovalAnswered`;
        an unknown run raises :class:`~counterpoint.errors.RunNotFound`."""

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
