"""Benchmark workloads as plain data, plus the analytic bounds they are judged against.

A `Workload` is a DAG of nodes, each with its dependencies and a duration in seconds
(0.0 marks a trivial node that does not sleep at all). Nothing here imports
counterpoint or any orchestrator: the same data feeds every runner, and the bounds
(`critical_path`, `total_work`, `list_schedule_makespan`) say what a zero-overhead
scheduler would achieve on it.

Workloads:

- W1 `chain`: n trivial nodes in a line (pure per-node scheduling overhead).
- W2 `fanout`: a root, n sleeping branches, one join (concurrency of independent nodes).
- W3 `diamond`: A -> {B, C, D} -> E, run as many concurrent workflows.
- W4 `layered`: a seeded random layered DAG (mixed fan-in and fan-out).
- W5 `load_wfinstance`: real scientific workflow traces (WfFormat 1.5), time-scaled.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import os
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Workload",
    "chain",
    "critical_path",
    "diamond",
    "evaldata_dir",
    "fanout",
    "layered",
    "list_schedule_makespan",
    "load_wfinstance",
    "scaled_to_critical_path",
    "successors",
    "topological_order",
    "total_work",
    "upward_ranks",
    "wfinstance_paths",
]

EVALDATA_ENV = "COUNTERPOINT_EVALDATA"
"""Environment variable naming the evaldata folder (the one holding `wfinstances/`)."""


@dataclass(frozen=True)
class Workload:
    """A DAG to run: node id -> (ids of its dependencies, duration in seconds)."""

    name: str
    """Short label used in benchmark output, e.g. ``"W1-chain-1000"``."""
    nodes: dict[str, tuple[tuple[str, ...], float]]
    """Node id -> (dependency ids, duration in seconds; 0.0 means trivial, no sleep)."""

    def __post_init__(self) -> None:
        for node, (deps, duration) in self.nodes.items():
            if not duration >= 0.0 or math.isinf(duration):
                raise ValueError(f"{self.name}: node {node!r} has invalid duration {duration!r}")
            for dep in deps:
                if dep not in self.nodes:
                    raise ValueError(f"{self.name}: node {node!r} depends on unknown node {dep!r}")
            if len(set(deps)) != len(deps):
                raise ValueError(f"{self.name}: node {node!r} lists a dependency twice")
        topological_order(self)  # raises on a cycle

    def __len__(self) -> int:
        return len(self.nodes)


# --- graph helpers -------------------------------------------------------------------


def successors(w: Workload) -> dict[str, list[str]]:
    """Node id -> ids of the nodes that depend on it, in node insertion order."""
    succ: dict[str, list[str]] = {node: [] for node in w.nodes}
    for node, (deps, _) in w.nodes.items():
        for dep in deps:
            succ[dep].append(node)
    return succ


def topological_order(w: Workload) -> list[str]:
    """Nodes with every dependency before its dependents; ties broken by node id.

    Raises ValueError if the graph has a cycle.
    """
    remaining = {node: len(deps) for node, (deps, _) in w.nodes.items()}
    succ = successors(w)
    ready = [node for node, count in remaining.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for child in succ[node]:
            remaining[child] -= 1
            if remaining[child] == 0:
                heapq.heappush(ready, child)
    if len(order) != len(w.nodes):
        raise ValueError(f"{w.name}: dependency cycle among {len(w.nodes) - len(order)} nodes")
    return order


def upward_ranks(w: Workload) -> dict[str, float]:
    """Upward rank of each node: its own duration plus the largest rank of its successors."""
    succ = successors(w)
    rank: dict[str, float] = {}
    for node in reversed(topological_order(w)):
        tail = max((rank[child] for child in succ[node]), default=0.0)
        rank[node] = w.nodes[node][1] + tail
    return rank


def critical_path(w: Workload) -> float:
    """Length in seconds of the longest dependency path, summing node durations."""
    return max(upward_ranks(w).values(), default=0.0)


def total_work(w: Workload) -> float:
    """Sum of all node durations in seconds (the makespan on one worker)."""
    return math.fsum(duration for _, duration in w.nodes.values())


def list_schedule_makespan(w: Workload, workers: int | None = None) -> float:
    """Makespan of zero-overhead critical-path list scheduling on `workers` workers.

    Event-driven simulation: whenever a worker is free, it starts the ready node with
    the highest upward rank (ties: smallest node id). All completions at the same
    instant are applied before dispatching, so a node made ready at time t competes
    with the others ready at t. With ``workers=None`` there is no limit and the result
    equals `critical_path` (up to float rounding: sums run in a different order).
    """
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    capacity = len(w.nodes) if workers is None else workers
    rank = upward_ranks(w)
    succ = successors(w)
    remaining = {node: len(deps) for node, (deps, _) in w.nodes.items()}

    ready: list[tuple[float, str]] = [(-rank[n], n) for n, count in remaining.items() if count == 0]
    heapq.heapify(ready)
    running: list[tuple[float, str]] = []  # (finish time, node id)
    free = capacity
    now = 0.0
    makespan = 0.0
    while ready or running:
        while free and ready:
            _, node = heapq.heappop(ready)
            finish = now + w.nodes[node][1]
            heapq.heappush(running, (finish, node))
            makespan = max(makespan, finish)
            free -= 1
        if not running:
            break
        now = running[0][0]
        while running and running[0][0] == now:
            _, node = heapq.heappop(running)
            free += 1
            for child in succ[node]:
                remaining[child] -= 1
                if remaining[child] == 0:
                    heapq.heappush(ready, (-rank[child], child))
    return makespan


# --- synthetic workloads -------------------------------------------------------------


def chain(n: int = 1000) -> Workload:
    """W1: `n` trivial nodes in a chain, each depending on the previous one."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    ids = [f"c{i:04d}" for i in range(n)]
    nodes: dict[str, tuple[tuple[str, ...], float]] = {ids[0]: ((), 0.0)}
    for prev, node in itertools.pairwise(ids):
        nodes[node] = ((prev,), 0.0)
    return Workload(name=f"W1-chain-{n}", nodes=nodes)


def fanout(n: int = 1000, sleep: float = 0.05) -> Workload:
    """W2: a trivial root, `n` branches sleeping `sleep` s each, then a trivial join."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    branches = [f"b{i:04d}" for i in range(n)]
    nodes: dict[str, tuple[tuple[str, ...], float]] = {"root": ((), 0.0)}
    nodes.update((branch, (("root",), sleep)) for branch in branches)
    nodes["join"] = (tuple(branches), 0.0)
    return Workload(name=f"W2-fanout-{n}", nodes=nodes)


def diamond(sleep: float = 0.01) -> Workload:
    """W3 (one workflow): A -> {B, C, D} -> E, every node sleeping `sleep` s."""
    return Workload(
        name="W3-diamond",
        nodes={
            "A": ((), sleep),
            "B": (("A",), sleep),
            "C": (("A",), sleep),
            "D": (("A",), sleep),
            "E": (("B", "C", "D"), sleep),
        },
    )


def layered(n: int = 500, seed: int = 0) -> Workload:
    """W4: a seeded random layered DAG of `n` nodes with 10-25 layers.

    Durations are uniform in [1 ms, 20 ms]. Each node of layer k > 0 depends on 1-3
    distinct earlier nodes: the first always from layer k-1 (so the DAG really has that
    many levels), each further one from layer k-1 with probability 0.7 and otherwise
    from any earlier layer. Deterministic for a given (n, seed).
    """
    rng = random.Random(seed)
    n_layers = min(n, rng.randint(10, 25))
    cuts = sorted(rng.sample(range(1, n), n_layers - 1))
    sizes = [hi - lo for lo, hi in zip([0, *cuts], [*cuts, n], strict=True)]

    layers: list[list[str]] = []
    nodes: dict[str, tuple[tuple[str, ...], float]] = {}
    for k, size in enumerate(sizes):
        layer = [f"L{k:02d}-{len(nodes) + i:03d}" for i in range(size)]
        for node in layer:
            deps: list[str] = []
            if k > 0:
                previous = layers[k - 1]
                earlier = [m for lyr in layers[: k - 1] for m in lyr]
                deps.append(rng.choice(previous))
                for _ in range(rng.randint(1, 3) - 1):
                    pool = previous if not earlier or rng.random() < 0.7 else earlier
                    dep = rng.choice(pool)
                    if dep not in deps:
                        deps.append(dep)
            nodes[node] = (tuple(deps), rng.uniform(0.001, 0.020))
        layers.append(layer)
    return Workload(name=f"W4-layered-{n}-s{seed}", nodes=nodes)


# --- real traces (WfInstances, WfFormat 1.5) -----------------------------------------


def evaldata_dir() -> Path:
    """The shared evaldata folder: $COUNTERPOINT_EVALDATA, else ``<repo>/../shared/evaldata``."""
    override = os.environ.get(EVALDATA_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "shared" / "evaldata"


def wfinstance_paths() -> list[Path]:
    """All WfFormat JSON traces under ``<evaldata>/wfinstances``, sorted by path."""
    return sorted((evaldata_dir() / "wfinstances").rglob("*.json"))


def load_wfinstance(path: str | os.PathLike[str], scale: float = 1.0) -> Workload:
    """Load a WfFormat 1.5 trace as a Workload, durations multiplied by `scale`.

    Node id = ``workflow.specification.tasks[].id``, dependencies = its ``parents``,
    duration = ``workflow.execution.tasks[].runtimeInSeconds`` joined on id (a task
    without an execution record is trivial).
    """
    if scale < 0:
        raise ValueError(f"scale must be >= 0, got {scale}")
    trace_path = Path(path)
    doc: dict[str, Any] = json.loads(trace_path.read_text(encoding="utf-8"))
    workflow: Mapping[str, Any] = doc["workflow"]
    spec_tasks: Iterable[Mapping[str, Any]] = workflow["specification"]["tasks"]
    runtimes = {
        task["id"]: float(task.get("runtimeInSeconds") or 0.0)
        for task in workflow.get("execution", {}).get("tasks", [])
    }
    nodes: dict[str, tuple[tuple[str, ...], float]] = {}
    for task in spec_tasks:
        task_id: str = task["id"]
        parents = tuple(dict.fromkeys(task.get("parents", [])))
        nodes[task_id] = (parents, runtimes.get(task_id, 0.0) * scale)
    return Workload(name=f"W5-{trace_path.stem}", nodes=nodes)


def scaled_to_critical_path(w: Workload, seconds: float) -> Workload:
    """A copy of `w` with durations scaled so its critical path is `seconds` long."""
    current = critical_path(w)
    if current <= 0:
        raise ValueError(f"{w.name}: critical path is zero, cannot rescale")
    factor = seconds / current
    nodes = {node: (deps, duration * factor) for node, (deps, duration) in w.nodes.items()}
    return Workload(name=w.name, nodes=nodes)
