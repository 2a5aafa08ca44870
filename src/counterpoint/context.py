"""What a running step can see and do: its identity, live edits, the flush barrier.

:class:`RunAccess` is all a step (and the model and agent layers, through
:func:`current_context`) may use of the run it runs in; the scheduler's execution
implements it. Depending on this protocol, not on the scheduler, keeps every dependency
pointing down: the scheduler imports this module, never the other way round.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .errors import Cancelled, PatchError, UserError
from .events import Event, EventKind
from .ids import NodeId, RunId
from .patch import Edit, require_edit
from .secrets import redact_data
from .state import ModelTally, NodeStatus, RunState

if TYPE_CHECKING:
    from .approval import Answer, Ledger, OnTimeout
    from .board.access import BoardAccess
    from .graph import Graph
    from .options import RunOptions
    from .resources import Resources
    from .store import RunStore


class RunAccess(Protocol):
    """What a running step may use of its run. Implemented by the scheduler's execution.

    Every method is called on the run's event loop thread, except :meth:`foreign_loop`,
    which tells a caller in another thread which loop to hand its call to.
    """

    run_id: RunId
    store: RunStore
    state: RunState
    options: RunOptions
    journal: dict[NodeId, list[Event]]
    graph: Graph

    @property
    def approvals(self) -> Ledger:
        """The run's approvals (:mod:`counterpoint.approval`)."""

    resources: Resources
    """What steps opened for the whole run; closed when the run ends."""

    def emit(self, event: Event) -> None:
        """Apply, log and publish ``event`` (and what follows from it)."""

    def publish(self, event: Event) -> None:
        """Give ``event`` to the run's subscribers only (not logged)."""

    def apply(self, edit: Edit) -> int:
        """Validate and apply a live edit; returns the new graph version."""

    async def flush(self) -> None:
        """Wait until every event of the run so far is durable."""

    def foreign_loop(self) -> asyncio.AbstractEventLoop | None:
        """The run's loop if the caller runs in another thread, else ``None``."""

    def waited(self, node: NodeId, attempt: int, cause: str, seconds: float) -> None:
        """Count ``seconds`` of ``node``'s attempt as waiting for ``cause``, not running."""

_log = logging.getLogger(__name__)

_RETRIED_SUB_RUN = re.compile(r"~\d+$")
"""The end of a sub-run's id that numbers its sub-graph node's retries (``run/node~2``)."""

_LIVENESS_SECONDS = 0.1
"""How often a sync step waiting for its edit checks that the run's loop still runs."""

_CURRENT: ContextVar[tuple[RunAccess, NodeId, int] | None] = ContextVar(
    "counterpoint_node", default=None)
"""The node the calling task runs for: set by the scheduler for every node's task."""


def record_wait(cause: str, seconds: float) -> None:
    """Count ``seconds`` the calling node's attempt spent waiting for ``cause`` (``thread``,
    ``model``, ...) as waiting, not running, in the run's metrics. Outside a node, or
    from another thread than the run's loop, it does nothing."""
    current = _CURRENT.get()
    if current is None or seconds <= 0:
        return
    execution, node, attempt = current
    if execution.foreign_loop() is None:
        execution.waited(node, attempt, cause, seconds)


@dataclass(frozen=True, slots=True)
class CallOwner:
    """Who makes a model call: its workflow (root run id), its node's upward rank and the
    work its run has left."""

    workflow: str
    rank: float = 0.0
    """The calling node's upward rank: estimated seconds of its longest path to a sink."""
    remaining: float = 0.0
    """Estimated seconds of work in the calling run's unfinished nodes (the caller's
    own included): :attr:`RunState.remaining <counterpoint.state.RunState.remaining>`."""


def call_owner() -> CallOwner | None:
    """Who a model call made now is for: the calling node's workflow (its root run), upward
    rank and its run's remaining work, which order the model's queue
    (:mod:`counterpoint.models.queueing`); ``None`` outside a node."""
    current = _CURRENT.get()
    if current is None:
        return None
    execution, node, _ = current
    run = execution.state
    state = run.nodes.get(node)
    return CallOwner(execution.run_id.split("/", 1)[0],
                     state.rank if state is not None else 0.0, run.remaining)


def current_context() -> NodeContext | None:
    """The context of the node the caller runs inside, if any (model calls use it)."""
    current = _CURRENT.get()
    return None if current is None else NodeContext(*current)


class _Done:
    """An awaitable that is already done: what ``flush`` returns to a sync step, which
    waited in its thread (awaiting it, or not, is the same)."""

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()  # ends at once


_DONE = _Done()


class NodeContext:
    """Given to a step that declares a ``ctx`` (or ``NodeContext``-annotated) parameter."""

    def __init__(self, execution: RunAccess, node: NodeId, attempt: int,
                 stop: threading.Event | None = None) -> None:
        self._execution = execution
        self.node = node
        """This node's id."""
        self.attempt = attempt
        """This attempt's number, from 1."""
        self._stop = stop

    @property
    def cancelled(self) -> bool:
        """Whether this attempt was cancelled or timed out while it still runs.

        An async step is interrupted at its next ``await``; a plain (sync) step runs in a
        worker thread that nothing can interrupt, so a long one should check this (or
        call :meth:`check_cancelled`) between pieces of work and return early.
        """
        return self._stop is not None and self._stop.is_set()

    def check_cancelled(self) -> None:
        """Raise :class:`~counterpoint.Cancelled` if this attempt was cancelled or timed
        out (see :attr:`cancelled`): the cooperative cancel check of a sync step."""
        if self.cancelled:
            raise Cancelled(f"run {self.run_id}, node {self.node!r}: attempt {self.attempt} "
                            "was cancelled or timed out; the step stopped at its check")

    @property
    def run_id(self) -> RunId:
        return self._execution.run_id

    @property
    def idempotency_key(self) -> str:
        """A key for an effect this node has outside the run (a payment, an email, a row
        written elsewhere): the same for every attempt of this node, in this process and
        after a resume, and in a sub-graph for every attempt of the node running it; and
        different for every other node and run (a map's items and a fork's nodes
        included). Give it to a service that drops repeated requests by key
        (an ``Idempotency-Key`` header, an upsert's primary key): an attempt that ran the
        effect but died before its success reached the log then does not run it twice."""
        root, *below = self.run_id.split("/")
        # a sub-graph node's retry runs its sub-graph in a new sub-run (run/node~2): the
        # same nodes, the same effects, so the same keys as in its first sub-run
        run = "/".join([root, *(_RETRIED_SUB_RUN.sub("", part) for part in below)])
        digest = hashlib.sha256(f"{run}\0{self.node}".encode()).hexdigest()
        return f"cp-{digest[:32]}"

    @property
    def board(self) -> BoardAccess:
        """The run's shared blackboard and work queues (:mod:`counterpoint.board`)."""
        from .board.access import BoardAccess
        return BoardAccess(self._execution, self.node, self.attempt)

    @property
    def store(self) -> RunStore:
        """The store the run is recorded in."""
        return self._execution.store

    def record(self, kind: EventKind, data: dict[str, Any], *, persist: bool = True) -> None:
        """Add an informational event (a model call, a streamed delta) to this node's run.

        Persisted events go to the log; ``persist=False`` only reaches subscribers.
        Informational events never change which nodes run. Configured secrets are
        redacted from ``data`` first (:mod:`counterpoint.secrets`).
        """
        event = Event(kind, time.time(), self.node, self.attempt, data=redact_data(data))
        if kind is EventKind.TOOL_RESULT and "approval" in data:  # an approved call ran once
            self._execution.approvals.use(data["approval"], event.data or {})
        target = self._execution.emit if persist else self._execution.publish
        loop = self._loop_from_thread(UserError, "recorded")
        if loop is None:
            target(event)
        else:  # a sync step, in a worker thread: the run's loop records it, in call order
            loop.call_soon_threadsafe(self._record_on_loop, target, event)

    def _record_on_loop(self, target: Callable[[Event], None], event: Event) -> None:
        """Record ``event`` sent from a sync step's thread, unless the run has finished
        since (its loop stopped just after the step checked it and ran again later): the
        log of a finished run ends with its ``run_finished``."""
        if not self._execution.state.status.terminal:
            target(event)
        elif target == self._execution.emit:  # the stream-only ones are not worth a word
            _log.warning("run %s, node %r: a %s event recorded by attempt %d reached the "
                         "run after it finished (%s) and was not logged; record before the "
                         "step returns", self._execution.run_id, self.node, event.kind.value,
                         self.attempt, self._execution.state.status.value)

    def _loop_from_thread(self, error: type[UserError],
                          what: str) -> asyncio.AbstractEventLoop | None:
        """The run's event loop when called from another thread (a sync step), else None.

        Raises ``error`` if that loop has stopped: the run is over (the thread outlived its
        cancelled attempt) and nothing would ever run what is sent to it.
        """
        loop = self._execution.foreign_loop()
        if loop is not None and not loop.is_running():
            raise error(f"run {self.run_id}, node {self.node!r}: the run's event loop has "
                        f"stopped, so nothing more can be {what} for this attempt")
        return loop

    @property
    def usage(self) -> ModelTally:
        """The whole run's model calls, tokens and cost so far."""
        return self._execution.state.models

    @property
    def run_started_at(self) -> float:
        """When the run was created (seconds since the epoch)."""
        return self._execution.state.created_at

    def journal(self, kind: EventKind) -> list[dict[str, Any]]:
        """What this node's interrupted attempt recorded as ``kind`` events, in order.

        Empty unless the run was resumed after a crash in the middle of this node.
        Agents use it to replay finished turns and tool results instead of repeating
        model calls and side effects.
        """
        return [e.data or {} for e in self._execution.journal.get(self.node, ())
                if e.kind is kind]

    @property
    def resources(self) -> Resources | None:
        """What this run keeps open until it ends (MCP server connections), shared by its
        steps; ``None`` from a sync step's thread, whose loop cannot use them."""
        return self._execution.resources if self._execution.foreign_loop() is None else None

    @property
    def graph_version(self) -> int:
        """Number of edits applied so far; pass it as ``Edit(expected_version=...)``."""
        return self._execution.state.version

    def apply(self, edit: Edit) -> int:
        """Validate and apply ``edit`` atomically; returns the new graph version.

        From a sync step (a worker thread) the edit is applied on the run's event loop and
        this call waits for it.
        """
        execution = self._execution
        edit = require_edit(edit, f"run {self.run_id}, node {self.node!r}")
        edit.by = self.node  # recorded with the edit: a fork knows which node made it
        loop = self._loop_from_thread(PatchError, "applied")
        if loop is None:
            return execution.apply(edit)
        applied: concurrent.futures.Future[int] = concurrent.futures.Future()

        def apply_on_loop() -> None:
            if not applied.set_running_or_notify_cancel():
                return  # the step gave up waiting (below): it was told the edit was not applied
            try:
                applied.set_result(execution.apply(edit))
            except BaseException as exc:  # a PatchError reaches the step as if raised here
                applied.set_exception(exc)

        loop.call_soon_threadsafe(apply_on_loop)
        while not concurrent.futures.wait((applied,), timeout=_LIVENESS_SECONDS).done:
            # the loop stopped after the check above, before it ran the edit: give up, and
            # make sure the edit is never applied should that loop run again
            if not loop.is_running() and applied.cancel():
                raise PatchError(f"run {self.run_id}, node {self.node!r}: the run's event "
                                 "loop stopped before the edit was applied; it was not applied")
        return applied.result()

    @property
    def state(self) -> RunState:
        """The run's live state: every node's spec, status and output (read-only by
        convention, as :attr:`RunHandle.state`; change the run through :meth:`apply`).

        A sync step runs in a worker thread while the loop goes on changing this state:
        take a copy in one step (``list(ctx.state.nodes.items())``, or :meth:`nodes`)
        instead of iterating over the live dicts."""
        return self._execution.state

    @property
    def failed_before(self) -> int:
        """How many attempts of this node failed before this one (0 on its first attempt,
        and on one that resumes an attempt a crash interrupted). A model call of an attempt
        after a failure is asked afresh instead of answered from the response cache: the
        cached answer is the one the failed attempt was given."""
        ns = self._execution.state.nodes.get(self.node)
        return ns.failures if ns is not None else 0

    @property
    def options(self) -> RunOptions:
        """The run's options (concurrency, limits, deadline)."""
        return self._execution.options

    def nodes(self) -> dict[NodeId, NodeStatus]:
        """Every node of the run now (including spawned and added ones) and its status."""
        # list() copies the items in one step under the GIL: a sync step's thread never
        # sees the loop add a node in the middle (which would stop a plain iteration)
        return {k: v.status for k, v in list(self._execution.state.nodes.items())}

    def ask(self, question: str, payload: Any = None, *,
            timeout: float | None = None,
            on_timeout: OnTimeout = "reject", key: str | None = None
            ) -> Coroutine[Any, Any, Answer]:
        """Wait for a person to approve or reject ``question`` about ``payload`` (any JSON
        value); returns their :class:`~counterpoint.Answer`.

        The node is WAITING meanwhile (it holds no concurrency slot; other branches keep
        running). The answer comes from ``counterpoint approve/reject``, the API or a
        timeout: after ``timeout`` seconds ``on_timeout`` applies (``"reject"``,
        ``"approve"`` or :class:`~counterpoint.Escalate`). Answered once, an approval is
        never asked again: a re-run of the step after a crash or a retry gets the recorded
        answer for the same question and payload (``key``, default: the ask's ordinal
        within the attempt, tells asks apart); a different payload is a new approval.
        Async steps only (a sync step's thread cannot await a person).
        """
        if self._execution.foreign_loop() is not None:  # checked on the call, not the await:
            raise UserError(f"run {self.run_id}, node {self.node!r}: ctx.ask needs an async "
                            "step (`async def`); a sync step cannot wait for a person")
        return self._execution.approvals.ask(
            self.node, self.attempt, question, payload, key=key, timeout=timeout,
            on_timeout=on_timeout)

    async def ask_tool_call(self, tool: str, arguments: dict[str, Any],
                            schema: dict[str, Any], *, key: str) -> Answer:
        """Ask approval for a call of ``tool`` with ``arguments`` (what agents do for a
        tool declared ``@tool(approval=...)``); an edit is checked against ``schema``.
        The answer's ``id`` names the approval (see :meth:`approved_call_result`)."""
        return await self._execution.approvals.ask(
            self.node, self.attempt, f"call tool {tool}", {"tool": tool, "arguments": arguments},
            key=f"tool-{key}", timeout=None, on_timeout="reject", kind="tool", schema=schema)

    def approved_call_result(self, approval_id: str) -> dict[str, Any] | None:
        """The recorded ``tool_result`` of the call approval ``approval_id`` allowed, if the
        call was made already (in any attempt): an approved call runs once."""
        return self._execution.approvals.used(approval_id)

    def flush(self) -> Awaitable[None]:
        """Wait until everything this run has recorded so far is durable.

        Call it before an effect outside the run that cannot be repeated: ``await
        ctx.flush()`` in an async step; in a plain (sync) step, ``ctx.flush()`` waits in
        its worker thread while the run's loop makes the log durable (what it returns is
        already done). Raises :class:`~counterpoint.UserError` from a sync step whose run
        has stopped.
        """
        loop = self._loop_from_thread(UserError, "made durable")
        if loop is None:
            return self._execution.flush()
        durable = asyncio.run_coroutine_threadsafe(self._execution.flush(), loop)
        while not concurrent.futures.wait((durable,), timeout=_LIVENESS_SECONDS).done:
            if not loop.is_running():  # stopped before it ran the flush: it never will
                durable.cancel()
                raise UserError(f"run {self.run_id}, node {self.node!r}: the run's event "
                                "loop stopped before the log was made durable")
        durable.result()  # the store's failure, if the flush failed
        return _DONE
