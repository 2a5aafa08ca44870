"""Which nodes of a large run the page is sent: a readable subset, bounded.

A run of up to :data:`LARGE_RUN` nodes is sent whole, as before. A larger one (100,000
nodes is 29 MB of JSON, and a browser cannot draw that many boxes usefully) is sent as
at most :data:`BOUND` nodes: the critical path, the failed, retrying, running, waiting
and ready nodes, then their direct neighbours (dependencies and dependents), in that
order of priority, with counts by status of the whole run. The page draws what it is
sent and says how many of how many it drew; any node's detail is still one request away.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..ids import NodeId
from ..state import NodeStatus, RunState

LARGE_RUN = 2000
"""A run of more nodes is sent as a subset."""
BOUND = 1000
"""Most nodes a large run's subset holds (the DAG stays quick to lay out and draw:
measured in chromium, 1,000 boxes take well under a second, 100,000 take 5 s and more)."""

_URGENT = (NodeStatus.FAILED, NodeStatus.RETRYING, NodeStatus.RUNNING, NodeStatus.WAITING,
           NodeStatus.READY)


def is_large(state: RunState) -> bool:
    """Whether the page is sent a subset of this run rather than every node."""
    return len(state.nodes) > LARGE_RUN


def pick(state: RunState, critical: Iterable[str], bound: int = BOUND
         ) -> tuple[list[NodeId], dict[str, Any]]:
    """At most ``bound`` node ids, most telling first (see the module docstring), and what
    the page says about them: how many of how many nodes, and the whole run's counts by
    status (one pass over the run's nodes for both)."""
    nodes = state.nodes
    chosen: dict[NodeId, None] = {}

    def add(ids: Iterable[NodeId]) -> bool:
        for n in ids:
            if len(chosen) >= bound:
                return False
            if n in nodes:
                chosen.setdefault(n, None)
        return len(chosen) < bound

    core = [NodeId(c) for c in critical]
    by_status: dict[NodeStatus, list[NodeId]] = {s: [] for s in _URGENT}
    counts: Counter[str] = Counter()
    for n, ns in nodes.items():
        status = ns.status
        counts[status.value] += 1
        bucket = by_status.get(status)
        if bucket is not None:
            bucket.append(n)
    for status in _URGENT:
        core.extend(by_status[status])
    if add(core):
        for n in list(chosen):
            ns = nodes[n]
            if not add(ns.spec.deps) or not add(ns.dependents):
                break
    return list(chosen), {"shown": len(chosen), "total": len(nodes), "bound": BOUND,
                          "counts": dict(sorted(counts.items()))}
