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
    """Seconds from first becoming ready to first starting."""
    run_time: float
    """Seconds running, summed over attempts."""
    attempts: int


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
    """Average number of nodes running at once (total run time / makespan)."""
    peak_parallel_width: int
    total_run_time: float
    retries: int
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
        for start, stop in ns.intervals:
            edges.append((start, 1))
            edges.append((stop, -1))
    edges.sort()
    width = peak = 0
    for _, delta in edges:
        width += delta
        peak = max(peak, width)
    total = sum(ns.run_time for ns in nodes.values())
    return Metrics(
        makespan=makespan, critical_path=critical,
        critical_path_nodes=tuple(reversed(path)),
        makespan_over_critical_path=makespan / critical if critical > 0 else None,
        mean_parallel_width=total / makespan if makespan > 0 else 0.0,
        peak_parallel_width=peak, total_run_time=total,
        retries=sum(max(0, ns.attempt - 1) for ns in nodes.values()),
        failures={k: f"{(ns.error or {}).get('type', 'Error')}: "
                     f"{(ns.error or {}).get('message', '')}"
                  for k, ns in nodes.items() if ns.status is NodeStatus.FAILED},
        nodes={k: NodeTiming(
            queue_wait=(ns.first_started_at - ns.first_ready_at)
            if ns.first_started_at is not None and ns.first_ready_at is not None else None,
            run_time=ns.run_time, attempts=ns.attempt) for k, ns in nodes.items()},
    )
