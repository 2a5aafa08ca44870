"""The thin async loop around the pure core: launch, await, apply, persist.

Every state change goes through :meth:`Execution.emit`, which applies the event
to the state (:func:`~counterpoint.state.evolve`), queues it for the store (sent
at the end of the loop's pass, in the order of the events' numbers),
publishes it to subscribers and feeds the events it implies
(:func:`~counterpoint.state.react`) back in. After each burst of events the
loop starts whatever :func:`~counterpoint.state.pick` chooses. Nothing awaits
between an event and its consequences, so edits are applied atomically
between dispatches. Every node task belongs to its run's :meth:`Execution.execute`
call, which cancels and awaits any still going before it returns: no task
outlives its run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import socket
import threading
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Coroutine, Iterable, Mapping
from dataclasses import replace
from typing import Any

from . import codec
from .annotations import return_type
from .backend import DEFAULT_BACKEND, Backend, InProcessBackend
from .context import _CURRENT, NodeContext
from .errors import (
    NodeFailed,
    NodeTimeout,
    OutputNotSerializable,
    PatchError,
    Retry,
    RunNotFound,
    StoreError,
    UserError,
)
from .events import (
    INFORMATIONAL,
    JOURNALED,
    NODE_CANCELLED,
    NODE_FAILED,
    NODE_READY,
    NODE_STARTED,
    NODE_SUCCEEDED,
    PATCH_APPLIED,
    RUN_CREATED,
    RUN_FINISHED,
    RUN_RESUMED,
    RUN_STOPPING,
    Event,
)
from .garbage import tune_gc
from .graph import Choose, Graph, InputRef, NodeKind, NodeSpec
from .ids import NodeId, RunId, new_run_id
from .loader import load_recorded, make_resolver, source_record
from .loop import run as run_loop
from .options import RunOptions
from .patch import Edit, Patch, patch_from_data, patch_to_data
from .results import RunResult
from .state import (
    BLOCKED,
    FAILED,
    READY,
    RETRYING,
    RUNNING,
    SUCCEEDED,
    TERMINAL,
    RunState,
    RunStatus,
    check_patch,
    evolve,
    pick,
    react,
    start_node,
)
from .store import RunRecord, RunStore, open_store

_RUN_RUNNING = RunStatus.RUNNING
_DEFAULT_OPTIONS = RunOptions()
_TASK = NodeKind.TASK
_GRAPH = NodeKind.GRAPH
_JOIN = NodeKind.JOIN
_LOG_LATER = 16
"""A dispatch starting this many nodes or more logs their ``node_started`` events only
after the loop has run the nodes' first steps (:meth:`Execution._dispatch`)."""
_ADOPT_LIMIT = 64
"""Most nodes one task runs in a row, taking over from the node before (see _run_node)."""


class Execution:
    """One run being executed in this process."""

    __slots__ = ("__weakref__", "_cancelling", "_children", "_deadline", "_done", "_emitting",
                 "_heir", "_held", "_inline_async", "_loop", "_outbox", "_pending", "_rng",
                 "_sending", "_sends", "_seq", "_slots", "_subscribers", "_tasks", "_thread",
                 "_timers", "_unlogged", "backend", "graph", "inputs", "journal", "options",
                 "owns_store", "parent", "run_id", "state", "store")

    def __init__(self, graph: Graph, state: RunState, store: RunStore, options: RunOptions,
                 *, backend: Backend, inputs: Mapping[str, Any], seq: int = 0,
                 parent: RunId | None = None) -> None:
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
        self._cancelling: dict[NodeId, str] = {}
        self._timers: dict[NodeId, asyncio.TimerHandle] = {}
        self._subscribers: tuple[asyncio.Queue[Event | None], ...] = ()
        self._pending: deque[Event] = deque()
        self._outbox: list[Event] = []
        """Events numbered and applied, not yet handed to the store: they go together at
        the end of the loop's pass (:meth:`_send_later`), or at once when something needs
        them in the store (the flush barrier, the end of the run)."""
        self._sending = False
        """Whether the outbox is due to be sent at the end of this pass of the loop."""
        self._sends: _Sends | None = None
        self._thread: int | None = None
        """The thread running the run's event loop."""
        self._unlogged: list[tuple[float, int, list[NodeId]]] = []
        """Large dispatches whose ``node_started`` events are applied and numbered but not
        yet logged, as (time, first number, nodes): see :meth:`_dispatch`. The events are
        made when logged, so a fan-out keeps no event objects alive meanwhile."""
        self._held: dict[NodeId, Event] = {}
        """``node_ready`` events applied but not yet logged: see :meth:`_log_held`."""
        self._emitting = False
        self._heir: NodeId | tuple[NodeSpec, int] | None = None
        """While a node task emits its success: that node's id, offering its task to a node
        the success lets start (see :meth:`_run_node`); then what :meth:`_dispatch` gave it."""
        self._rng: random.Random | None = None
        self._slots = options.max_concurrency or 1 << 30
        self._done: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self.owns_store = False
        """Whether the run opened its store itself (and closes it at the end)."""
        # awaiting an async step directly is exactly what InProcessBackend.call does
        self._inline_async = type(backend) is InProcessBackend
        self.journal: dict[NodeId, list[Event]] = {}
        """Per node, what its interrupted attempt recorded before a crash (on resume)."""
        self._children: dict[NodeId, RunHandle] = {}
        """Sub-graph nodes running now -> the handle of their sub-run."""

    # ------------------------------------------------------------------ events
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
            if self._held:
                self._log_held()
            if self._outbox and not self._sending:
                self._send_later()
        except StoreError as exc:
            self._abort(exc)
        finally:
            self._emitting = False

    async def flush(self) -> None:
        """Wait until every event of this run so far is durable (the flush barrier)."""
        self._hand_over()
        await self.store.flush()

    def foreign_loop(self) -> asyncio.AbstractEventLoop | None:
        """The run's loop if the caller runs in another thread (a sync step), else ``None``:
        what changes the run must then be done on that loop."""
        if self._thread is None or self._thread == threading.get_ident():
            return None
        return self._loop

    def publish(self, event: Event) -> None:
        """Give ``event`` to subscribers only: not applied, not persisted (streamed text)."""
        for queue in self._subscribers:
            queue.put_nowait(event)

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
        for node_id, ev in held.items():  # nodes started in the burst are gone already
            if nodes[node_id].status is READY:
                self._persist(ev)
        held.clear()

    def _log_unlogged(self) -> None:
        """Log and publish the ``node_started`` events :meth:`_dispatch` left for later."""
        batches, self._unlogged = self._unlogged, []
        append = self._outbox.append
        nodes = self.state.nodes
        for at, first, ids in batches:
            for i, node_id in enumerate(ids):
                ev = Event(NODE_STARTED, at, node_id, nodes[node_id].attempt, seq=first + i)
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
        if not state.ready or state.status is not _RUN_RUNNING or state.stop_reason is not None:
            return
        free = self._slots - state.running
        if free <= 0:
            return
        chosen = pick(state, free)
        if not chosen:
            return
        now = time.time()
        nodes = state.nodes
        held = self._held
        # a large fan-out: the nodes start first, their node_started are logged after the
        # loop has run their first steps (numbered now, so the log keeps its order)
        defer = len(chosen) >= _LOG_LATER
        later = defer and not self._unlogged
        if defer:
            self._unlogged.append((now, self._seq + 1, chosen))
            self._seq += len(chosen)
        heir = self._heir
        tasks = self._tasks
        loop = self._loop
        assert loop is not None
        create_task = loop.create_task
        for node_id in chosen:  # applied here (nothing follows from a start), then launched
            ns = nodes[node_id]
            if defer:  # the event is made when it is logged (_log_unlogged)
                start_node(state, ns, now, ns.attempt + 1)
            else:
                ev = Event(NODE_STARTED, now, node_id, ns.attempt + 1)
                evolve(state, ev)
                self._persist(ev)
            if held:
                held.pop(node_id, None)  # started in its burst: its node_ready is implied
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
                if spec.kind is _TASK:
                    duration = stopped - ns.started_at  # type: ignore[operator]
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

    # ------------------------------------------------------------------ running
    def _spawn(self, node_id: NodeId, coro: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        self._tasks[node_id] = self._loop.create_task(coro)

    def _forget_task(self, node_id: NodeId, attempt: int) -> None:
        """Drop the task of ``attempt``, but not a successor it spawned (its fallback,
        which started the next attempt before this one's task ended)."""
        if self.state.nodes[node_id].attempt == attempt:
            self._tasks.pop(node_id, None)

    async def execute(self, first: Event | None) -> RunResult:
        """Run until the run finishes; returns its result (``first=None``: already over).

        Node tasks belong to this call: if it is cancelled (the process is
        shutting down), every node task is cancelled and awaited before it
        returns, and the run stays resumable in the log. A top-level run returns
        once its log is durable; a store the run opened itself is closed.
        """
        try:
            if first is not None:
                loop = self._loop = asyncio.get_running_loop()
                self._thread = threading.get_ident()
                sends = _SENDS.get(loop)
                if sends is None:
                    sends = _SENDS[loop] = _Sends()
                self._sends = sends
                self._done = loop.create_future()
                self.store.watch_cancel(self.run_id, loop, self._cancel_requested)
                try:
                    if self.options.deadline is not None:
                        self._deadline = loop.call_later(self.options.deadline, self.stop,
                                                         "deadline")
                    self.emit(first)
                    if self.state.stop_reason is not None and not self.state.status.terminal:
                        self._cancel_rest()  # resumed in the middle of a stop: finish it
                    if not self._done.done():
                        await self._done
                finally:
                    self.store.unwatch_cancel(self.run_id)
                    if self._tasks or self._timers or self._deadline is not None:
                        await self._end_tasks()
        finally:
            with contextlib.suppress(StoreError):  # a store failing here fails below too
                self._hand_over()
            if self.owns_store:
                self.store.close()
            elif self.parent is None:
                await self.store.flush()
        return self.result()

    async def _end_tasks(self) -> None:
        """Cancel timers and await every node task still going (none, normally)."""
        for timer in self._timers.values():
            timer.cancel()
        if self._deadline is not None:
            self._deadline.cancel()
        leftover = [t for t in self._tasks.values() if not t.done()]
        for task in leftover:
            task.cancel()
        if leftover:
            await asyncio.gather(*leftover, return_exceptions=True)

    def _cancel_requested(self) -> None:
        self.stop("cancelled")

    def result(self) -> RunResult:
        """The run's result as the state stands now."""
        return RunResult(run_id=self.run_id, graph=self.graph.name, status=self.state.status,
                         state=self.state, output_ref=self.graph.output_ref)

    async def _run_node(self, spec: NodeSpec, attempt: int) -> None:
        """Run one attempt of ``spec``, then, while nodes its success lets start are handed
        to it, run those too in this task.

        A node that finishes offers its task to the first node its success starts (the
        one on the longest path): that node runs on at once, with no new task and no
        trip through the event loop, which is most of what a node costs beyond its own
        work. Its ``node_started`` is recorded and it is registered under this task as if
        it had been spawned, so cancelling it cancels this task while it runs that
        node. A task that is being cancelled takes over nothing, and after
        ``_ADOPT_LIMIT`` nodes in a row a task ends and the next node gets a task of its
        own, so a long chain of steps that never wait still lets other tasks run.
        """
        for _ in range(_ADOPT_LIMIT):
            node_id = spec.id
            _CURRENT.set((self, node_id, attempt))  # this task's own context: no reset needed
            heir: NodeId | tuple[NodeSpec, int] | None = None
            try:
                if spec.kind is _JOIN:
                    self._join(spec)
                    return
                kwargs = self._arguments(spec)
                if spec.context_param:
                    kwargs[spec.context_param] = NodeContext(self, node_id, attempt)
                if spec.policy.timeout is None or spec.kind is _GRAPH:  # a sub-run times itself
                    if spec.is_async and self._inline_async and spec.kind is _TASK:
                        output = await spec.fn(**kwargs)  # type: ignore[operator]
                    else:
                        output = await self._call(spec, kwargs, attempt)
                else:
                    scope = asyncio.timeout(spec.policy.timeout)
                    try:
                        async with scope:
                            output = await self._call(spec, kwargs, attempt)
                    except TimeoutError as exc:
                        if not scope.expired():
                            raise
                        raise NodeTimeout(f"run {self.run_id}, node {node_id!r}: attempt "
                                          f"{attempt} exceeded its timeout of "
                                          f"{spec.policy.timeout:g}s") from exc
                if isinstance(output, Choose):
                    self._succeed(spec, output)
                else:  # the common case, inline: this attempt is the node's current one
                    self._heir = node_id
                    try:
                        self.emit(Event(NODE_SUCCEEDED, time.time(), node_id, attempt, None,
                                        str(output) if type(output) is int
                                        else codec.encode(output), output))
                    finally:
                        heir, self._heir = self._heir, None
            except asyncio.CancelledError:
                reason = self._cancelling.pop(node_id, None) or self.state.stop_reason
                if reason is None:
                    raise  # the whole run is being torn down: leave it resumable
                self.emit(Event(NODE_CANCELLED, time.time(), node_id, attempt,
                                data={"reason": reason}))
            except Exception as exc:
                self._failed(spec, attempt, exc)
            finally:
                self._forget_task(node_id, attempt)
            if type(heir) is not tuple:
                return
            spec, attempt = heir
        ns = self.state.nodes[spec.id]  # the limit: hand the node over to a task of its own
        if ns.status is RUNNING and ns.attempt == attempt:
            self._spawn(spec.id, self._run_node(spec, attempt))

    async def _call(self, spec: NodeSpec, kwargs: dict[str, Any], attempt: int) -> Any:
        if isinstance(spec.fn, Graph):
            return await self._run_subgraph(spec.fn, spec.id, kwargs, attempt,
                                            spec.policy.timeout)
        return await self.backend.call(spec.fn, kwargs, is_async=spec.is_async)

    def _arguments(self, spec: NodeSpec) -> dict[str, Any]:
        kwargs = dict(spec.inputs)  # the literals as they are; references replaced in place
        nodes = self.state.nodes
        for name, value in spec.refs:
            if isinstance(value, InputRef):
                kwargs[name] = self.inputs[value.name]
                continue
            source = nodes[value.node]
            if source.status is not SUCCEEDED:
                kwargs[name] = None  # an optional input whose source was skipped
            else:
                kwargs[name] = value.resolve(source.output) if value.path else source.output
        return kwargs

    def _succeed(self, spec: NodeSpec, output: Any, data: dict[str, Any] | None = None) -> None:
        if isinstance(output, Choose):
            unknown = [s for s in output.successors
                       if s not in self.state.nodes[spec.id].dependents]
            if unknown:
                raise NodeFailed(f"run {self.run_id}, node {spec.id!r} chose {unknown}, which "
                                 f"are not its successors "
                                 f"({list(self.state.nodes[spec.id].dependents)})",
                                 retryable=False)
            data = {**(data or {}), "chosen": list(output.successors)}
            output = output.value
        self.emit(Event(NODE_SUCCEEDED, time.time(), spec.id, self.state.nodes[spec.id].attempt,
                        data, codec.encode(output), output))

    def _join(self, spec: NodeSpec) -> None:
        nodes = self.state.nodes
        children = [nodes[c] for c in spec.after]
        output = [c.output for c in children]
        value = "[" + ",".join(c.value or "null" for c in children) + "]"
        self.emit(Event(NODE_SUCCEEDED, time.time(), spec.id,
                        nodes[spec.id].attempt, value=value, output=output))

    def _failed(self, spec: NodeSpec, attempt: int, exc: Exception) -> None:
        node_id = spec.id
        ns = self.state.nodes[node_id]
        if ns.status is not RUNNING:
            return
        policy = spec.policy
        if isinstance(exc, Retry):
            retryable = True
        elif isinstance(exc, OutputNotSerializable):
            retryable = False
        else:
            retryable = isinstance(exc, policy.retry_on) and getattr(exc, "retryable", True)
        failures = ns.failures + 1
        if retryable and failures < policy.attempts and self.state.stop_reason is None:
            if self._rng is None:
                self._rng = random.Random(self.options.seed)
            delay = policy.backoff.delay(failures, self._rng)
            hint = getattr(exc, "retry_after", None) or getattr(exc, "after", None)
            if isinstance(hint, int | float):
                delay = max(delay, float(hint))
            self.emit(Event(NODE_FAILED, time.time(), node_id, attempt,
                            data=codec.error_info(exc, final=False, retryable=True,
                                                  retry_in=delay)))
            loop = asyncio.get_running_loop()
            self._timers[node_id] = loop.call_later(delay, self._retry, node_id)
            return
        if policy.fallback is not None and not (isinstance(exc, _FallbackFailed)):
            self.emit(Event(NODE_FAILED, time.time(), node_id, attempt,
                            data={**codec.error_info(exc, final=False, retryable=retryable),
                                  "fallback": True}))
            self.emit(Event(NODE_STARTED, time.time(), node_id, attempt + 1,
                            data={"fallback": True}))
            self._spawn(node_id, self._run_fallback(spec, attempt + 1))
            return
        self.emit(Event(NODE_FAILED, time.time(), node_id, attempt,
                        data=codec.error_info(exc, final=True, retryable=retryable)))
        if self.options.fail_fast:
            self.stop("fail_fast")

    async def _run_fallback(self, spec: NodeSpec, attempt: int) -> None:
        fallback = spec.policy.fallback
        assert fallback is not None
        try:
            kwargs = self._arguments(spec)
            output = await self.backend.call(fallback, kwargs,
                                             is_async=asyncio.iscoroutinefunction(fallback))
            self._succeed(spec, output, data={"via": "fallback"})
        except asyncio.CancelledError:
            reason = self._cancelling.pop(spec.id, None) or self.state.stop_reason
            if reason is None:
                raise
            self.emit(Event(NODE_CANCELLED, time.time(), spec.id, attempt,
                            data={"reason": reason}))
        except Exception as exc:
            wrapped = _FallbackFailed(f"run {self.run_id}, node {spec.id!r}: the fallback "
                                      f"{getattr(fallback, '__qualname__', fallback)} failed "
                                      f"too: {type(exc).__name__}: {exc}")
            wrapped.__cause__ = exc
            self._failed(spec, attempt, wrapped)
        finally:
            self._forget_task(spec.id, attempt)

    def _retry(self, node_id: NodeId) -> None:
        self._timers.pop(node_id, None)
        ns = self.state.nodes[node_id]
        if ns.status is RETRYING and self.state.stop_reason is None:
            self.emit(Event(NODE_READY, time.time(), node_id, ns.attempt))

    async def _run_subgraph(self, sub: Graph, node: NodeId, kwargs: dict[str, Any],
                            attempt: int, limit: float | None) -> Any:
        # numbered by failed attempts: an attempt cut short by a crash resumes its sub-run
        tries = self.state.nodes[node].failures + 1
        child = RunId(f"{self.run_id}/{node}" + (f"~{tries}" if tries > 1 else ""))
        try:
            record = self.store.run(child)
        except RunNotFound:
            record = None
        if record is not None:  # this process crashed while the sub-run was going
            execution = _prepare_resume(child, self.store, sub, None, self.backend)
            first = _resumed(execution)
        else:
            execution, first = _prepare(sub, kwargs, RunOptions(
                limits=self.options.limits, fail_fast=self.options.fail_fast), self.store,
                child, self.backend, None, self.run_id)
        # registered before any await, so a cancel of this node always reaches the sub-run
        handle = _launch(execution, first)
        self._children[node] = handle
        task = handle._task
        try:
            # the node's timeout, applied here so that expiry can end the sub-run cleanly
            result = await asyncio.wait_for(asyncio.shield(task), limit)
        except TimeoutError:
            handle.cancel()  # the sub-run's log ends cancelled
            await asyncio.wait([task])
            raise NodeTimeout(f"run {self.run_id}, node {node!r}: attempt {attempt} exceeded "
                              f"its timeout of {limit:g}s; sub-run {child} was cancelled") \
                from None
        except asyncio.CancelledError:
            task.cancel()  # torn down with this run: the sub-run stays resumable too
            await asyncio.wait([task])
            raise
        finally:
            self._children.pop(node, None)
        if node in self._cancelling:  # the sub-run was stopped because this node was cancelled
            raise asyncio.CancelledError
        if not result.ok:
            failed = [k for k, n in result.nodes.items()
                      if n.status in (FAILED, BLOCKED)]
            raise NodeFailed(f"sub-graph run {child} {result.status} (nodes {failed}); see "
                             f"`counterpoint show {child}`", retryable=False)
        return result.output

    # ------------------------------------------------------------------ control
    def apply(self, edit: Edit) -> int:
        """Validate ``edit`` against the current state and apply it as one event."""
        patch = edit.build(self.state.graph, self.state.specs())
        return self.apply_patch(patch)

    def apply_patch(self, patch: Patch) -> int:
        nodes = self.state.nodes
        spawned = [c for n in patch.cancel if n in nodes and nodes[n].spec.kind is _JOIN
                   for c in nodes[n].spec.after
                   if c not in patch.cancel and nodes[c].status not in TERMINAL]
        if spawned:  # a map's items go with it
            patch = replace(patch, cancel=(*patch.cancel, *spawned))
        check_patch(self.state, patch)
        excess = _over_limit((*patch.add, *patch.replace), self.state.limits)
        if excess:
            raise PatchError(f"run {self.run_id}: {excess[1]}")
        data = {**patch_to_data(patch), "version": self.state.version + 1}
        running = [n for n in patch.cancel if n in self._tasks]
        self.emit(Event(PATCH_APPLIED, time.time(), data=data, output=patch))
        for node in running:
            self._cancel_task(node, patch.reason or "cancelled by an edit")
        return self.state.version

    def _cancel_task(self, node: NodeId, reason: str) -> None:
        child = self._children.get(node)
        if child is not None:  # stop the sub-run itself, so its log ends cancelled too
            self._cancelling[node] = reason
            child.cancel()
            return
        task = self._tasks.get(node)
        if task is not None and not task.done():
            self._cancelling[node] = reason
            task.cancel()
            task.add_done_callback(lambda _: self._cancelled_before_start(node, reason))

    def _cancelled_before_start(self, node: NodeId, reason: str) -> None:
        """A task cancelled before its first step never runs its handler: record it here."""
        ns = self.state.nodes[node]
        if node in self._cancelling and ns.status is RUNNING:
            self._cancelling.pop(node)
            self._tasks.pop(node, None)
            self.emit(Event(NODE_CANCELLED, time.time(), node, ns.attempt,
                            data={"reason": reason}))

    def stop(self, reason: str) -> None:
        """Stop the run early: ``cancelled``, ``deadline`` or ``fail_fast``.

        The decision is logged first (``run_stopping``), so a resume after a crash
        in the middle of stopping finishes the stop instead of running on.
        """
        state = self.state
        if state.status.terminal or state.stop_reason is not None:
            return
        self.emit(Event(RUN_STOPPING, time.time(), data={"reason": reason}))
        self._cancel_rest()

    def _cancel_rest(self) -> None:
        """Cancel every node that has not ended, for the run's ``stop_reason``."""
        state = self.state
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        now = time.time()
        reason = state.stop_reason or "cancelled"
        message = {"deadline": f"the run's deadline of {self.options.deadline}s passed",
                   "fail_fast": "another node failed and fail_fast is on",
                   "cancelled": "the run was cancelled"}.get(reason, reason)
        for node_id, ns in list(state.nodes.items()):
            if ns.status in TERMINAL:
                continue
            if node_id in self._tasks:
                self._cancel_task(node_id, message)
            elif ns.status is not RUNNING:
                self.emit(Event(NODE_CANCELLED, now, node_id, ns.attempt,
                                data={"reason": message}))

    def subscribe(self) -> asyncio.Queue[Event | None]:
        """A queue receiving every event from now on, then ``None`` when the run ends."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        if self.state.status.terminal:
            queue.put_nowait(None)  # already over: nothing more will come
        else:
            self._subscribers = (*self._subscribers, queue)
        return queue


class _FallbackFailed(NodeFailed):
    retryable = False


class _Sends:
    """The executions whose outboxes go to their stores at the end of one event loop's
    current pass (see :meth:`Execution._send_later`)."""

    __slots__ = ("__weakref__", "waiting")

    def __init__(self) -> None:
        self.waiting: list[Execution] | None = None

    def add(self, execution: Execution, loop: asyncio.AbstractEventLoop) -> None:
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

    async def events(self) -> AsyncIterator[Event]:
        """Events from now until the run finishes."""
        queue = self._execution.subscribe()
        while True:
            event = await queue.get()
            if event is None:
                return
            yield event

    async def result(self) -> RunResult:
        return await self._task


# ---------------------------------------------------------------------- entry points
async def start(graph: Graph, *, inputs: Mapping[str, Any] | None = None,
                options: RunOptions | None = None, store: RunStore | str | None = None,
                run_id: str | None = None, backend: Backend | None = None,
                source_attr: str | None = None, _parent: RunId | None = None) -> RunHandle:
    """Start running ``graph`` in the background of the current event loop."""
    execution, first = _prepare(graph, inputs or {}, options or _DEFAULT_OPTIONS, store,
                                run_id, backend, source_attr, _parent)
    handle = _launch(execution, first)
    await asyncio.sleep(0)
    return handle


async def run(graph: Graph, *, inputs: Mapping[str, Any] | None = None,
              options: RunOptions | None = None, store: RunStore | str | None = None,
              run_id: str | None = None, backend: Backend | None = None,
              source_attr: str | None = None, _parent: RunId | None = None) -> RunResult:
    """Run ``graph`` to the end and return its :class:`RunResult`.

    ``store`` is a :class:`RunStore`, a path, ``"memory"``, or ``None`` for the
    default SQLite file (``$COUNTERPOINT_DB`` or ``.counterpoint/runs.db``).
    """
    execution, first = _prepare(graph, inputs or {}, options or _DEFAULT_OPTIONS, store,
                                run_id, backend, source_attr, _parent)
    return await execution.execute(first)


def run_sync(graph: Graph, **kwargs: Any) -> RunResult:
    """:func:`run` for code that has no event loop. The process is counterpoint's for the
    call: it runs on a loop with precise timers (:mod:`counterpoint.loop`) and tunes the
    collector (:mod:`counterpoint.garbage`)."""
    tune_gc()
    return run_loop(run(graph, **kwargs))


def _over_limit(specs: Iterable[NodeSpec],
                limits: Mapping[str, int]) -> tuple[NodeSpec, str] | None:
    """The first node that needs more of a resource than the run may ever grant, and why."""
    for spec in specs:
        for name, units in spec.policy.resources.items():
            limit = limits.get(name)
            if limit is not None and units > limit:
                return spec, (f"node {spec.id!r} needs {units} of {name!r} but the run's "
                              f"limit is {limit}")
    return None


def _launch(execution: Execution, first: Event | None) -> RunHandle:
    """Start ``execution`` as a task of the running loop (``first=None``: already over)."""
    return RunHandle(execution, asyncio.get_running_loop().create_task(
        execution.execute(first)))


def _resumed(execution: Execution) -> Event | None:
    """The event that resumes a replayed run, or ``None`` if it had already finished."""
    if execution.state.status.terminal:
        return None
    return Event(RUN_RESUMED, time.time(), data={"pid": os.getpid()})


def _prepare(graph: Graph, inputs: Mapping[str, Any], options: RunOptions,
             store: RunStore | str | None, run_id: str | None, backend: Backend | None,
             source_attr: str | None, parent: RunId | None) -> tuple[Execution, Event]:
    topology = graph.validate()
    if inputs or graph.inputs:
        missing = sorted(set(graph.inputs) - set(inputs))
        if missing:
            raise UserError(f"graph {graph.name!r} needs input(s) {missing}; pass "
                            "inputs={...}")
        unknown = sorted(set(inputs) - set(graph.inputs))
        if unknown:
            raise UserError(f"graph {graph.name!r} has no input(s) {unknown}; declared: "
                            f"{sorted(graph.inputs) or 'none'}")
    if options.limits:
        excess = _over_limit(graph.nodes.values(), options.limits)
        if excess:
            raise UserError(f"{excess[0].where}: {excess[1]}; raise the limit")
    owns = not isinstance(store, RunStore)
    the_store = store if isinstance(store, RunStore) else open_store(store)
    rid = RunId(run_id) if run_id else new_run_id()
    state = RunState.fresh(rid, graph.name, topology, graph.nodes,
                           estimates=the_store.estimates(), limits=options.limits)
    execution = Execution(graph, state, the_store, options,
                          backend=backend or DEFAULT_BACKEND, inputs=inputs, parent=parent)
    execution.owns_store = owns
    cache = topology.cache
    deps = cache.get("deps")
    if deps is None:  # recorded so the log alone shows the graph's shape (counterpoint show)
        deps = cache["deps"] = {n: list(graph.nodes[n].deps) for n in topology.order}
    cached = cache.get(("source", source_attr))
    if cached is None or cached[0] is not graph.source:  # the same for every run of it
        cached = cache["source", source_attr] = (graph.source,
                                                 source_record(graph, source_attr))
    source = cached[1]
    data: dict[str, Any] = {"graph": graph.name, "source": source,
                            "options": options.as_data(), "nodes": len(state.nodes),
                            "deps": deps}
    if inputs:
        data["inputs"] = {k: codec.encode(v) for k, v in inputs.items()}
    if parent is not None:
        data["parent"] = parent
    return execution, Event(RUN_CREATED, time.time(), data=data)


async def resume(run_id: str, *, store: RunStore | str | None = None,
                 graph: Graph | None = None, options: RunOptions | None = None,
                 backend: Backend | None = None) -> RunResult:
    """Continue a run that was interrupted (the process died or was killed).

    Nodes whose success reached the log are not run again; nodes that were in
    flight run again. The graph is rebuilt from where the log says it was
    defined, unless ``graph`` is given. A finished run is returned as it is.
    """
    handle = await start_resume(run_id, store=store, graph=graph, options=options,
                                backend=backend)
    return await handle.result()


async def start_resume(run_id: str, *, store: RunStore | str | None = None,
                       graph: Graph | None = None, options: RunOptions | None = None,
                       backend: Backend | None = None) -> RunHandle:
    """:func:`resume` in the background: returns a handle to follow the resumed run."""
    owns = not isinstance(store, RunStore)
    the_store = store if isinstance(store, RunStore) else open_store(store)
    try:
        execution = _prepare_resume(RunId(run_id), the_store, graph, options, backend)
    except BaseException:
        if owns:
            the_store.close()
        raise
    execution.owns_store = owns
    handle = _launch(execution, _resumed(execution))
    await asyncio.sleep(0)
    return handle


def _prepare_resume(rid: RunId, store: RunStore, graph: Graph | None,
                    options: RunOptions | None, backend: Backend | None) -> Execution:
    record = store.run(rid)
    if record.status == RunStatus.RUNNING and record.owner_pid != os.getpid() \
            and owner_alive(record):
        raise UserError(f"run {rid} is still running in process {record.owner_pid} on "
                        f"{record.owner_host}; cancel it first or wait for it")
    the_graph = graph or load_recorded(record.source, rid)
    events = store.events(rid)
    opts = options or RunOptions.from_data(record.options)
    created = events[0].data or {}
    inputs = {k: codec.decode(v) for k, v in (created.get("inputs") or {}).items()}
    topology = the_graph.validate()
    state = RunState.new(rid, the_graph.name, [the_graph.nodes[n] for n in topology.order],
                         estimates=store.estimates(), limits=opts.limits)
    replay(state, events, the_graph)
    execution = Execution(the_graph, state, store, opts, backend=backend or DEFAULT_BACKEND,
                          inputs=inputs, seq=events[-1].seq, parent=record.parent)
    execution.journal = _journal(state, events)
    return execution


def _journal(state: RunState, events: list[Event]) -> dict[NodeId, list[Event]]:
    """What each interrupted node's last attempt recorded (agent turns, tool results)."""
    journal: dict[NodeId, list[Event]] = {}
    for ev in events:
        if ev.kind in JOURNALED and ev.node is not None:
            ns = state.nodes.get(ev.node)
            if ns is not None and ev.attempt == ns.attempt and not ns.status.terminal:
                journal.setdefault(ev.node, []).append(ev)
    return journal


def replay(state: RunState, events: list[Event], graph: Graph) -> None:
    """Rebuild ``state`` from recorded events (outputs and patches decoded)."""
    resolver = make_resolver(graph, state.run_id)
    for ev in events:
        kind = ev.kind
        if kind is NODE_SUCCEEDED and ev.value is not None:
            ns = state.nodes[ev.node]  # type: ignore[index]
            if ns.spec.kind is NodeKind.JOIN:
                ev.output = [state.nodes[c].output for c in ns.spec.after]
            elif isinstance(ns.spec.fn, Graph) or (ev.data or {}).get("via") == "fallback":
                ev.output = codec.decode(ev.value)
            else:
                declared = return_type(ns.spec.fn)
                ev.output = codec.decode(ev.value, Any if declared is Choose else declared)
        elif kind is PATCH_APPLIED:
            ev.output = patch_from_data(ev.data or {}, resolver)
        evolve(state, ev)


def owner_alive(record: RunRecord) -> bool:
    """Whether the process that last ran ``record`` still runs.

    A run owned by another host is assumed alive: its process cannot be checked from here.
    """
    if record.owner_host and record.owner_host != socket.gethostname():
        return True
    return process_alive(record.owner_pid)


def process_alive(pid: int | None) -> bool:
    """Whether a process with this id exists on this host."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
