"""One node attempt's line to its run's blackboard: the run's loop, its log, its board.

Every blackboard operation runs on the run's event loop thread, in one step that reads
the board, decides and logs: nothing else of the run runs in between, so a version check
and the write it guards are atomic with respect to every other writer (async steps run
on that loop; a sync step's thread hands its call to the loop and waits for it).
"""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .. import codec
from ..errors import BoardConflict, OutputNotSerializable
from ..events import Event, EventKind
from ..ids import NodeId
from ..secrets import redact_data
from ..state import RUNNING
from .projection import BoardState
from .spec import NO_BOARD, Board

if TYPE_CHECKING:
    from ..context import RunAccess

T = TypeVar("T")

_LIVENESS_SECONDS = 0.1
"""How often a sync step waiting for the loop checks that the loop still runs."""


class Link:
    """What the blackboard's operations need of the run, for one node attempt."""

    __slots__ = ("attempt", "execution", "node")

    def __init__(self, execution: RunAccess, node: NodeId, attempt: int) -> None:
        self.execution = execution
        self.node = node
        self.attempt = attempt

    @property
    def where(self) -> str:
        return f"run {self.execution.run_id}, node {self.node!r}, attempt {self.attempt}"

    @property
    def spec(self) -> Board:
        """The board the run's graph declares."""
        return getattr(self.execution.graph, "board", None) or NO_BOARD

    @property
    def board(self) -> BoardState:
        """The run's board (made on first use; on the loop's thread only)."""
        state = self.execution.state
        if state.board is None:
            state.board = BoardState()
        return state.board

    def on_loop(self, fn: Callable[[], T]) -> T:
        """``fn()`` run on the run's loop, waiting for it from a sync step's thread.

        Raises :class:`~counterpoint.BoardConflict` (not retryable) if the loop has
        stopped: the run is over, and nothing more can be recorded for this attempt.
        """
        loop = self.execution.foreign_loop()
        if loop is None:
            return fn()
        if not loop.is_running():
            raise self.over()
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if not done.set_running_or_notify_cancel():
                return  # the step gave up waiting (below): it was told nothing happened
            try:
                done.set_result(fn())
            except BaseException as exc:  # reaches the step as if raised there
                done.set_exception(exc)

        loop.call_soon_threadsafe(run)
        while True:
            try:
                return done.result(timeout=_LIVENESS_SECONDS)
            except TimeoutError:
                if not loop.is_running() and done.cancel():
                    raise self.over() from None

    def over(self) -> BoardConflict:
        return BoardConflict(f"{self.where}: the run's event loop has stopped, so nothing "
                             "more can be written to its blackboard", retryable=False)

    def check_live(self) -> None:
        """Raise unless this attempt is its node's running attempt and the run goes on:
        a sync step's thread that outlived its cancelled attempt writes nothing."""
        state = self.execution.state
        ns = state.nodes.get(self.node)
        if state.status.terminal:
            raise self.over()
        if ns is not None and (ns.attempt != self.attempt or ns.status is not RUNNING):
            raise BoardConflict(f"{self.where}: this attempt has ended ({ns.status.value}), "
                                "so it may not change the blackboard any more",
                                retryable=False)

    def emit(self, kind: EventKind, data: dict[str, Any]) -> Event:
        """Log a board event of this attempt (applied to the board as it is logged)."""
        event = Event(kind, time.time(), self.node, self.attempt, data=redact_data(data))
        self.execution.emit(event)
        # applied (numbered) at once: steps never run inside an emit, so the board that
        # the next decision reads already holds this event
        assert event.seq, "a board event was queued behind another emit"
        return event


def copy_json(value: Any) -> Any:
    """A deep copy of JSON data (what board values are), several times quicker than
    :func:`copy.deepcopy`."""
    kind = type(value)
    if kind is list:
        return [copy_json(v) for v in value]
    if kind is dict:
        return {k: copy_json(v) for k, v in value.items()}
    return value


def as_json(value: Any, what: Callable[[], str]) -> Any:
    """``value`` as the JSON data the log keeps (what a replay will see), or an error
    naming ``what()``."""
    kind = type(value)
    if value is None or kind is int or kind is str or kind is bool or kind is float:
        return value
    try:
        return json.loads(codec.encode(value))
    except OutputNotSerializable as exc:
        raise OutputNotSerializable(f"{what()}: {exc}") from exc
