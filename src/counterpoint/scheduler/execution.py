"""A run from start to end: its task group, and how a run is prepared or resumed.

:meth:`Execution.execute` owns the run's :class:`asyncio.TaskGroup`: every node task and
every sub-run belongs to it, so none outlives the run. If ``execute`` is cancelled (the
process is shutting down), the group cancels and awaits every task before it returns,
and the run stays resumable in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import socket
import threading
import time
import warnings
from collections.abc import Mapping
from typing import Any

from .. import codec
from ..approval import clock
from ..backend import DEFAULT_BACKEND, Backend
from ..errors import StoreError, UserError
from ..events import RUN_CREATED, RUN_RESUMED, Event
from ..graph import Graph
from ..ids import RunId, new_run_id
from ..loader import check_given, load_recorded, source_record
from ..observers import observers_for
from ..options import RunOptions, first_warning, unheld_limits
from ..results import RunResult
from ..state import RunState
from ..store import RunRecord, RunStore, open_store
from ..store.owners import tree_root
from .attempts import Attempts
from .capacity import Capacity
from .handle import RunHandle
from .ledgers import resumed_ledgers
from .limits import over_limit
from .pipeline import _SENDS, _Sends
from .replay import journal_of, replay


class Execution(Attempts):
    """One run being executed in this process."""

    __slots__ = ()

    async def execute(self, first: Event | None) -> RunResult:
        """Run until the run finishes; returns its result (``first=None``: already over).

        A top-level run returns once its log is durable; a store the run opened itself
        is closed.
        """
        try:
            if first is not None:
                try:
                    async with asyncio.TaskGroup() as group:
                        self._group = group
                        await self._run(first)
                except BaseExceptionGroup as grouped:  # the group wraps what the run raised
                    raise _sole(grouped) from None
        finally:
            await self.resources.close()  # nothing the run opened outlives it
            with contextlib.suppress(StoreError):  # a store failing here fails below too
                self._hand_over()
            if self.owns_store:
                self.store.close()
            elif self.parent is None:
                await self.store.flush()
        return self.result()

    async def _run(self, first: Event) -> None:
        observers = observers_for(self)  # tracing and log records (counterpoint.observers)
        if observers:
            self._subscribers = (*self._subscribers, *observers)
        loop = self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        sends = _SENDS.get(loop)
        if sends is None:
            sends = _SENDS[loop] = _Sends()
        self._sends = sends
        self._done = loop.create_future()
        self._capacity.join(self)
        self.store.watch_cancel(self.run_id, loop, self._cancel_requested)
        try:
            late = False
            if self.deadline_at is not None:  # absolute, from the log: a resume keeps it
                the_clock = clock()
                left = self.deadline_at - the_clock.now()
                late = left <= 0
                self._deadline = the_clock.call_later(left, self._deadline_passed)
            self.emit(first)
            if first.kind is RUN_RESUMED:  # (a fork too: it starts from a prefix of a log)
                self.resume_backoffs()
            if late:  # passed while no process ran it: stopped before the steps the resume
                self._deadline_passed()  # started begin (their tasks have not run yet)
            self.approvals.start()
            if self.state.stop_reason is not None and not self.state.status.terminal:
                self._cancel_rest()  # resumed in the middle of a stop: finish it
            if not self._done.done():
                await self._done
        finally:
            self.store.unwatch_cancel(self.run_id)
            self.approvals.stop()
            self._capacity.leave(self)
            self._end_tasks()
            if observers and not self.state.status.terminal:  # torn down: no more events
                for observer in observers:
                    observer.put_nowait(None)

    def _end_tasks(self) -> None:
        """Cancel timers and every node task still going (none, normally): the task group
        awaits them."""
        for timer in self._timers.values():
            timer.cancel()
        if self._deadline is not None:
            self._deadline.cancel()
        for task in self._tasks.values():
            if not task.done():
                task.cancel()

    def _deadline_passed(self) -> None:
        self.stop("deadline")

    def _cancel_requested(self) -> None:
        self.stop("cancelled")

    def result(self) -> RunResult:
        """The run's result as the state stands now."""
        return RunResult(run_id=self.run_id, graph=self.graph.name, status=self.state.status,
                         state=self.state, output_ref=self.graph.output_ref)

    def _start_child(self, sub: Graph, child: RunId, kwargs: dict[str, Any], *,
                     resumed: bool) -> RunHandle:
        if resumed:  # this process crashed while the sub-run was going
            execution = prepare_resume(child, self.store, sub, None, self.backend,
                                       capacity=self._capacity, claim=False)
            first = resumed_event(execution)
        else:
            execution, first = prepare_run(
                sub, kwargs, RunOptions(max_concurrency=self.options.max_concurrency,
                                        limits=self.options.limits,
                                        fail_fast=self.options.fail_fast,
                                        budget=sub.budget, deadline=sub.deadline),
                self.store, child, self.backend, None, self.run_id, capacity=self._capacity)
        assert self._group is not None
        return RunHandle(execution, self._group.create_task(execution.execute(first)))


def _sole(grouped: BaseExceptionGroup[BaseException]) -> BaseException:
    """The exception a task group wrapped: the first that is not a cancellation."""
    for exc in grouped.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _sole(exc)
        if not isinstance(exc, asyncio.CancelledError):
            return exc
    return grouped.exceptions[0]


def launch(execution: Execution, first: Event | None) -> RunHandle:
    """Start ``execution`` as a task of the running loop (``first=None``: already over)."""
    return RunHandle(execution, asyncio.get_running_loop().create_task(
        execution.execute(first)))


def resumed_event(execution: Execution) -> Event | None:
    """The event that resumes a replayed run, or ``None`` if it had already finished."""
    if execution.state.status.terminal:
        return None
    return Event(RUN_RESUMED, time.time(), data={"pid": os.getpid()})


def check_call(graph: object, options: object, store: object, run_id: object = None,
               backend: object = None, *, inputs: object = None,
               graph_needed: bool = True) -> None:
    """Raise :class:`UserError` for an argument of the wrong kind to ``cp.run``,
    ``cp.start``, ``cp.resume`` or a fork (``options={...}``, a function for a graph,
    ``store=123``), saying what to pass, rather than an ``AttributeError`` from inside,
    or a SQLite file named ``123``."""
    if (graph_needed or graph is not None) and not isinstance(graph, Graph):
        inner = getattr(graph, "graph", None)
        hint = "pass its .graph (e.g. cp.run(wf.graph, ...))" if isinstance(inner, Graph) \
            else "build one with g = cp.Graph('name') and g.add('id', step, ...)"
        raise UserError(f"graph must be a cp.Graph, got {_kind(graph)}; {hint}")
    if inputs is not None and not isinstance(inputs, Mapping):
        raise UserError(f"inputs must be a mapping of the graph's input names to values, "
                        f"e.g. inputs={{'city': 'Paris'}}, got {_kind(inputs)}")
    if options is not None and not isinstance(options, RunOptions):
        example = ", ".join(f"{k}=..." for k in options) if isinstance(options, Mapping) \
            else "max_concurrency=4"
        raise UserError(f"options must be a cp.RunOptions, got {_kind(options)}; write "
                        f"options=cp.RunOptions({example or 'max_concurrency=4'})")
    if store is not None and not isinstance(store, RunStore | str | os.PathLike):
        raise UserError(f"store must be a RunStore, a file path, a postgresql:// URL or "
                        f"'memory', got {_kind(store)}; e.g. store='runs.db'")
    if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()
                               or "/" in run_id):
        raise UserError(f"run_id must be a non-empty string without '/' (it separates a "
                        f"sub-run's id from its parent's), got {run_id!r}; or leave it out "
                        "for a fresh id")
    if backend is not None and not callable(getattr(backend, "call", None)):
        raise UserError(f"backend must be a counterpoint Backend (an object with an async "
                        f"call method, e.g. counterpoint.ray.RayBackend()), got "
                        f"{_kind(backend)}; leave it out to run steps in this process")


def _kind(value: object) -> str:
    name = getattr(value, "__qualname__", None)
    if callable(value) and isinstance(name, str):
        return f"{type(value).__name__} {name}"
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"{type(value).__name__} {shown}"


def check_inputs(graph: Graph, inputs: Mapping[str, Any],
                 options: RunOptions) -> Mapping[str, Any]:
    """Raise :class:`UserError` if ``graph`` cannot run with ``inputs`` under ``options``;
    else ``inputs``, each validated as the type the graph declared it with
    (:func:`counterpoint.codec.conform`: ``"3"`` for an ``int`` input is ``3``)."""
    if inputs or graph.inputs:
        missing = sorted(set(graph.inputs) - set(inputs))
        if missing:
            raise UserError(f"{graph.source.origin}: graph {graph.name!r} needs input(s) "
                            f"{missing}; pass inputs={{...}} (on the command line: --input "
                            "NAME=VALUE)")
        unknown = sorted(set(inputs) - set(graph.inputs))
        if unknown:
            raise UserError(f"{graph.source.origin}: graph {graph.name!r} has no input(s) "
                            f"{unknown}; declared: {sorted(graph.inputs) or 'none'}")
        inputs = _conformed(graph, inputs)
    if options.limits:
        excess = over_limit(graph.nodes.values(), options.limits)
        if excess:
            raise UserError(f"{excess[0].where}: {excess[1]}; raise the limit")
    return inputs


def check_limits(graph: Graph, limits: Mapping[str, int]) -> None:
    """Raise :class:`UserError` for a limit on a resource that no node of ``graph`` (nor
    of its sub-graphs) holds: a misspelling, or a limit that would limit nothing. When a
    step of the user's code takes a ``NodeContext`` (it may add nodes holding it by a live
    edit), warn instead, once per graph and limit, and keep the limit. The judgement is
    :func:`counterpoint.options.unheld_limits`, the same as ``run --limit``'s."""
    unheld = unheld_limits(limits, graph)
    if unheld is None:
        return
    workflow = str(graph.source.file or "").endswith((".yaml", ".yml"))
    problems = []
    for name in unheld.names:
        close = unheld.close(name)
        mean = f" (did you mean {close!r}?)" if close else ""
        if unheld.editable:
            fix = f"it stays in force for nodes that a live edit adds later{mean}"
        elif workflow:
            fix = ("a workflow file cannot declare resources on its steps; leave it out "
                   "(to run fewer steps at once, use max_concurrency=N)")
        else:
            fix = (f"fix the name{mean}, declare the resource on the nodes it should bound "
                   f"(g.add(..., resources={{{name!r}: 1}})), or leave it out")
        problems.append(f"RunOptions(limits={{{name!r}: {limits[name]}}}): no node holds a "
                        f"resource {name!r} ({unheld.holds()}), so the limit would limit "
                        f"nothing; {fix}")
    where = f"{graph.source.origin}: graph {graph.name!r}"
    if unheld.editable:
        for problem, name in zip(problems, unheld.names, strict=True):
            if first_warning(graph, name):
                warnings.warn(f"{where}: {problem}", UserWarning, stacklevel=2)
        return
    raise UserError(f"{where}: {problems[0]}" if len(problems) == 1 else "\n  ".join(
        [f"{where}: several limits name resources no node holds:", *problems]))


def _conformed(graph: Graph, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
    typed = [(k, a) for k, a in graph.inputs.items() if a is not Any and a is not None]
    if not typed:
        return inputs
    out = dict(inputs)
    for name, annotation in typed:
        try:
            out[name] = codec.conform(inputs[name], annotation)
        except ValueError as exc:
            shown = repr(inputs[name])
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            kind = getattr(annotation, "__name__", None) or str(annotation)
            raise UserError(f"{graph.source.origin}: graph {graph.name!r}, input {name!r} "
                            f"must be {kind}, got {shown} ({exc}); pass a value of that "
                            f"type (on the command line: --input {name}=VALUE, read as "
                            "JSON when it parses)") from None
    return out


def check_backend(backend: Backend, graph: Graph) -> None:
    """Let ``backend`` refuse ``graph`` before the run starts, if it checks graphs (a
    backend that ships steps to other processes checks that they can be sent)."""
    check = getattr(backend, "check_graph", None)
    if check is not None:
        check(graph)


def prepare_run(graph: Graph, inputs: Mapping[str, Any], options: RunOptions,
                store: RunStore | str | None, run_id: str | None, backend: Backend | None,
                source_attr: str | None, parent: RunId | None,
                capacity: Capacity | None = None) -> tuple[Execution, Event]:
    """A new run of ``graph``, ready to execute, and its ``run_created`` event.

    Everything the user can get wrong is checked before the store is opened, so a
    mistake leaves nothing behind.
    """
    if parent is None:  # a sub-run's id is its parent's and its node's: run/node
        check_call(graph, options, store, run_id, backend, inputs=inputs)
    topology = graph.validate()
    if (options.budget is None and graph.budget is not None) or (
            options.deadline is None and graph.deadline is not None):  # a workflow's own
        options = dataclasses.replace(options, budget=options.budget or graph.budget,
                                      deadline=options.deadline or graph.deadline)
    inputs = check_inputs(graph, inputs, options)
    if options.limits and parent is None:  # a sub-run shares its parent's limits
        check_limits(graph, options.limits)
    backend = backend or options.backend or DEFAULT_BACKEND
    check_backend(backend, graph)
    owns = not isinstance(store, RunStore)
    the_store = store if isinstance(store, RunStore) else open_store(store)
    rid = RunId(run_id) if run_id else new_run_id()
    state = RunState.fresh(rid, graph.name, topology, graph.nodes,
                           estimates=the_store.estimates(), limits=options.limits)
    execution = Execution(graph, state, the_store, options,
                          backend=backend, inputs=inputs, parent=parent,
                          capacity=capacity)
    execution.owns_store = owns
    cache = topology.cache
    deps = cache.get("deps")
    if deps is None:  # recorded so the log alone shows the graph's shape (counterpoint show)
        deps = cache["deps"] = {spec.id: spec.deps for spec in topology.specs}
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
    if options.deadline is not None:  # absolute, so that a resume keeps the same one
        data["deadline_at"] = set_deadline(execution, clock().now() + options.deadline)
    return execution, Event(RUN_CREATED, time.time(), data=data)


def prepare_resume(rid: RunId, store: RunStore, graph: Graph | None,
                   options: RunOptions | None, backend: Backend | None, *,
                   capacity: Capacity | None = None, claim: bool = True) -> Execution:
    """An interrupted run rebuilt from its log, ready to execute.

    The run is claimed first, in one transaction of the store: if another live process
    runs it or is resuming it, :class:`~counterpoint.errors.RunClaimed` says which, and
    nothing runs. A resume that fails after its claim (a graph that no longer loads, or
    changed) gives the claim back, so that the next resume, from any process, is not
    refused in its name. A sub-run is resumed by its parent's process, which holds the
    claim.
    """
    record = store.run(rid)
    if not claim:  # a sub-run's parent holds the claim for the whole tree
        return _rebuilt(rid, record, store, graph, options, backend, capacity)
    if record.parent is not None:  # resumed alone, it could run beside its tree's resume
        root = tree_root(store, record)
        raise UserError(f"run {rid} is a sub-run of run {root.run_id}, which resumes it "
                        "with the rest of its run tree: `counterpoint resume "
                        f"{root.run_id}`")
    pid, host = os.getpid(), socket.gethostname()
    store.claim(rid, pid=pid, host=host)
    try:
        return _rebuilt(rid, record, store, graph, options, backend, capacity)
    except BaseException:
        with contextlib.suppress(StoreError):  # a store that failed: its error is told
            store.release(rid, pid=pid, host=host, previous=record)
        raise


def _rebuilt(rid: RunId, record: RunRecord, store: RunStore, graph: Graph | None,
             options: RunOptions | None, backend: Backend | None,
             capacity: Capacity | None) -> Execution:
    events = store.events(rid)
    shape = (events[0].data or {}).get("deps")
    the_graph = check_given(graph, shape, f"run {rid}") if graph is not None \
        else load_recorded(record.source, rid, shape)
    opts = options or RunOptions.from_data(record.options)
    created = events[0].data or {}
    inputs = {k: codec.decode(v) for k, v in (created.get("inputs") or {}).items()}
    the_graph.validate()  # a graph that changed since the run was recorded fails here
    backend = backend or opts.backend or DEFAULT_BACKEND
    check_backend(backend, the_graph)
    state = RunState.new(rid, the_graph.name, the_graph.nodes.values(),  # as added
                         estimates=store.estimates(), limits=opts.limits)
    replay(state, events, the_graph)
    execution = Execution(the_graph, state, store, opts, backend=backend,
                          inputs=inputs, seq=events[-1].seq, parent=record.parent,
                          capacity=capacity)
    execution.journal = journal_of(state, events)
    execution.resume_fallbacks()
    execution.ledgers = resumed_ledgers(
        rid, opts, store, events, sub_run=record.parent is not None,
        budgeted=opts.budget is not None or any(
            s.policy.budget is not None for s in the_graph.nodes.values()))
    deadline_at = created.get("deadline_at")
    if deadline_at is None and opts.deadline is not None:  # a log from before it was kept
        deadline_at = clock().now() + opts.deadline
    if deadline_at is not None:
        set_deadline(execution, float(deadline_at))
    execution.approvals.load(events)
    return execution


def set_deadline(execution: Execution, at: float) -> float:
    """Make ``at`` ``execution``'s deadline; what code running in it sees as time left
    (:func:`counterpoint.budget.remaining`) is the nearest of it and its parents'."""
    execution.deadline_at = at
    execution.ledgers.run.deadline_at = at
    return at
