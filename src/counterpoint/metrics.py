"""Run metrics, computed from the run state (itself a projection of the log)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .ids import NodeId
from .state import NodeStatus, RunState, _topological


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
    """Attempts that were retries (a fallback's call is not one)."""
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


def compute(state: RunState, now: float) -> Metrics:
    """Metrics of a run from its state."""
    nodes = state.nodes
    end = state.finished_at or now
    makespan = max(0.0, end - state.created_at) if state.created_at else 0.0
    best: dict[NodeId, tuple[float, NodeId | None]] = {}
    for node_id in _topological(state):
        ns = nodes[node_id]
        prev: tuple[float, NodeId | None] = (0.0, None)
        for dep in ns.spec.deps:
            if best[dep][0] > prev[0]:
                prev = (best[dep][0], dep)
        best[node_id] = (prev[0] + ns.run_time, prev[1])
    tail = max(best, key=lambda k: best[k][0], default=None)
    path: list[NodeId] = []
    while tail is not None:
        path.append(tail)
        tail = best[tail][1]
    critical = best[path[0]][0] if path else 0.0
    edges: list[tuple[float, int]] = []
    for ns in nodes.values():
        late = (ns.waited or {}).get("thread", 0.0) if ns.earlier is None else 0.0
        for start, stop in ns.intervals:
            edges.append((min(stop, start + late), 1))  # a thread wait comes first
            edges.append((stop, -1))
    edges.sort()
    width = peak = 0
    for _, delta in edges:
        width += delta
        peak = max(peak, width)
    total = sum(ns.run_time for ns in nodes.values())
    waited: dict[str, float] = {}
    timings: dict[str, NodeTiming] = {}
    queue = 0.0
    for k, ns in nodes.items():
        own = dict(ns.waited or {})
        for cause, seconds in own.items():
            waited[cause] = waited.get(cause, 0.0) + seconds
        queued = (ns.first_started_at - ns.first_ready_at) \
            if ns.first_started_at is not None and ns.first_ready_at is not None else None
        queue += queued or 0.0
        timings[k] = NodeTiming(queue_wait=queued, run_time=ns.run_time, attempts=ns.attempt,
                                waited=own,
                                busy_time=max(0.0, ns.run_time - sum(own.values())))
    busy = max(0.0, total - sum(waited.values()))
    return Metrics(
        makespan=makespan, critical_path=critical,
        critical_path_nodes=tuple(reversed(path)),
        makespan_over_critical_path=makespan / critical if critical > 0 else None,
        mean_parallel_width=busy / makespan if makespan > 0 else 0.0,
        peak_parallel_width=peak, total_run_time=total,
        retries=sum(max(0, ns.attempt - 1 - ns.fell_back) for ns in nodes.values()),
        failures={k: f"{(ns.error or {}).get('type', 'Error')}: "
                     f"{(ns.error or {}).get('message', '')}"
                  for k, ns in nodes.items() if ns.status is NodeStatus.FAILED},
        nodes=timings, queue_wait=queue, waited=waited, total_busy_time=busy,
    )
