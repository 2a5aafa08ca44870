"""The public entry points: run a graph, start one in the background, resume one.

These sit above the scheduler (:mod:`counterpoint.scheduler`): they open the store,
prepare an :class:`~counterpoint.scheduler.Execution` and execute it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from .backend import Backend
from .events import Event
from .garbage import tune_gc
from .graph import Graph
from .ids import RunId
from .loop import run as run_loop
from .options import RunOptions
from .results import RunResult
from .scheduler import RunHandle
from .scheduler.execution import (
    Execution,
    check_call,
    launch,
    prepare_resume,
    prepare_run,
    resumed_event,
)
from .scheduler.fork import prepare_fork
from .scheduler.replay import replay
from .store import RunStore, open_store

__all__ = ["fork", "fork_sync", "replay", "resume", "run", "run_sync", "start", "start_fork",
           "start_resume"]

_DEFAULT_OPTIONS = RunOptions()
_T = TypeVar("_T")


async def start(graph: Graph, *, inputs: Mapping[str, Any] | None = None,
                options: RunOptions | None = None, store: RunStore | str | None = None,
                run_id: str | None = None, backend: Backend | None = None,
                source_attr: str | None = None) -> RunHandle:
    """Start running ``graph`` in the background of the current event loop.

    Returns once the run is in the store (its ``run_created`` event is durable), so the
    id of the handle always names a run that ``counterpoint runs`` lists and
    :func:`resume` continues, even if the process dies right after.
    """
    execution, first = prepare_run(graph, inputs or {}, options or _DEFAULT_OPTIONS, store,
                                   run_id, backend, source_attr, None)
    execution.keep_history()
    return await _launched(execution, first)


async def _launched(execution: Execution, first: Event) -> RunHandle:
    """Launch a new run, returning once its ``run_created`` event is durable; no step of
    the run begins before that, so no step's effects are done for a run the store does not
    hold (a process killed in the run's first milliseconds leaves a resumable run)."""
    execution.hold_steps()
    handle = launch(execution, first)
    await asyncio.sleep(0)  # the run's first burst of events: run_created and the roots
    try:
        await execution.flush_batched()
        handle.raise_early_failure()
    except BaseException:  # e.g. a locked database: the run's task fails too; collect it
        await handle.discard()
        raise
    execution.release_steps()
    return handle


async def run(graph: Graph, *, inputs: Mapping[str, Any] | None = None,
              options: RunOptions | None = None, store: RunStore | str | None = None,
              run_id: str | None = None, backend: Backend | None = None,
              source_attr: str | None = None) -> RunResult:
    """Run ``graph`` to the end and return its :class:`RunResult`.

    ``store`` is a :class:`RunStore`, a path, ``"memory"``, or ``None`` for the
    default SQLite file (``$COUNTERPOINT_DB`` or ``.counterpoint/runs.db``).

    Unlike :func:`start`, the run's first steps begin at once, while its ``run_created``
    is on its way to the store (a few milliseconds): a process killed in that window
    leaves no record of the run, though its first steps may have begun. Holding them
    until the record is durable cost W3 (10,000 runs started at once) 17% of its
    throughput, since no run's work could start before the writer had committed the
    records; use :func:`start` (or ``counterpoint run``) where a step's effect must never
    come before the run's record.
    """
    execution, first = prepare_run(graph, inputs or {}, options or _DEFAULT_OPTIONS, store,
                                   run_id, backend, source_attr, None)
    return await execution.execute(first)  # no hold (see the docstring)


def run_sync(graph: Graph, *, inputs: Mapping[str, Any] | None = None,
             options: RunOptions | None = None, store: RunStore | str | None = None,
             run_id: str | None = None, backend: Backend | None = None,
             source_attr: str | None = None) -> RunResult:
    """:func:`run` for code that does not await: blocks until the run ends.

    The process is counterpoint's for the call: it runs on a loop with precise timers
    (:mod:`counterpoint.loop`) and tunes the collector (:mod:`counterpoint.garbage`).
    Called where an event loop is already running (a Jupyter cell, an async
    framework's thread), the run gets a loop of its own in a helper thread and this call
    blocks until it ends; ``await cp.run(...)`` there avoids blocking that loop.
    """
    tune_gc()
    return _blocking(run(graph, inputs=inputs, options=options, store=store, run_id=run_id,
                         backend=backend, source_attr=source_attr))


def _blocking(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to its end on a loop of its own, in this thread when it has no loop
    running, else in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False  # the run goes outside this handler: else every error it records
    else:                # would carry "no running event loop" as its context
        running = True
    if not running:
        return run_loop(coro)
    with concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="counterpoint-run-sync") as helper:
        return helper.submit(run_loop, coro).result()


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
    check_call(graph, options, store, backend=backend, graph_needed=False)
    owns = not isinstance(store, RunStore)
    the_store = store if isinstance(store, RunStore) else open_store(store)
    try:
        execution = prepare_resume(RunId(run_id), the_store, graph, options, backend)
    except BaseException:
        if owns:
            the_store.close()
        raise
    execution.owns_store = owns
    execution.keep_history()
    handle = launch(execution, resumed_event(execution))
    await asyncio.sleep(0)
    return handle


async def fork(run_id: str, *, at: int | str | None = None,
               replace: Mapping[str, Any] | None = None,
               inputs: Mapping[str, Any] | None = None, store: RunStore | str | None = None,
               graph: Graph | None = None, options: RunOptions | None = None,
               backend: Backend | None = None, new_run_id: str | None = None) -> RunResult:
    """A new run that starts from a prefix of run ``run_id``'s log, reusing every output
    recorded before the fork point; returns its result.

    ``at`` is an event number (keep events ``1..at``) or a node id (fork just before it
    started: it and everything downstream run again, other outputs are reused); ``None``
    reads the whole log. ``replace`` maps node ids to a new step (a callable or graph) or,
    for any other value, to the output the node is given without running; ``inputs``
    changes graph inputs. Replaced nodes, nodes reading a changed input and everything
    downstream of them run again. The new run records ``forked_from`` (see
    :attr:`~counterpoint.store.RunRecord.forked_from`; the parent lists it in
    ``store.forks(run_id)``) and is resumable like any other. Reused model calls count in
    ``result.usage.reused``, not as calls.
    """
    handle = await start_fork(run_id, at=at, replace=replace, inputs=inputs, store=store,
                              graph=graph, options=options, backend=backend,
                              new_run_id=new_run_id)
    return await handle.result()


async def start_fork(run_id: str, *, at: int | str | None = None,
                     replace: Mapping[str, Any] | None = None,
                     inputs: Mapping[str, Any] | None = None,
                     store: RunStore | str | None = None, graph: Graph | None = None,
                     options: RunOptions | None = None, backend: Backend | None = None,
                     new_run_id: str | None = None) -> RunHandle:
    """:func:`fork` in the background: returns once the new run's first events (what it
    reuses) are durable, with a handle to follow it."""
    check_call(graph, options, store, new_run_id, backend, graph_needed=False)
    owns = not isinstance(store, RunStore)
    the_store = store if isinstance(store, RunStore) else open_store(store)
    try:
        execution, first = prepare_fork(RunId(run_id), the_store, at=at, replace=replace,
                                        inputs=inputs, graph=graph, options=options,
                                        backend=backend, run_id=new_run_id)
    except BaseException:
        if owns:
            the_store.close()
        raise
    execution.owns_store = owns
    execution.keep_history()
    return await _launched(execution, first)  # as in start: held until it is in the store


def fork_sync(run_id: str, **kwargs: Any) -> RunResult:
    """:func:`fork` for code that does not await (see :func:`run_sync`)."""
    tune_gc()
    return _blocking(fork(run_id, **kwargs))
