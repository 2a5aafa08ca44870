"""A node's attempts: arguments in, the step called, its outcome out.

One attempt runs in a task of the run's task group. Its outcome becomes an event:
``node_succeeded``, ``node_failed`` (retried after a backoff, handed to the fallback, or
final) or ``node_cancelled``. A graph node runs its sub-graph as a sub-run that shares the
run's store, backend and capacity.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from .. import codec
from ..budget import use_ledger
from ..context import _CURRENT, NodeContext
from ..errors import (
    FallbackFailed,
    NodeFailed,
    NodeTimeout,
    OutputNotSerializable,
    Retry,
    RunNotFound,
)
from ..events import NODE_CANCELLED, NODE_FAILED, NODE_READY, NODE_STARTED, NODE_SUCCEEDED, Event
from ..failures import exception_text
from ..graph import Choose, Graph, InputRef, NodeRef, NodeSpec
from ..ids import NodeId, RunId
from ..isolation import call_in_process
from ..state import BLOCKED, FAILED, RETRYING, RUNNING, SUCCEEDED
from .control import Control
from .core import ADOPT_LIMIT, GRAPH, JOIN, TASK

if TYPE_CHECKING:
    from .handle import RunHandle


class Attempts(Control):
    """Runs nodes' attempts (see the module docstring)."""

    __slots__ = ()

    def _spawn(self, node_id: NodeId, coro: Coroutine[Any, Any, None]) -> None:
        assert self._group is not None
        self._tasks[node_id] = self._group.create_task(coro)

    def _forget_task(self, node_id: NodeId, attempt: int) -> None:
        """Drop the task of ``attempt``, but not a successor it spawned (its fallback,
        which started the next attempt before this one's task ended)."""
        if self.state.nodes[node_id].attempt == attempt:
            self._tasks.pop(node_id, None)

    async def _run_node(self, spec: NodeSpec, attempt: int) -> None:
        """Run one attempt of ``spec``, then, while nodes its success lets start are handed
        to it, run those too in this task.

        A node that finishes offers its task to the first node its success starts (the
        one on the longest path): that node runs on at once, with no new task and no
        trip through the event loop, which is most of what a node costs beyond its own
        work. Its ``node_started`` is recorded and it is registered under this task as if
        it had been spawned, so cancelling it cancels this task while it runs that
        node. A task that is being cancelled takes over nothing, and after
        ``ADOPT_LIMIT`` nodes in a row a task ends and the next node gets a task of its
        own, so a long chain of steps that never wait still lets other tasks run.
        """
        if self._gate is not None:  # the run is not in the store yet: see hold_steps
            held = time.time()
            await self._gate.wait()
            self.waited(spec.id, attempt, "log", time.time() - held)
        ledger = None
        run_ledger = self.ledgers.run
        for _ in range(ADOPT_LIMIT):
            node_id = spec.id
            _CURRENT.set((self, node_id, attempt))  # this task's own context: no reset needed
            if spec.policy.budget is not None or ledger is not run_ledger:  # else set already
                ledger = self.ledgers.for_node(spec)
                use_ledger(ledger)
            heir: NodeId | tuple[NodeSpec, int] | None = None
            if self._fallen is not None and node_id in self._fallen:
                await self._run_fallback(spec, attempt)  # (see Execution.resume_fallbacks)
                return
            try:
                if spec.kind is JOIN:
                    self._join(spec)
                    return
                kwargs = self._arguments(spec)
                stop = None
                if spec.context_param:  # a sync step checks ``stop`` to end when cancelled
                    stop = None if spec.is_async else threading.Event()
                    kwargs[spec.context_param] = NodeContext(self, node_id, attempt, stop)
                if spec.policy.timeout is None or spec.kind is GRAPH:  # a sub-run times itself
                    if spec.is_async and self._inline_async and spec.kind is TASK \
                            and spec.policy.isolation == "thread":
                        output = await spec.fn(**kwargs)  # type: ignore[operator]
                    else:
                        output = await self._call(spec, kwargs, attempt, stop)
                else:
                    scope = asyncio.timeout(spec.policy.timeout)
                    try:
                        async with scope:
                            output = await self._call(spec, kwargs, attempt, stop)
                    except TimeoutError as exc:
                        if not scope.expired():
                            raise
                        raise NodeTimeout(f"run {self.run_id}, node {node_id!r}: attempt "
                                          f"{attempt} exceeded its timeout of "
                                          f"{spec.policy.timeout:g}s") from exc
                if isinstance(output, Choose):
                    self._succeed(spec, output)
                else:  # the common case, inline: this attempt is the node's current one
                    value = str(output) if type(output) is int else codec.encode(output)
                    self._heir = node_id
                    try:
                        if self._waits:
                            self.emit(Event(NODE_SUCCEEDED, time.time(), node_id, attempt,
                                            self._outcome_data(node_id, None), value, output))
                        else:
                            self.succeeded(self.state.nodes[node_id], attempt, value, output)
                    finally:
                        heir, self._heir = self._heir, None
            except asyncio.CancelledError:
                if self._waits:
                    self._waits.pop(node_id, None)
                reason = self._cancelling.pop(node_id, None) or self.state.stop_reason
                if reason is None:
                    raise  # the whole run is being torn down: leave it resumable
                self.emit(Event(NODE_CANCELLED, time.time(), node_id, attempt,
                                data={"reason": reason}))
            except Exception as exc:
                self._failed(spec, attempt, exc)
            except (SystemExit, GeneratorExit) as exc:  # a step (or a library) ending itself
                self._failed(spec, attempt, _step_exited(self.run_id, node_id, exc))
            finally:
                self._forget_task(node_id, attempt)
            if type(heir) is not tuple:
                return
            spec, attempt = heir
        ns = self.state.nodes[spec.id]  # the limit: hand the node over to a task of its own
        if ns.status is RUNNING and ns.attempt == attempt:
            self._spawn(spec.id, self._run_node(spec, attempt))

    async def _call(self, spec: NodeSpec, kwargs: dict[str, Any], attempt: int,
                    stop: threading.Event | None = None) -> Any:
        if isinstance(spec.fn, Graph):
            return await self._run_subgraph(spec.fn, spec.id, kwargs, attempt,
                                            spec.policy.timeout)
        if spec.policy.isolation == "process":
            where = f"run {self.run_id}, node {spec.id!r}"
            if spec.context_param:
                raise NodeFailed(f"{where}: a step isolated in a process cannot take a "
                                 "NodeContext (the run lives in this process); drop the "
                                 "parameter or use isolation='thread'", retryable=False)
            return await call_in_process(spec.fn, kwargs, where=where)
        try:
            return await self.backend.call(spec.fn, kwargs, is_async=spec.is_async)
        except BaseException:  # cancelled or timed out: the step's thread sees it at its check
            if stop is not None:
                stop.set()
            raise

    def _arguments(self, spec: NodeSpec) -> dict[str, Any]:
        wires = spec.wires  # the stored inputs: a plain reference is its source's id
        kwargs = dict(wires)  # the literals as they are; references replaced in place
        nodes = self.state.nodes
        for name in spec.refs:
            value = wires[name]
            if type(value) is not str:
                if isinstance(value, InputRef):
                    kwargs[name] = self.inputs[value.name]
                    continue
                if isinstance(value, NodeRef):  # with an index path, or optional
                    source = nodes[value.node]
                    kwargs[name] = None if source.status is not SUCCEEDED \
                        else value.resolve(source.output)  # None: the source was skipped
                    continue
            source = nodes[value]  # a plain reference: the source's whole output
            kwargs[name] = source.output if source.status is SUCCEEDED else None
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
                        self._outcome_data(spec.id, data), codec.encode(output), output))

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
                            data=self._outcome_data(node_id, codec.error_info(
                                exc, final=False, retryable=True, retry_in=delay))))
            loop = asyncio.get_running_loop()
            self._timers[node_id] = loop.call_later(delay, self._retry, node_id)
            return
        if policy.fallback is not None and not (isinstance(exc, FallbackFailed)):
            self.emit(Event(NODE_FAILED, time.time(), node_id, attempt,
                            data=self._outcome_data(node_id, {
                                **codec.error_info(exc, final=False, retryable=retryable),
                                "fallback": True})))
            self.emit(Event(NODE_STARTED, time.time(), node_id, attempt + 1,
                            data={"fallback": True}))
            self._spawn(node_id, self._run_fallback(spec, attempt + 1))
            return
        self.emit(Event(NODE_FAILED, time.time(), node_id, attempt,
                        data=self._outcome_data(node_id, codec.error_info(
                            exc, final=True, retryable=retryable))))
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
            wrapped = FallbackFailed(f"run {self.run_id}, node {spec.id!r}: the fallback "
                                      f"{getattr(fallback, '__qualname__', fallback)} failed "
                                      f"too: {type(exc).__name__}: {exception_text(exc)}")
            wrapped.__cause__ = exc
            self._failed(spec, attempt, wrapped)
        finally:
            self._forget_task(spec.id, attempt)

    def resume_backoffs(self) -> None:
        """Re-arm the backoff of every node a resumed run found waiting to be retried: its
        next attempt starts when the delay its failure recorded ends (at once if that has
        passed), as it would have in the process that died."""
        loop = asyncio.get_running_loop()
        now = time.time()
        for node_id, ns in self.state.nodes.items():
            if ns.status is RETRYING and node_id not in self._timers:
                failed = ns.stopped_at if ns.stopped_at is not None else now
                delay = float((ns.error or {}).get("retry_in") or 0.0)
                self._timers[node_id] = loop.call_later(max(0.0, failed + delay - now),
                                                        self._retry, node_id)

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
        # registered before any await, so a cancel of this node always reaches the sub-run
        handle = self._start_child(sub, child, kwargs, resumed=record is not None)
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

    def _start_child(self, sub: Graph, child: RunId, kwargs: dict[str, Any], *,
                     resumed: bool) -> RunHandle:
        """Start (``resumed``: continue) the sub-run ``child`` of ``sub`` in this run's task
        group; :class:`~.execution.Execution` implements it."""
        raise NotImplementedError


def _step_exited(run_id: str, node_id: NodeId, exc: SystemExit | GeneratorExit) -> NodeFailed:
    """A step that raised ``SystemExit`` (``sys.exit()``, often a command-line library's
    way out) or ``GeneratorExit`` fails its node, not retried, instead of ending the run."""
    what = (f"SystemExit({exc.code!r}): sys.exit() was called" if isinstance(exc, SystemExit)
            else "GeneratorExit")
    failed = NodeFailed(f"run {run_id}, node {node_id!r}: the step raised {what}; a step "
                        "ends by returning a value or raising an Exception, so the node "
                        "failed and the rest of the run went on", retryable=False)
    failed.__cause__ = exc
    failed.__traceback__ = exc.__traceback__
    return failed
