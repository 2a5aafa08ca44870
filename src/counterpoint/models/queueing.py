"""Who gets a model's next free slot: program-aware ordering of waiting calls (M35).

When every concurrent slot of a model is taken, calls wait. ``fifo`` serves them in
arrival order, as an ``asyncio.Semaphore`` would: every workflow's calls interleave, so
with many workflows sharing one endpoint each of them finishes near the end of the
whole batch. ``program`` (the default) orders the queue by the program instead. Calls
belong to *workflows* (a run and its sub-runs, keyed by the root run id), and the
program knows how much work each one has left: every node declares or has learned an
``estimate``, and a run counts the estimates of its unfinished nodes
(:attr:`RunState.remaining <counterpoint.state.RunState.remaining>`, handed down in the
call's :class:`~counterpoint.context.CallOwner`). So:

1. **Across workflows, the smallest tag first**, where a workflow's tag is

       start + remaining + max(0, attained - SLACK * promised)

   ``remaining`` is its run's estimated work left, as its latest call reported, so
   among workflows that came together this is *shortest remaining work first*: the
   workflow closest to done goes first and keeps going first as it is served, and
   workflows complete one after the other in order of size. That makes the mean
   completion time close to the smallest possible (SRPT, Schrage 1968; with estimates
   of whole programs, as Varys' smallest-effective-bottleneck-first orders coflows)
   and the 95th percentile the time the smallest 95% of the work takes, where FIFO
   lets every workflow finish near the end of the batch. Two terms keep it from
   starving anyone:

   * ``start``, the queue's *virtual time* when the workflow's first call came: the
     slot-seconds served so far divided by the slots (one second per second while every
     slot is busy). It makes the tag a virtual finish time, as in start-time fair
     queueing (Goyal et al. 1996) with whole workflows as the packets: a workflow that
     comes more than another's tag (in virtual seconds) after it queues behind it, so
     however many small workflows keep coming, a big one's turn comes.
   * the *excess*: ``attained``, the seconds its calls held a slot, beyond ``SLACK``
     times ``promised``, the work left that its first call reported. A workflow that
     runs on far beyond its estimate (an agent in a loop, or estimates far too low)
     loses its place as it is served: the least-attained-service guard of Autellix's
     PLAS, which the order becomes when there are no estimates. Only calls that waited
     for their slot are charged (and advance the virtual time): a slot taken while
     others were free held no one back, and a cold start (a busy event loop starting
     hundreds of runs makes those first calls slow) is not held against anyone.
2. **Ties in tag, the workflow that came first**, so workflows of one shape complete
   one after the other instead of all at the end.
3. **Within a workflow, the latest start first**: the call with the smallest virtual
   time of arrival minus upward rank (its node's estimated longest path to the end, see
   :mod:`counterpoint.state`). Calls that came together go critical path first, and a
   later call overtakes an earlier one only if its path is longer by more than the
   virtual time between them, so no call of a workflow waits forever behind its
   siblings either.

The order is work-conserving: a free slot is handed on the moment a call releases it,
and a call only waits while every slot is taken. Deciding costs O(log n) in the number
of waiting workflows and calls (heaps; a workflow's tag changes only when it calls or
is charged, so entries are refreshed lazily). A sub-run's calls report the sub-run's own
remaining work, not the whole tree's: an approximation of the workflow's size.

Calls made outside any run share one anonymous workflow. The queue belongs to one event
loop; :class:`~counterpoint.models.limits.RateLimiter` keeps one per loop. It remembers
at most ``MAX_WORKFLOWS`` workflows, forgetting the oldest idle ones first (a workflow
that comes back after that starts again from the queue's virtual time now).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from ..context import CallOwner

QueueOrder = Literal["program", "fifo"]
QUEUE_ORDERS: tuple[QueueOrder, ...] = ("program", "fifo")
MAX_WORKFLOWS = 4096
"""Workflows whose attained service a queue remembers."""
SLACK = 4.0
"""How many times its first estimate of the work left a workflow may hold slots before
the excess counts against it. Measured slot time includes what estimates leave out
(the request's round trip, prefill, a busy event loop), so a workflow is not pushed
back for being a few times slower than estimated; one that runs on far beyond its
estimate (an agent in a loop) is."""

T = TypeVar("T")
_ANONYMOUS = CallOwner("")


@dataclass(slots=True, eq=False)
class Waiting(Generic[T]):
    """One call waiting in a :class:`ProgramOrder`: its item and where it stands."""

    item: T
    workflow: str
    rank: float
    seq: int
    gone: bool = False
    """Served, or withdrawn (:meth:`ProgramOrder.discard`: skipped when its turn comes)."""


@dataclass(slots=True)
class _Workflow(Generic[T]):
    arrived: int
    """Order of this workflow's first call at this queue."""
    start: float
    """The queue's virtual time at that first call."""
    promised: float | None = None
    """The remaining work its first call reported: the service it is promised at the
    priority of its arrival."""
    attained: float = 0.0
    """Seconds its calls held a slot."""
    remaining: float = 0.0
    """Estimated seconds of work left, as its latest call reported."""
    version: int = 0
    """Bumped whenever the tag changes: older heap entries of it are stale."""
    waiting: list[tuple[float, int, Waiting[T]]] = field(default_factory=list)
    """Heap of (virtual time pushed - rank, seq, call): the latest start first."""
    live: int = 0
    """Calls in ``waiting`` not withdrawn."""

    @property
    def tag(self) -> float:
        excess = self.attained - SLACK * (self.promised or 0.0)
        return self.start + self.remaining + (excess if excess > 0 else 0.0)


class ProgramOrder(Generic[T]):
    """The ``program`` order as a pure data structure: waiting items in, the next one out.

    No clock, no event loop: :class:`SlotQueue` pushes its waiting futures and charges
    the seconds each call held a slot. Not safe to share between threads.
    """

    def __init__(self, slots: int) -> None:
        self.slots = max(1, slots)
        self._seq = itertools.count()
        self._arrivals = itertools.count()
        self._workflows: dict[str, _Workflow[T]] = {}
        self._pending: dict[str, _Workflow[T]] = {}
        """Workflows with live waiting calls."""
        self._heap: list[tuple[float, int, int, str]] = []
        """(tag, arrived, version, workflow) of pending workflows; stale entries lazily."""
        self._served = 0.0
        """Slot-seconds charged so far."""
        self._live = 0

    def __len__(self) -> int:
        """Waiting items (withdrawn ones not counted)."""
        return self._live

    @property
    def virtual_time(self) -> float:
        """Slot-seconds served so far per slot."""
        return self._served / self.slots

    def tag(self, workflow: str) -> float | None:
        """``workflow``'s virtual finish tag (smaller goes first), ``None`` if unknown."""
        known = self._workflows.get(workflow)
        return None if known is None else known.tag

    def note(self, owner: CallOwner) -> bool:
        """Take in ``owner``'s report of its remaining work (a call that did not wait
        reports it too); whether its workflow's tag changed."""
        workflow = self._workflow(owner.workflow)
        if workflow.promised is None:
            workflow.promised = owner.remaining
        changed = workflow.remaining != owner.remaining
        workflow.remaining = owner.remaining
        return changed

    def push(self, item: T, owner: CallOwner) -> Waiting[T]:
        """Queue ``item`` for ``owner``; its report of remaining work updates the tag."""
        changed = self.note(owner)
        workflow = self._workflows[owner.workflow]
        entry = Waiting(item, owner.workflow, owner.rank, next(self._seq))
        heapq.heappush(workflow.waiting, (self.virtual_time - owner.rank, entry.seq, entry))
        workflow.live += 1
        self._live += 1
        if owner.workflow not in self._pending:
            self._pending[owner.workflow] = workflow
            self._push_tag(owner.workflow, workflow)
        elif changed:
            self._push_tag(owner.workflow, workflow)
        return entry

    def pop(self) -> T | None:
        """The next item to serve (removed), or ``None`` if nothing waits."""
        heap = self._heap
        while heap:
            _, _, version, name = heap[0]
            workflow = self._pending.get(name)
            if workflow is None or workflow.version != version:
                heapq.heappop(heap)  # stale: the workflow's tag moved or it waits no more
                continue
            while True:
                entry = heapq.heappop(workflow.waiting)[2]
                if not entry.gone:
                    break
            entry.gone = True
            workflow.live -= 1
            self._live -= 1
            if not workflow.live:
                self._idle(name, workflow)
            return entry.item
        return None

    def discard(self, entry: Waiting[T]) -> None:
        """Withdraw a pushed item that will not be served (its caller went away)."""
        if entry.gone:
            return  # served already (or withdrawn twice)
        workflow = self._pending[entry.workflow]  # it has a live entry: this one
        entry.gone = True
        workflow.live -= 1
        self._live -= 1
        if not workflow.live:
            self._idle(entry.workflow, workflow)

    def charge(self, owner: CallOwner, held: float) -> None:
        """Count ``held`` seconds of slot time to ``owner``'s workflow."""
        workflow = self._workflow(owner.workflow)
        self._served += held
        before = workflow.tag
        workflow.attained += held
        if owner.workflow in self._pending and workflow.tag != before:
            self._push_tag(owner.workflow, workflow)

    # ------------------------------------------------------------------ internals
    def _workflow(self, name: str) -> _Workflow[T]:
        workflow = self._workflows.get(name)
        if workflow is None:
            if len(self._workflows) >= MAX_WORKFLOWS:
                self._prune()
            workflow = self._workflows[name] = _Workflow(next(self._arrivals),
                                                         self.virtual_time)
        return workflow

    def _push_tag(self, name: str, workflow: _Workflow[T]) -> None:
        workflow.version += 1
        heapq.heappush(self._heap, (workflow.tag, workflow.arrived, workflow.version, name))
        if len(self._heap) > 2 * len(self._pending) + 64:  # drop the stale entries
            self._heap = [(w.tag, w.arrived, w.version, n) for n, w in self._pending.items()]
            heapq.heapify(self._heap)

    def _idle(self, name: str, workflow: _Workflow[T]) -> None:
        del self._pending[name]
        workflow.waiting.clear()  # only withdrawn entries can be left

    def _prune(self) -> None:
        """Forget the oldest half of the idle workflows (dicts keep insertion order)."""
        idle = [name for name in self._workflows if name not in self._pending]
        for name in idle[:max(1, len(idle) // 2)]:
            del self._workflows[name]


@dataclass(slots=True, eq=False)
class _Call:
    future: asyncio.Future[None]


class SlotQueue:
    """``slots`` concurrent slots of one model on one event loop, handed out by ``order``.

    ``clock`` measures how long calls hold a slot (``time.perf_counter`` by default;
    injectable so that order decisions can be tested without real time).
    """

    def __init__(self, slots: int, order: QueueOrder = "program",
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if order not in QUEUE_ORDERS:
            raise ValueError(f"unknown queue order {order!r}; expected one of {QUEUE_ORDERS}")
        self.slots = slots
        self.order = order
        self._clock = clock
        self._free = slots
        self._fifo: deque[_Call] = deque()
        self._program: ProgramOrder[_Call] = ProgramOrder(slots)

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot."""
        return len(self._fifo) if self.order == "fifo" else len(self._program)

    @property
    def free(self) -> int:
        """Slots not held by any call."""
        return self._free

    def busy(self) -> bool:
        """Whether every slot is taken (a caller will wait)."""
        return self._free <= 0

    async def acquire(self, owner: CallOwner | None) -> float:
        """Wait for a slot; returns when it was granted (by the queue's clock)."""
        if self._free > 0 and not self.waiting:
            self._free -= 1
            if self.order == "program":
                self._program.note(owner or _ANONYMOUS)
            return self._clock()
        call = _Call(asyncio.get_running_loop().create_future())
        entry = None
        if self.order == "fifo":
            self._fifo.append(call)
        else:
            entry = self._program.push(call, owner or _ANONYMOUS)
        try:
            await call.future
        except BaseException:
            if call.future.done() and not call.future.cancelled():
                self._release_slot()  # granted, but the caller is gone: pass it on
            elif entry is not None:
                self._program.discard(entry)
            elif call in self._fifo:
                self._fifo.remove(call)
            raise
        return self._clock()

    def release(self, owner: CallOwner | None, granted: float, *, waited: bool = True) -> None:
        """Give back a slot held since ``granted``. If the call ``waited`` for it (the
        caller's :meth:`busy` said so before :meth:`acquire`), charge the time to
        ``owner``'s workflow: a slot taken while slots were free held no one back."""
        if self.order == "program" and waited:
            self._program.charge(owner or _ANONYMOUS, max(0.0, self._clock() - granted))
        self._release_slot()

    def _release_slot(self) -> None:
        self._free += 1
        while self._free > 0:
            call = self._next()
            if call is None:
                return
            if not call.future.done():
                self._free -= 1
                call.future.set_result(None)

    def _next(self) -> _Call | None:
        if self.order == "fifo":
            return self._fifo.popleft() if self._fifo else None
        return self._program.pop()
