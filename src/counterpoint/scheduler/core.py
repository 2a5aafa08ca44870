"""The state one run's execution holds, shared by the scheduler's layers.

:class:`ExecutionCore` declares every attribute of a run being executed (its slots) and
nothing else. The layers above it each add one job, in a single line of inheritance so
that the hot path pays no indirection:

* :class:`~counterpoint.scheduler.pipeline.Pipeline`: events in, applied, numbered,
  batched to the store, published; the dispatch of ready nodes;
* :class:`~counterpoint.scheduler.attempts.Attempts`: one node's attempts, with retries,
  timeouts, fallbacks and sub-runs;
* :class:`~counterpoint.scheduler.control.Control`: live edits, cancel and stop;
* :class:`~counterpoint.scheduler.execution.Execution`: the run's task group from start
  to end, and how runs are prepared and resumed.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..approval import Timer
from ..backend import Backend, InProcessBackend
from ..events import Event
from ..graph import Graph, NodeKind, NodeSpec
from ..ids import NodeId, RunId
from ..options import RunOptions
from ..resources import Resources
from ..state import RunState, RunStatus
from ..store import RunStore
from .capacity import Capacity
from .ledgers import new_ledgers
from .waiting import ApprovalDesk

if TYPE_CHECKING:
    from .handle import RunHandle
    from .pipeline import _Sends

class Subscriber(Protocol):
    """Receives a run's events as they are logged, then ``None`` when it ends."""

    def put_nowait(self, item: Event | None, /) -> None: ...


RUN_RUNNING = RunStatus.RUNNING
TASK = NodeKind.TASK
GRAPH = NodeKind.GRAPH
JOIN = NodeKind.JOIN
LOG_LATER = 16
"""A dispatch starting this many nodes or more logs their ``node_started`` events only
after the loop has run the nodes' first steps (:meth:`Pipeline._dispatch`)."""
ADOPT_LIMIT = 64
"""Most nodes one task runs in a row, taking over from the node before (see
:meth:`Attempts._run_node`)."""


def fallback_started(fallen: frozenset[NodeId], node: NodeId) -> dict[str, Any] | None:
    """``node_started``'s data for ``node`` of a resumed run whose nodes ``fallen`` call
    their fallbacks again (see :meth:`ExecutionCore.resume_fallbacks`)."""
    return {"fallback": True} if node in fallen else None


class ExecutionCore:
    """One run being executed in this process: its attributes."""

    __slots__ = ("__weakref__", "_cancelling", "_capacity", "_children", "_deadline", "_done",
                 "_emitting", "_fallen", "_gate", "_group", "_heir", "_held", "_inline_async",
                 "_loop", "_outbox", "_pending", "_rng", "_sending", "_sends", "_seq",
                 "_subscribers", "_tasks", "_thread", "_timers", "_tree_asks", "_unlogged",
                 "_waits", "approvals", "backend",
                 "deadline_at", "graph",
                 "inputs", "journal", "ledgers", "options", "owns_store", "parent", "resources",
                 "run_id", "state", "store")

    def __init__(self, graph: Graph, state: RunState, store: RunStore, options: RunOptions,
                 *, backend: Backend, inputs: Mapping[str, Any], seq: int = 0,
                 parent: RunId | None = None, capacity: Capacity | None = None) -> None:
        self.graph = graph
        self.state = state
        self.store = store
        self.options = options
        self.backend = backend
        self.inputs = dict(inputs)
        self.run_id = state.run_id
        self.parent = parent
        self._seq = seq
        self._tasks: dict[NodeId, asyncio.Task[None]] = {}
        """The task running each running node (one task may run several in a row)."""
        self._group: asyncio.TaskGroup | None = None
        """The run's task group: every task of the run belongs to it, and none outlives
        :meth:`Execution.execute`."""
        self._cancelling: dict[NodeId, str] = {}
        self._timers: dict[NodeId, asyncio.TimerHandle] = {}
        self._subscribers: tuple[Subscriber, ...] = ()
        """Where every event goes as it is logged: subscribers' queues, and the run's
        history when it is kept (``None`` marks the run's end)."""
        self._pending: deque[Event] = deque()
        self._outbox: list[Event] = []
        """Events numbered and applied, not yet handed to the store: they go together at
        the end of the loop's pass (:meth:`Pipeline._send_later`), or at once when
        something needs them in the store (the flush barrier, the end of the run)."""
        self._sending = False
        """Whether the outbox is due to be sent at the end of this pass of the loop."""
        self._sends: _Sends | None = None
        self._thread: int | None = None
        """The thread running the run's event loop."""
        self._unlogged: list[tuple[float, int, list[NodeId]]] = []
        """Large dispatches whose ``node_started`` events are applied and numbered but not
        yet logged, as (time, first number, nodes): see :meth:`Pipeline._dispatch`. The
        events are made when logged, so a fan-out keeps no event objects alive meanwhile."""
        self._gate: asyncio.Event | None = None
        """Set while the run's steps must wait before they begin (:meth:`hold_steps`)."""
        self._held: dict[NodeId, Event | float] = {}
        """``node_ready`` events applied but not yet logged (see :meth:`Pipeline._log_held`):
        the event, or only its time where :meth:`Pipeline.succeeded` made the node ready
        without one (it is made if it is logged)."""
        self._emitting = False
        self._heir: NodeId | tuple[NodeSpec, int] | None = None
        """While a node task emits its success: that node's id, offering its task to a node
        the success lets start (see :meth:`Attempts._run_node`); then what
        :meth:`Pipeline._dispatch` gave it."""
        self._rng: random.Random | None = None
        self._capacity = capacity or Capacity(options.max_concurrency)
        """The concurrency and resource limits this run draws on: its own, or the ones of
        the top-level run it is a sub-run of (shared by all of that run's sub-runs)."""
        self._done: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deadline: Timer | None = None
        self.deadline_at: float | None = None
        """When the run's own deadline passes (seconds since the epoch, on the approvals'
        clock), as its ``run_created`` event recorded it: a resume keeps it."""
        self.owns_store = False
        """Whether the run opened its store itself (and closes it at the end)."""
        # awaiting an async step directly is exactly what InProcessBackend.call does
        self._inline_async = type(backend) is InProcessBackend
        self.journal: dict[NodeId, list[Event]] = {}
        """Per node, what its interrupted attempt recorded before a crash (on resume)."""
        self._fallen: frozenset[NodeId] | None = None
        """Nodes whose fallback was running when the process died (set on resume): their
        next attempt calls the fallback again, not the step whose failure is logged."""
        self._children: dict[NodeId, RunHandle] = {}
        self._tree_asks = False
        """Whether a sub-run of this (top-level) run has nodes waiting for people: its
        events then look whether the run tree can detach (see :mod:`.waiting`)."""
        self.resources = Resources()
        """What the run's steps opened for the whole run (MCP servers): closed at its end."""
        """Sub-graph nodes running now -> the handle of their sub-run."""
        self.ledgers = new_ledgers(self.run_id, options, sub_run=parent is not None)
        """The run's budget ledgers (:mod:`.ledgers`); replaced on resume."""
        self.approvals = ApprovalDesk(self)  # type: ignore[arg-type]
        """The run's approvals: nodes waiting for people, and their answers."""
        self._waits: dict[NodeId, dict[str, float]] = {}
        """Per running node, seconds its attempt waited so far by cause (see
        :meth:`Pipeline.waited`): recorded with the attempt's outcome."""

    def hold_steps(self) -> None:
        """Make every step of the run wait before it begins until :meth:`release_steps`:
        :func:`counterpoint.start` (and a fork) holds them until the run's first events
        are durable, so that no step has run (its effects done) for a run
        the store does not hold. The nodes are started meanwhile (their ``node_started``
        goes with ``run_created``, in one write); the wait is counted as the attempt's
        waiting for the log (``waited["log"]``), not as its own work."""
        self._gate = asyncio.Event()

    def resume_fallbacks(self) -> None:
        """Make the nodes of a resumed run whose fallback was in flight call it again
        (:attr:`NodeState.fell_back <counterpoint.state.NodeState.fell_back>`, from the
        log), instead of their step, which failed already."""
        fallen = frozenset(k for k, ns in self.state.nodes.items()
                           if ns.fell_back and not ns.status.terminal)
        self._fallen = fallen or None

    def release_steps(self) -> None:
        """Let the steps held by :meth:`hold_steps` begin."""
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.set()
