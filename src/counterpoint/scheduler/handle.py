"""The handle of a run in progress: follow it, edit it, cancel it, await its result."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..approval import Answer, Approval
from ..events import Event
from ..ids import RunId
from ..patch import Edit
from ..results import RunResult
from ..state import RunState

if TYPE_CHECKING:
    from .execution import Execution


class RunHandle:
    """A run in progress: follow its events, edit it, cancel it, await its result."""

    def __init__(self, execution: Execution, task: asyncio.Task[RunResult]) -> None:
        self._execution = execution
        self._task = task

    @property
    def run_id(self) -> RunId:
        return self._execution.run_id

    @property
    def state(self) -> RunState:
        """The live run state (read-only by convention)."""
        return self._execution.state

    def apply(self, edit: Edit) -> int:
        """Apply a live edit from outside the run; returns the new graph version."""
        return self._execution.apply(edit)

    def cancel(self) -> None:
        """Cancel the run: in-flight nodes are interrupted, the rest end cancelled."""
        self._execution.stop("cancelled")

    async def flush(self) -> None:
        await self._execution.flush()

    def raise_early_failure(self) -> None:
        """Raise what ended the run's task already, if it failed (e.g. its store refused
        to migrate before any event was queued): its id then names no run."""
        if self._task.done() and not self._task.cancelled():
            failure = self._task.exception()
            if failure is not None:
                raise failure

    async def discard(self) -> None:
        """Cancel the run's task and collect its end, whatever it is: for a start that
        failed (its store refused the first events), which reports that failure itself."""
        self._task.cancel()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await self._task

    def approvals(self) -> list[Approval]:
        """The run's approvals so far (pending, answered, withdrawn), oldest first."""
        return list(self._execution.approvals.records.values())

    def approve(self, approval_id: str, *, edit: Any = None, by: str | None = None,
                reason: str | None = None) -> Approval:
        """Approve one of this run's approvals (see :func:`counterpoint.approve`); the
        waiting node continues at once."""
        return self._answer(approval_id, Answer(approved=True, by=by, reason=reason,
                                                edit=edit))

    def reject(self, approval_id: str, reason: str | None = None, *,
               by: str | None = None) -> Approval:
        """Reject one of this run's approvals (see :func:`counterpoint.reject`)."""
        return self._answer(approval_id, Answer(approved=False, by=by, reason=reason))

    def _answer(self, approval_id: str, given: Answer) -> Approval:
        from ..answering import answer, record_answer
        execution = self._execution
        desk = execution.approvals
        approval = desk.records.get(approval_id)
        if approval is None:  # not this run's (or not asked yet): answered through the store
            return answer(execution.store, approval_id, given)
        desk.deliver(approval_id, record_answer(execution.store, approval, given))
        return desk.records[approval_id]

    async def events(self) -> AsyncIterator[Event]:
        """Every event of the run, from its first (for a run started by
        :func:`~counterpoint.start` or :func:`~counterpoint.start_resume`: of this
        execution), then live ones until the run finishes."""
        queue = self._execution.subscribe()
        while True:
            event = await queue.get()
            if event is None:
                return
            yield event

    def history(self) -> list[Event]:
        """The events of the run so far, in the order they were logged, as
        :meth:`events` gives them, without waiting (for a run started by
        :func:`~counterpoint.start`: its whole log; by :func:`~counterpoint.start_resume`:
        what this execution logged)."""
        return self._execution.history()

    async def result(self) -> RunResult:
        return await self._task
