"""The event pipeline: every state change of a run, applied, numbered, logged, published.

Every state change goes through :meth:`Pipeline.emit`, which applies the event to the
state (:func:`~counterpoint.state.evolve`), queues it for the store (sent at the end of
the loop's pass, in the order of the events' numbers), publishes it to subscribers and
feeds the events it implies (:func:`~counterpoint.state.react`) back in. After each burst
of events the pipeline starts whatever :func:`~counterpoint.state.pick` chooses. Nothing
awaits between an event and its consequences, so edits are applied atomically between
dispatches.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ..events import INFORMATIONAL, NODE_READY, NODE_STARTED, RUN_FINISHED, Event
from ..graph import NodeSpec
from ..ids import NodeId
from ..rules import pick, react
from ..state import READY, SUCCEEDED
from ..transitions import evolve, start_node
from .core import LOG_LATER, RUN_RUNNING, TASK, ExecutionCore, fallback_started

if TYPE_CHECKING:
    from collections.abc import Coroutine


class Pipeline(ExecutionCore):
    """The event pipeline and the dispatch of ready nodes (see the module docstring)."""

    __slots__ = ()

    def emit(self, event: Event) -> None:
        """Apply, persist and publish ``event`` and everything it implies, then dispatch."""
        self._pending.append(event)
        if self._emitting:
            return
        self._emitting = True
        try:
            if self._unlogged:
                self._log_unlogged()
            self._drain()
            self._dispatch()
            if len(self._capacity.members) > 1:  # a sub-run shares the capacity
                self._capacity.released(self)
            self._log_and_send()
        except StoreError as exc:
            self._abort(exc)
        finally:
            self._emitting = False
        if self.state.asking or self._tree_asks:  # nodes wait for people (here or in a
            self.approvals.idle_check()  # sub-run): the run may have nothing else to do

    def _log_and_send(self) -> None:
        """After a dispatch: log the held ``node_ready`` events, send the outbox later."""
        if self._held:
            self._log_held()
        if self._outbox and not self._sending:
            self._send_later()

    async def flush(self) -> None:
        """Wait until every event of this run so far is durable (the flush barrier)."""
        self._hand_over()
        await self.store.flush()

    async def flush_batched(self) -> None:
        """:meth:`flush`, waiting for the store's next batch rather than hurrying one
        (:meth:`~counterpoint.store.RunStore.settle_when_batched`)."""
        self._hand_over()
        durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.store.settle_when_batched(durable)
        await durable

    def foreign_loop(self) -> asyncio.AbstractEventLoop | None:
        """The run's loop if the caller runs in another thread (a sync step), else ``None``:
        what changes the run must then be done on that loop."""
        if self._thread is None or self._thread == threading.get_ident():
            return None
        return self._loop

    def publish(self, event: Event) -> None:
        """Give ``event`` to subscribers only: not applied, not persisted (streamed text)."""
        for queue in self._subscribers:
            if not isinstance(queue, History):  # what is not logged is not history either
                queue.put_nowait(event)

    def waited(self, node: NodeId, attempt: int, cause: str, seconds: float) -> None:
        """Count ``seconds`` of ``node``'s attempt ``attempt`` as waiting for ``cause``."""
        ns = self.state.nodes.get(node)
        if ns is None or ns.attempt != attempt or ns.status.terminal:
            return
        waits = self._waits.get(node)
        if waits is None:
            waits = self._waits[node] = {}
        waits[cause] = waits.get(cause, 0.0) + seconds

    def _outcome_data(self, node: NodeId, data: dict[str, Any] | None) -> dict[str, Any] | None:
        """``data`` of an attempt's outcome event, with what the attempt waited for."""
        waits = self._waits.pop(node, None)
        if waits is None:
            return data
        rounded = {cause: round(seconds, 6) for cause, seconds in waits.items()}
        return {**(data or {}), "waited": rounded}

    def _abort(self, exc: StoreError) -> None:
        """The log cannot be written: stop at once and raise ``exc`` from :meth:`execute`.

        Nothing more is recorded; what the store already holds stays a valid prefix,
        so the run can be resumed once the store works again.
        """
        self._pending.clear()
        self._outbox.clear()
        if self._done is not None and not self._done.done():
            self._done.set_exception(exc)

    def _drain(self) -> None:
        pending = self._pending
        popleft = pending.popleft
        state = self.state
        append = self._outbox.append
        subscribers = self._subscribers
        seq = self._seq
        try:
            while pending:
                ev = popleft()
                kind = ev.kind
                if kind is NODE_READY:
                    evolve(state, ev)
                    self._held[ev.node] = ev  # type: ignore[index]
                    continue  # nothing follows from it by the graph's rules alone
                seq += 1
                ev.seq = seq
                evolve(state, ev)
                append(ev)
                if subscribers:
                    for queue in subscribers:
                        queue.put_nowait(ev)
                if kind is NODE_STARTED or kind in INFORMATIONAL:
                    continue  # nothing follows from these by the graph's rules alone
                if kind is RUN_FINISHED:
                    self._seq = seq
                    self._finished()
                else:
                    pending.extend(react(state, ev, ev.at))
        finally:
            self._seq = seq

    def _log_held(self) -> None:
        """Log the ``node_ready`` events of nodes that did not start in this burst.

        A node that became ready and started in the same burst of events needs no
        ``node_ready`` record: its ``node_started`` says both (the projection sets
        ``ready_at`` from it), so a typical node costs two records instead of three.
        A node left waiting (for a slot or a resource) gets its ``node_ready`` logged
        here, after the burst, which keeps its queue wait in the log.
        """
        held = self._held
        nodes = self.state.nodes
        for node_id, ready in held.items():  # nodes started in the burst are gone already
            if nodes[node_id].status is READY:
                self._persist(ready if type(ready) is Event
                              else Event(NODE_READY, ready, node_id))  # type: ignore[arg-type]
        held.clear()

    def _log_unlogged(self) -> None:
        """Log and publish the ``node_started`` events :meth:`_dispatch` left for later."""
        batches, self._unlogged = self._unlogged, []
        append = self._outbox.append
        nodes = self.state.nodes
        fallen = self._fallen
        for at, first, ids in batches:
            for i, node_id in enumerate(ids):
                ev = Event(NODE_STARTED, at, node_id, nodes[node_id].attempt, seq=first + i,
                           data=None if fallen is None else fallback_started(fallen, node_id))
                append(ev)
                for queue in self._subscribers:
                    queue.put_nowait(ev)

    def _log_unlogged_soon(self) -> None:
        try:
            self._hand_over()
        except StoreError as exc:
            self._abort(exc)

    def _hand_over(self) -> None:
        """Give the store every event of the run so far: the deferred ``node_started``
        events, then the outbox."""
        if self._unlogged:
            self._log_unlogged()
        self._send()

    def _send_later(self) -> None:
        """Send the outbox once the loop has run what is ready now.

        A thousand branches ending in one pass of the loop then reach the store as one
        call with a thousand events, not a thousand calls. Nothing waits on the store
        meanwhile: whatever needs the events there (:meth:`flush`, the end of the run)
        sends them first.
        """
        if self._sends is None or self._loop is None:  # not on a loop: nothing to wait for
            self._send()
            return
        self._sending = True
        self._sends.add(self, self._loop)

    def _send(self) -> None:
        """Hand the events in the outbox to the store, in the order of their numbers."""
        if self._outbox:
            events, self._outbox = self._outbox, []
            self.store.append_many(self.run_id, events)

    def _persist(self, ev: Event) -> None:
        """Number, log and publish an event already applied (see :meth:`_drain` for the
        same steps inlined in the hot loop)."""
        if self._unlogged:  # the log keeps the order of the numbers
            self._log_unlogged()
        self._seq = ev.seq = self._seq + 1
        self._outbox.append(ev)
        for queue in self._subscribers:
            queue.put_nowait(ev)

    def _dispatch(self) -> None:
        """Start what :func:`pick` chooses. One pass is enough: starting a node makes no
        other node ready, and what pick passed over (no free slot or resource) stays so."""
        state = self.state
        if not state.ready or state.status is not RUN_RUNNING or state.stop_reason is not None:
            return
        nodes = state.nodes
        capacity = self._capacity
        shared = len(capacity.members) > 1
        free = capacity.free() if shared else capacity.slots - state.running
        if free <= 0:
            if shared:
                capacity.wait(self)
            return
        chosen = pick(state, free)
        if shared and state.ready:  # some wait for a slot or a resource another run holds
            capacity.wait(self)
        if not chosen:
            return
        now = time.time()
        held = self._held
        # a large fan-out: the nodes start first, their node_started are logged after the
        # loop has run their first steps (numbered now, so the log keeps its order)
        defer = len(chosen) >= LOG_LATER
        later = defer and not self._unlogged
        if defer:
            self._unlogged.append((now, self._seq + 1, chosen))
            self._seq += len(chosen)
        heir = self._heir
        tasks = self._tasks
        loop = self._loop
        group = self._group
        assert loop is not None and group is not None
        create_task = group.create_task
        fallen = self._fallen
        for node_id in chosen:  # applied here (nothing follows from a start), then launched
            ns = nodes[node_id]
            attempt = ns.attempt + 1
            start_node(state, ns, now, attempt)  # what evolve does with its node_started
            if not defer:  # (else the event is made when it is logged: _log_unlogged)
                self._persist(Event(NODE_STARTED, now, node_id, attempt, data=None
                                    if fallen is None else fallback_started(fallen, node_id)))
            if held:  # started in its burst: its node_ready is implied by its node_started,
                ready = held.pop(node_id, None)  # so ready when it started, as the log says
                if ready is not None:
                    if ns.first_ready_at == (ready if type(ready) is float
                                             else ready.at):  # type: ignore[union-attr]
                        ns.first_ready_at = now
                    ns.ready_at = now
            if heir is not None:  # the finishing node's task runs the first one itself
                task = tasks.get(heir)  # type: ignore[arg-type]
                heir = None
                if task is not None and not task.cancelling():
                    tasks[node_id] = task
                    self._heir = (ns.spec, ns.attempt)
                    continue
            tasks[node_id] = create_task(self._run_node(ns.spec, ns.attempt))
        if later:  # after the first steps of the tasks spawned above
            loop.call_soon(self._log_unlogged_soon)

    def _finished(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        samples: dict[str, list[float]] = {}  # the last attempt's run time of each step
        for ns in self.state.nodes.values():
            stopped = ns.stopped_at
            if stopped is not None and ns.status is SUCCEEDED:
                spec = ns.spec
                if spec.kind is TASK:
                    duration = stopped - ns.started_at  # type: ignore[operator]
                    if ns.waited is not None and "log" in ns.waited:  # (see hold_steps)
                        duration = max(0.0, duration - ns.waited["log"])
                    durations = samples.get(spec.step_key)
                    if durations is None:
                        samples[spec.step_key] = [duration]
                    else:
                        durations.append(duration)
        if samples:
            self.store.record_durations(samples)
        for queue in self._subscribers:
            queue.put_nowait(None)
        done = self._done
        if done is not None and not done.done():
            if self.parent is None and not self.owns_store:  # it returns once its log is
                self._hand_over()  # durable: one wake-up for the end and the log
                self.store.settle_when_flushed(done)
            else:
                done.set_result(None)

    def subscribe(self) -> asyncio.Queue[Event | None]:
        """A queue receiving every event from now on, then ``None`` when the run ends;
        with the run's history kept (:meth:`keep_history`), every event from the first."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        history = next((q for q in self._subscribers if isinstance(q, History)), None)
        if history is not None:  # on the loop's thread: nothing comes in between
            for ev in history:
                queue.put_nowait(ev)
        if self.state.status.terminal:
            if history is None:
                queue.put_nowait(None)  # already over: nothing more will come
        else:
            self._subscribers = (*self._subscribers, queue)
        return queue

    def keep_history(self) -> None:
        """Keep every event of the run from now on (before its first, for a run started
        with a handle), so that a subscriber that comes late still gets them all."""
        if not any(isinstance(q, History) for q in self._subscribers):
            self._subscribers = (*self._subscribers, History())

    def history(self) -> list[Event]:
        """The events kept by :meth:`keep_history` so far, in order (``[]`` if none are)."""
        kept = next((q for q in self._subscribers if isinstance(q, History)), None)
        return [] if kept is None else [ev for ev in kept if ev is not None]

    def kick(self) -> None:
        """Dispatch again because capacity was freed by another run sharing it."""
        if self._emitting or self.state.status.terminal:
            return
        self._emitting = True  # (it tells no other member: that could ping-pong forever)
        try:
            self._dispatch()
            self._log_and_send()
        except StoreError as exc:
            self._abort(exc)
        finally:
            self._emitting = False

    def _run_node(self, spec: NodeSpec, attempt: int) -> Coroutine[Any, Any, None]:
        """One attempt of ``spec`` as a coroutine (:class:`~.attempts.Attempts`)."""
        raise NotImplementedError


class History(list[Event | None]):
    """The events of a run so far, kept as a subscriber would receive them (ending with
    ``None`` once the run finished): see :meth:`Pipeline.keep_history`."""

    __slots__ = ()
    put_nowait = list.append


class _Sends:
    """The executions whose outboxes go to their stores at the end of one event loop's
    current pass (see :meth:`Pipeline._send_later`)."""

    __slots__ = ("__weakref__", "waiting")

    def __init__(self) -> None:
        self.waiting: list[Pipeline] | None = None

    def add(self, execution: Pipeline, loop: asyncio.AbstractEventLoop) -> None:
        if self.waiting is None:  # the first this pass: one callback serves them all
            self.waiting = [execution]
            loop.call_soon(self.send_all)
        else:
            self.waiting.append(execution)

    def send_all(self) -> None:
        waiting, self.waiting = self.waiting, None
        for execution in waiting or ():
            execution._sending = False
            if execution._outbox:
                try:
                    execution._send()
                except StoreError as exc:
                    execution._abort(exc)


_SENDS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Sends] = \
    weakref.WeakKeyDictionary()
"""Each event loop's :class:`_Sends` (it holds no reference to its loop)."""


