"""Run metrics, computed from the run state (itself a projection of the log)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .ids import NodeId
from .state import (
    NodeState,
    NodeStatus,
    RunState,
    Spawn,
    in_added_order_after,
    in_topological_order,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeTiming:
    """Where one node's time went."""

    queue_wait: float | None
    """Seconds from first becoming ready to first starting (waiting for a slot of the
    run's ``max_concurrency`` or a named resource)."""
    run_time: float
    """Seconds from start to end of its attempts, summed (waiting inside them included)."""
    attempts: int
    waited: dict[str, float] = field(default_factory=dict)
    """Seconds its attempts waited inside their run time, by cause: ``thread`` (a worker
    thread for a sync step), ``model`` (a model's concurrency slot or rate limit)."""
    busy_time: float = 0.0
    """``run_time`` less what it waited: the time the node's own work had."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Metrics:
    """How a run used its time."""

    makespan: float
    """Seconds from the run's creation to its end (or to now)."""
    critical_path: float
    """Longest dependency chain over the nodes' actual run times, in seconds."""
    critical_path_nodes: tuple[NodeId, ...]
    makespan_over_critical_path: float | None
    """1.0 is the best any scheduler can do; higher means time lost to overhead or limits."""
    mean_parallel_width: float
    """Average number of nodes doing their own work at once (total busy time / makespan):
    waiting for a thread or a model slot does not count."""
    peak_parallel_width: int
    """Most nodes running at once (an attempt counted from when it had its thread)."""
    total_run_time: float
    retries: int
    """Attempts that were retries (a fallback's call is not one, nor is an attempt run
    again after its process ended: those are :attr:`rerun`)."""
    rerun: int = 0
    """Attempts cut short by the end of their process (a crash, a Ctrl-C) and run again
    by a resume."""
    queue_wait: float = 0.0
    """Seconds nodes waited, ready, for a slot or resource before starting, summed."""
    waited: dict[str, float] = field(default_factory=dict)
    """Seconds nodes waited inside their attempts, by cause, summed over nodes."""
    total_busy_time: float = 0.0
    """Seconds of the nodes' own work, summed (``total_run_time`` less ``waited``)."""
    failures: dict[str, str] = field(default_factory=dict)
    """Failed node -> cause, for nodes that ended FAILED."""
    nodes: dict[str, NodeTiming] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def compute(state: RunState, now: float,
            spawned: Mapping[NodeId, Spawn] | None = None) -> Metrics:
    """Metrics of a run from its state (one pass or two over its nodes: the L1 run's
    100,000 take about 0.2 s).

    ``spawned``: the nodes live edits added and which node's edit added each (what a
    log tells, :attr:`counterpoint.history.Projection.spawned`; by default what the
    run's own state recorded, :attr:`RunState.spawned`); the critical path then also
    runs through the node that added a node (a goal run's is ``plan -> t1 -> ...``,
    not ``t1 -> ...``). With an empty one, only the nodes' dependencies count."""
    if spawned is None:
        spawned = state.spawned
    nodes = state.nodes
    end = state.finished_at or now
    makespan = max(0.0, end - state.created_at) if state.created_at else 0.0
    order = _spawn_order(state, spawned) if spawned else None
    if order is None or not spawned:
        best, via = _chains(in_topological_order(state))
    else:
        best, via = _chains_spawned(order, spawned, nodes)
    tail = max(best, key=best.__getitem__, default=None)  # the first of the longest
    path: list[NodeId] = []
    while tail is not None:
        path.append(tail)
        tail = via[tail]
    critical = best[path[0]] if path else 0.0
    starts: list[float] = []  # when each attempt had its thread (a thread wait comes first)
    stops: list[float] = []
    total = 0.0
    waited: dict[str, float] = {}
    timings: dict[str, NodeTiming] = {}
    queue = 0.0
    retries = rerun = 0
    for k, ns in nodes.items():
        run_time = ns.run_time
        total += run_time
        # a reused node (a fork's) waited in the run it came from, not in this one
        own = dict(ns.waited) if ns.waited and not ns.reused else {}
        if ns.earlier is None:
            start, stop = ns.started_at, ns.stopped_at
            if start is not None and stop is not None:
                late = own.get("thread", 0.0) + own.get("log", 0.0)  # (held first)
                starts.append(min(stop, start + late))
                stops.append(stop)
        else:
            for start, stop in ns.intervals:
                starts.append(min(stop, start))
                stops.append(stop)
        busy = run_time if run_time > 0.0 else 0.0
        if own:
            for cause, seconds in own.items():
                waited[cause] = waited.get(cause, 0.0) + seconds
            busy = max(0.0, run_time - sum(own.values()))
        first_started, first_ready = ns.first_started_at, ns.first_ready_at
        queued = first_started - first_ready \
            if first_started is not None and first_ready is not None else None
        queue += queued or 0.0
        timings[k] = _timing(queued, run_time, ns.attempt, own, busy)
        if ns.attempt > 1:
            retries += max(0, ns.attempt - 1 - ns.fell_back - ns.interrupted)
            rerun += ns.interrupted
    busy = max(0.0, total - sum(waited.values()))
    return Metrics(
        makespan=makespan, critical_path=critical,
        critical_path_nodes=tuple(reversed(path)),
        makespan_over_critical_path=makespan / critical if critical > 0 else None,
        mean_parallel_width=busy / makespan if makespan > 0 else 0.0,
        peak_parallel_width=_peak(starts, stops), total_run_time=total,
        retries=retries, rerun=rerun,
        failures={k: f"{(ns.error or {}).get('type', 'Error')}: "
                     f"{(ns.error or {}).get('message', '')}"
                  for k, ns in nodes.items() if ns.status is NodeStatus.FAILED},
        nodes=timings, queue_wait=queue, waited=waited, total_busy_time=busy,
    )


def _chains(order: list[NodeState]) -> tuple[dict[NodeId, float], dict[NodeId, NodeId | None]]:
    """For each node of ``order`` (a topological order), the longest chain of run time
    ending with it, and the dependency before it on that chain."""
    best: dict[NodeId, float] = {}
    via: dict[NodeId, NodeId | None] = {}
    for ns in order:
        top = 0.0
        came: NodeId | None = None
        for dep in ns.spec.deps:
            chain = best[dep]
            if chain > top:
                top = chain
                came = dep
        node_id = ns.spec.id
        best[node_id] = top + ns.run_time
        via[node_id] = came
    return best, via


def _chains_spawned(order: list[NodeState], spawned: Mapping[NodeId, Spawn],
                    nodes: Mapping[NodeId, NodeState],
                    ) -> tuple[dict[NodeId, float], dict[NodeId, NodeId | None]]:
    """:func:`_chains`, where the node whose edit added a node also comes before it (its
    run time up to the edit); ``order`` puts it first (:func:`_spawn_order`). A loop of
    its own: the usual case, no edits, keeps :func:`_chains`' speed."""
    best: dict[NodeId, float] = {}
    via: dict[NodeId, NodeId | None] = {}
    for ns in order:
        top = 0.0
        came: NodeId | None = None
        for dep in ns.spec.deps:
            chain = best[dep]
            if chain > top:
                top = chain
                came = dep
        node_id = ns.spec.id
        spawn = spawned.get(node_id)
        if spawn is not None and spawn.by in best:  # (after its deps: a tie keeps them)
            chain = best[spawn.by] - _after(nodes[spawn.by], spawn.at)
            if chain > top:
                top = chain
                came = spawn.by
        best[node_id] = top + ns.run_time
        via[node_id] = came
    return best, via


def _after(ns: NodeState, at: float) -> float:
    """The seconds of ``ns``'s run time after ``at`` (its edit): what it ran after it
    added a node does not delay that node."""
    start, stop = ns.started_at, ns.stopped_at
    if start is None or stop is None or at < start:
        return 0.0
    return min(ns.run_time, max(0.0, stop - at))


def _spawn_order(state: RunState, spawned: Mapping[NodeId, Spawn]) -> list[NodeState] | None:
    """The nodes, each after its dependencies and after the node that added it, in the
    order they were added otherwise; ``None`` if the two together form a cycle (an edit
    that made its own node wait for what it added), for then only dependencies count."""
    nodes = state.nodes
    before: dict[NodeId, Sequence[NodeId]] = {}
    for k, ns in nodes.items():
        first: Sequence[NodeId] = ns.spec.deps
        spawn = spawned.get(k)
        if spawn is not None and spawn.by in nodes and spawn.by not in first:
            first = (*first, spawn.by)
        before[k] = first
    order = in_added_order_after(nodes, before)
    return order if len(order) == len(nodes) else None


def _peak(starts: list[float], stops: list[float]) -> int:
    """The most intervals open at once, given their starts and stops (an interval that
    stops when another starts does not overlap it)."""
    starts.sort()
    stops.sort()
    width = peak = 0
    j = 0
    count = len(stops)
    for at in starts:
        while j < count and stops[j] <= at:  # what stops by now, first
            width -= 1
            j += 1
        width += 1
        if width > peak:
            peak = width
    return peak


class _TimingDraft:
    __slots__ = NodeTiming.__slots__


def _timing(queue_wait: float | None, run_time: float, attempts: int,
            waited: dict[str, float], busy_time: float) -> NodeTiming:
    """``NodeTiming(...)``, made without the frozen dataclass's ``__setattr__`` per field
    (a fifth of the cost; the same trick as :func:`counterpoint.nodes._new_spec`)."""
    timing: Any = _TimingDraft()
    timing.queue_wait = queue_wait
    timing.run_time = run_time
    timing.attempts = attempts
    timing.waited = waited
    timing.busy_time = busy_time
    timing.__class__ = NodeTiming
    made: NodeTiming = timing
    return made
