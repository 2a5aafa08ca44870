"""A node's success, applied in one pass: the scheduler's hot path.

Most events a run records are a node succeeding and the nodes that success lets start.
Through :meth:`~.pipeline.Pipeline.emit` that is a dozen calls per node (apply the event,
react to it, make and apply each dependent's ``node_ready``, pick, apply and log each
``node_started``). :meth:`Success.succeeded` does the same steps inline when nothing
unusual follows from the success, and hands everything else to ``emit``. The state it
leaves and the events it logs are the ones ``emit`` would: the property tests replay the
log of random graphs and compare every node's status, attempt, output and times
(``tests/scheduler/test_properties.py``).
"""

from __future__ import annotations

import time
from heapq import heappush
from typing import Any

from ..errors import StoreError
from ..events import NODE_STARTED, NODE_SUCCEEDED, RUN_FINISHED, Event
from ..rules import final_status, ready_after
from ..state import READY, RUNNING, NodeState
from ..transitions import start_node, succeed
from .core import LOG_LATER, RUN_RUNNING, fallback_started
from .pipeline import Pipeline


class Success(Pipeline):
    """The fused success path (see the module docstring)."""

    __slots__ = ()

    def succeeded(self, ns: NodeState, attempt: int, value: str | None, output: Any) -> None:
        """Record that ``ns``'s running ``attempt`` succeeded with ``output`` (``value``:
        encoded), and start what that lets start: ``emit(Event(NODE_SUCCEEDED, ...))``.

        Inline when the run is alone on its capacity, running and not stopping, the node
        holds no resources, and each dependent whose inputs have all ended is a task whose
        inputs all succeeded without a choice. Those dependents are ready; when no other
        node waits for a slot and there are slots for them all, they start at once (the
        first in this task), highest rank first, and need no ``node_ready`` record. A
        dependent to skip, block or expand, and a run that ends, go through the general
        pipeline; so does a success under any other condition.
        """
        state = self.state
        if (self._emitting or ns.status is not RUNNING or ns.attempt != attempt
                or state.stop_reason is not None or state.status is not RUN_RUNNING
                or ns.spec.policy.resources or len(self._capacity.members) > 1):
            self.emit(Event(NODE_SUCCEEDED, time.time(), ns.spec.id, attempt, None, value,
                            output))
            return
        self._emitting = True
        try:
            if self._unlogged:  # the log keeps the order of the numbers
                self._log_unlogged()
            at = time.time()
            self._persist(Event(NODE_SUCCEEDED, at, ns.spec.id, attempt, None, value, output))
            ready = self._apply_success(ns, output, value, at)
            if self._pending:  # a dependent that does not simply start, or the run's end
                self._hold(ready, at)
                self._drain()
                self._dispatch()
            elif ready and not (state.ready or len(ready) >= LOG_LATER or state.limits
                                or self._capacity.slots - state.running < len(ready)):
                if len(ready) > 1:  # no other node waits, and there are slots for them all
                    ready.sort(key=_rank_order)  # in the order pick would give
                self._start(ready, at)
            else:  # they queue with the others, and the slot freed may start one waiting
                self._hold(ready, at)
                self._dispatch()
            self._log_and_send()
        except StoreError as exc:
            self._abort(exc)
        finally:
            self._emitting = False
        if state.asking or self._tree_asks:
            self.approvals.idle_check()

    def _apply_success(self, ns: NodeState, output: Any, value: str | None,
                       at: float) -> list[NodeState]:
        """Apply the success to the state and react to it (the pure core's
        :func:`~counterpoint.transitions.succeed` and :func:`~counterpoint.rules.ready_after`):
        returns the dependents now ready; the events of any other dependent, and the run's
        end, are left in the pending queue."""
        state = self.state
        succeed(state, ns, at, output, value)
        out: list[Event] = []
        ready = ready_after(state, ns, at, out)
        if out:
            self._pending.extend(out)
        elif state.open == 0 and not self._pending:
            self._pending.append(Event(RUN_FINISHED, at, data={"status": final_status(state)}))
        return ready

    def _hold(self, ready: list[NodeState], at: float) -> None:
        """Make ``ready`` READY and queue them (:func:`~counterpoint.rules.pick` chooses);
        their ``node_ready`` is logged if they do not start in this burst."""
        heap = self.state.ready
        held = self._held
        for d in ready:
            d.status = READY
            d.ready_at = at
            if d.first_ready_at is None:
                d.first_ready_at = at
            node_id = d.spec.id
            heappush(heap, (-d.rank, d.order, node_id))
            held[node_id] = at

    def _start(self, ready: list[NodeState], at: float) -> None:
        """Start ``ready`` at once, in this order, with the free slots for them all: what
        :meth:`~.pipeline.Pipeline._dispatch` does for nodes that became ready and start
        in the same burst (each logs ``node_started`` only)."""
        state = self.state
        tasks = self._tasks
        heir = self._heir
        for d in ready:
            attempt = d.attempt + 1
            spec = d.spec
            start_node(state, d, at, attempt)  # not READY: ready as it started
            node_id = spec.id
            self._persist(Event(NODE_STARTED, at, node_id, attempt, data=None if self._fallen
                                is None else fallback_started(self._fallen, node_id)))
            if heir is not None:  # the finishing node's task runs the first one itself
                task = tasks.get(heir)  # type: ignore[arg-type]
                heir = None
                if task is not None and not task.cancelling():
                    tasks[node_id] = task
                    self._heir = (spec, attempt)
                    continue
            assert self._group is not None
            tasks[node_id] = self._group.create_task(self._run_node(spec, attempt))


def _rank_order(ns: NodeState) -> tuple[float, int]:
    return (-ns.rank, ns.order)
