"""Who gets a model's next free slot: program-aware ordering of waiting calls (M35).

When every concurrent slot of a model is taken, calls wait. ``fifo`` serves them in
arrival order, as an ``asyncio.Semaphore`` would: every workflow's calls interleave, so
with many workflows sharing one endpoint each of them finishes near the end of the
whole batch. ``program`` (the default) orders the queue by the program instead:

1. **Fair share across workflows, least attained service first.** Each workflow (a
   run and its sub-runs, keyed by the root run id) accumulates the seconds its calls
   held a slot. Waiting workflows are served in order of their *level*, a logarithmic
   bucket of that service in units of the mean call (``floor(log2(1 + attained /
   mean_call))``: level 0 before the first answer, 1 after about one call, 2 after
   three, 3 after seven...), the discretised least-attained-service of Autellix's
   PLAS. Short workflows finish before long ones catch their attention (SRPT-like, for
   the mean), and a long workflow is never starved: others' levels rise as they are
   served.
2. **Within a level, the workflow that came first** (its first call at this model),
   so workflows of equal standing complete one after the other instead of all at the
   end.
3. **Within a workflow, critical path first**: the waiting node with the highest
   upward rank (the estimated length of its longest remaining path, see
   :mod:`counterpoint.state`), then arrival.

Calls made outside any run share one anonymous workflow. The queue belongs to one event
loop; :class:`~counterpoint.models.limits.RateLimiter` keeps one per loop. It remembers
the attained service of at most ``MAX_WORKFLOWS`` workflows, forgetting the oldest idle
ones first (a workflow that comes back after that starts again at level 0).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from ..context import CallOwner

QueueOrder = Literal["program", "fifo"]
QUEUE_ORDERS: tuple[QueueOrder, ...] = ("program", "fifo")
MAX_WORKFLOWS = 4096
"""Workflows whose attained service a queue remembers."""


_ANONYMOUS = CallOwner("")


@dataclass(slots=True)
class _Waiter:
    future: asyncio.Future[None]
    seq: int
    rank: float


@dataclass(slots=True)
class _Workflow:
    arrived: int
    """Order of this workflow's first call at this queue."""
    attained: float = 0.0
    """Seconds its calls held a slot."""
    waiting: list[_Waiter] = field(default_factory=list)


class SlotQueue:
    """``slots`` concurrent slots of one model on one event loop, handed out by ``order``."""

    def __init__(self, slots: int, order: QueueOrder = "program") -> None:
        if order not in QUEUE_ORDERS:
            raise ValueError(f"unknown queue order {order!r}; expected one of {QUEUE_ORDERS}")
        self.slots = slots
        self.order = order
        self._free = slots
        self._seq = itertools.count()
        self._arrivals = itertools.count()
        self._fifo: deque[_Waiter] = deque()
        self._workflows: dict[str, _Workflow] = {}
        self._pending: dict[str, _Workflow] = {}
        """Workflows with waiting calls."""
        self._served = 0
        self._held_total = 0.0

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot."""
        if self.order == "fifo":
            return len(self._fifo)
        return sum(len(w.waiting) for w in self._pending.values())

    def busy(self) -> bool:
        """Whether every slot is taken (a caller will wait)."""
        return self._free <= 0

    async def acquire(self, owner: CallOwner | None) -> float:
        """Wait for a slot; returns when it was granted (``time.perf_counter()``)."""
        if self._free > 0 and not self._has_waiters():
            self._free -= 1
            return time.perf_counter()
        owner = owner or _ANONYMOUS
        waiter = _Waiter(asyncio.get_running_loop().create_future(), next(self._seq),
                         owner.rank)
        if self.order == "fifo":
            self._fifo.append(waiter)
        else:
            workflow = self._workflow(owner.workflow)
            workflow.waiting.append(waiter)
            self._pending[owner.workflow] = workflow
        try:
            await waiter.future
        except BaseException:
            if waiter.future.done() and not waiter.future.cancelled():
                self._release_slot()  # granted, but the caller is gone: pass it on
            else:
                self._forget(waiter, owner)
            raise
        return time.perf_counter()

    def release(self, owner: CallOwner | None, granted: float) -> None:
        """Give back a slot held since ``granted``; charge the time to ``owner``'s workflow."""
        held = max(0.0, time.perf_counter() - granted)
        self._served += 1
        self._held_total += held
        if self.order == "program":
            self._workflow((owner or _ANONYMOUS).workflow).attained += held
        self._release_slot()

    # ------------------------------------------------------------------ internals
    def _has_waiters(self) -> bool:
        return bool(self._fifo) if self.order == "fifo" else bool(self._pending)

    def _workflow(self, name: str) -> _Workflow:
        workflow = self._workflows.get(name)
        if workflow is None:
            if len(self._workflows) >= MAX_WORKFLOWS:
                self._prune()
            workflow = self._workflows[name] = _Workflow(arrived=next(self._arrivals))
        return workflow

    def _prune(self) -> None:
        """Forget the oldest half of the idle workflows (dicts keep insertion order)."""
        idle = [name for name in self._workflows if name not in self._pending]
        for name in idle[:max(1, len(idle) // 2)]:
            del self._workflows[name]

    def _release_slot(self) -> None:
        self._free += 1
        while self._free > 0:
            waiter = self._next()
            if waiter is None:
                return
            if not waiter.future.done():
                self._free -= 1
                waiter.future.set_result(None)

    def _next(self) -> _Waiter | None:
        if self.order == "fifo":
            return self._fifo.popleft() if self._fifo else None
        if not self._pending:
            return None
        unit = self._held_total / self._served if self._served else 0.0
        best_name, best_key = "", (math.inf, math.inf)
        for name, workflow in self._pending.items():
            level = math.floor(math.log2(1.0 + workflow.attained / unit)) if unit > 0 else 0
            key = (level, workflow.arrived)
            if key < best_key:
                best_name, best_key = name, key
        workflow = self._pending[best_name]
        waiting = workflow.waiting
        pick = max(range(len(waiting)), key=lambda i: (waiting[i].rank, -waiting[i].seq))
        waiter = waiting.pop(pick)
        if not waiting:
            del self._pending[best_name]
        return waiter

    def _forget(self, waiter: _Waiter, owner: CallOwner | None) -> None:
        if self.order == "fifo":
            if waiter in self._fifo:
                self._fifo.remove(waiter)
            return
        name = (owner or _ANONYMOUS).workflow
        workflow = self._pending.get(name)
        if workflow is not None and waiter in workflow.waiting:
            workflow.waiting.remove(waiter)
            if not workflow.waiting:
                del self._pending[name]
