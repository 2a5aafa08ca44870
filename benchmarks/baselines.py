"""Baseline runners that counterpoint is measured against: hand-written asyncio and LangGraph.

Every runner executes a `Workload` the same way: a node awaits ``asyncio.sleep(duration)``
when its duration is positive and does nothing otherwise, and its output is
``len(inputs) + 1`` where the inputs are its dependencies' outputs, so data really flows
from node to node. Each runner returns the elapsed wall time in seconds, measured with
`time.perf_counter` around the execution only: graph compilation, adjacency tables and
checkpoint-database setup happen before the clock starts. Each call runs in a fresh
event loop (`asyncio.run`).

- `run_asyncio` / `run_asyncio_many`: one asyncio task per node, started the moment its
  last dependency finishes (readiness-driven, no rounds), optionally capped by a
  semaphore of `workers` slots.
- `run_langgraph` / `run_langgraph_many`: the same DAG as a LangGraph `StateGraph`,
  which executes in supersteps, optionally checkpointed to a real SQLite file.

`selfcheck()` runs every runner on small graphs and verifies each node ran exactly once
with the right output. Run it with ``python -m benchmarks.baselines`` from the repo root.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Protocol, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from benchmarks.workloads import Workload, chain, diamond, fanout, layered, successors

__all__ = [
    "run_asyncio",
    "run_asyncio_many",
    "run_langgraph",
    "run_langgraph_many",
    "selfcheck",
]

Outputs = dict[str, int]


def _expected_outputs(w: Workload) -> Outputs:
    return {node: len(deps) + 1 for node, (deps, _) in w.nodes.items()}


# --- hand-written asyncio ------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """Per-workload tables built once, outside the timed region, shared by every copy."""

    workload: Workload
    succ: Mapping[str, Sequence[str]]
    indegree: Mapping[str, int]
    roots: Sequence[str]

    @classmethod
    def of(cls, w: Workload) -> _Plan:
        indegree = {node: len(deps) for node, (deps, _) in w.nodes.items()}
        roots = [node for node, count in indegree.items() if count == 0]
        return cls(workload=w, succ=successors(w), indegree=indegree, roots=roots)


async def _run_dag(plan: _Plan, limit: asyncio.Semaphore | None) -> Outputs:
    """Run one copy of the DAG; each node's task starts its children once they are ready."""
    nodes = plan.workload.nodes
    remaining = dict(plan.indegree)
    outputs: Outputs = {}

    async with asyncio.TaskGroup() as tg:

        async def run_node(node: str) -> None:
            deps, duration = nodes[node]
            inputs = [outputs[dep] for dep in deps]
            if duration > 0:
                if limit is None:
                    await asyncio.sleep(duration)
                else:
                    async with limit:
                        await asyncio.sleep(duration)
            outputs[node] = len(inputs) + 1
            for child in plan.succ[node]:
                remaining[child] -= 1
                if remaining[child] == 0:
                    # Allowed while the group is open: this task is still one of its members.
                    tg.create_task(run_node(child))

        for root in plan.roots:
            tg.create_task(run_node(root))
    return outputs


async def _asyncio_many(
    plan: _Plan, count: int, workers: int | None
) -> tuple[float, list[Outputs]]:
    limit = asyncio.Semaphore(workers) if workers is not None else None
    start = time.perf_counter()
    if count == 1:
        results = [await _run_dag(plan, limit)]
    else:
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(_run_dag(plan, limit)) for _ in range(count)]
        results = [task.result() for task in tasks]
    return time.perf_counter() - start, results


def run_asyncio(w: Workload, workers: int | None = None) -> float:
    """Run `w` once with plain asyncio; return elapsed wall seconds.

    With `workers`, at most that many node sleeps run at once (a FIFO semaphore; trivial
    nodes never take a slot, and no critical-path priority is applied).
    """
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    elapsed, _ = asyncio.run(_asyncio_many(_Plan.of(w), 1, workers))
    return elapsed


def run_asyncio_many(w: Workload, count: int) -> float:
    """Run `count` independent copies of `w` concurrently with plain asyncio (W3)."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    elapsed, _ = asyncio.run(_asyncio_many(_Plan.of(w), count, None))
    return elapsed


# --- LangGraph -----------------------------------------------------------------------


def _merge_outputs(left: Outputs, right: Outputs) -> Outputs:
    """Reducer for the shared outputs channel, so parallel branches can all write to it."""
    return {**left, **right}


class _DagState(TypedDict):
    out: Annotated[Outputs, _merge_outputs]


class _NodeFn(Protocol):
    async def __call__(self, state: _DagState) -> dict[str, Outputs]: ...


@dataclass
class _LangGraphDag:
    """A workload compiled once to a LangGraph graph, with a per-node call counter."""

    workload: Workload
    graph: CompiledStateGraph[_DagState, None, _DagState, _DagState]
    calls: Counter[str] = field(default_factory=Counter)

    @property
    def recursion_limit(self) -> int:
        # Supersteps never exceed the node count (a chain takes one per node).
        return len(self.workload.nodes) + 10


def _make_node(node: str, deps: tuple[str, ...], duration: float, calls: Counter[str]) -> _NodeFn:
    async def run(state: _DagState) -> dict[str, Outputs]:
        calls[node] += 1
        outputs = state["out"]
        inputs = [outputs[dep] for dep in deps]
        if duration > 0:
            await asyncio.sleep(duration)
        return {"out": {node: len(inputs) + 1}}

    return run


def _compile_langgraph(w: Workload) -> _LangGraphDag:
    # LangGraph reserves ':' and '|' in node names; trace ids may contain anything.
    names = {node: f"n{i}" for i, node in enumerate(w.nodes)}
    calls: Counter[str] = Counter()
    builder = StateGraph(_DagState)
    for node, (deps, duration) in w.nodes.items():
        builder.add_node(names[node], _make_node(node, deps, duration, calls))
    has_children: set[str] = set()
    for node, (deps, _) in w.nodes.items():
        has_children.update(deps)
        if not deps:
            builder.add_edge(START, names[node])
        elif len(deps) == 1:
            builder.add_edge(names[deps[0]], names[node])
        else:
            # A list of sources is a barrier: the node waits for all of them.
            builder.add_edge([names[dep] for dep in deps], names[node])
    for node in w.nodes:
        if node not in has_children:
            builder.add_edge(names[node], END)
    return _LangGraphDag(workload=w, graph=builder.compile(), calls=calls)


_COMPILED: dict[int, _LangGraphDag] = {}


def _langgraph_dag(w: Workload) -> _LangGraphDag:
    """The compiled graph for `w`, built on first use and reused for every later run."""
    cached = _COMPILED.get(id(w))
    if cached is None or cached.workload is not w:
        cached = _compile_langgraph(w)
        _COMPILED[id(w)] = cached  # holds `w`, so its id is not reused while cached
    return cached


async def _invoke_all(
    dag: _LangGraphDag,
    graph: CompiledStateGraph[_DagState, None, _DagState, _DagState],
    count: int,
    workers: int | None,
) -> tuple[float, list[Outputs]]:
    configs: list[RunnableConfig] = []
    for i in range(count):
        config: RunnableConfig = {
            "recursion_limit": dag.recursion_limit,
            "configurable": {"thread_id": f"{dag.workload.name}-{i}"},
        }
        if workers is not None:
            config["max_concurrency"] = workers
        configs.append(config)
    start = time.perf_counter()
    if count == 1:
        states = [await graph.ainvoke({"out": {}}, configs[0])]
    else:
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(graph.ainvoke({"out": {}}, config)) for config in configs]
        states = [task.result() for task in tasks]
    elapsed = time.perf_counter() - start
    return elapsed, [state["out"] for state in states]


async def _langgraph_many(
    dag: _LangGraphDag, count: int, checkpointer: bool, workers: int | None = None
) -> tuple[float, list[Outputs]]:
    if not checkpointer:
        return await _invoke_all(dag, dag.graph, count, workers)
    with tempfile.TemporaryDirectory(prefix="counterpoint-bench-") as tmp:
        db_path = Path(tmp) / "checkpoints.sqlite"
        async with AsyncSqliteSaver.from_conn_string(str(db_path)) as saver:
            await saver.setup()
            graph = dag.graph.copy({"checkpointer": saver})
            return await _invoke_all(dag, graph, count, workers)


def run_langgraph(w: Workload, checkpointer: bool, *, workers: int | None = None) -> float:
    """Run `w` once as a LangGraph StateGraph; return elapsed wall seconds.

    With `checkpointer`, state is checkpointed after every superstep to a fresh SQLite
    file (AsyncSqliteSaver, LangGraph's default "async" durability). With `workers`,
    LangGraph's ``max_concurrency`` caps the nodes running at once within a superstep.
    """
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    elapsed, _ = asyncio.run(_langgraph_many(_langgraph_dag(w), 1, checkpointer, workers))
    return elapsed


def run_langgraph_many(w: Workload, count: int, checkpointer: bool) -> float:
    """Run `count` concurrent LangGraph invocations of `w` (one thread_id each) (W3)."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    elapsed, _ = asyncio.run(_langgraph_many(_langgraph_dag(w), count, checkpointer))
    return elapsed


# --- self-check ----------------------------------------------------------------------


def _check_outputs(label: str, w: Workload, runs: list[Outputs], count: int) -> None:
    expected = _expected_outputs(w)
    if len(runs) != count:
        raise AssertionError(f"{label}: {len(runs)} results for {count} workflows")
    for i, outputs in enumerate(runs):
        if outputs != expected:
            missing = sorted(set(expected) - set(outputs))[:5]
            raise AssertionError(f"{label}: workflow {i} outputs wrong (missing e.g. {missing})")


async def _checkpointed_state_matches(w: Workload) -> bool:
    """Run once with a checkpointer and confirm the stored final state holds every output."""
    dag = _langgraph_dag(w)
    with tempfile.TemporaryDirectory(prefix="counterpoint-bench-") as tmp:
        async with AsyncSqliteSaver.from_conn_string(str(Path(tmp) / "c.sqlite")) as saver:
            graph = dag.graph.copy({"checkpointer": saver})
            config: RunnableConfig = {
                "recursion_limit": dag.recursion_limit,
                "configurable": {"thread_id": "selfcheck"},
            }
            await graph.ainvoke({"out": {}}, config)
            snapshot = await graph.aget_state(config)
            stored: Outputs = snapshot.values["out"]
            return stored == _expected_outputs(w) and not snapshot.next


def selfcheck() -> None:
    """Verify every runner executes each node exactly once with the right output.

    Raises AssertionError on the first discrepancy; prints one line per check.
    """
    cases = [chain(50), fanout(20, sleep=0.001), diamond(0.001), layered(120, seed=7)]
    for w in cases:
        _, runs = asyncio.run(_asyncio_many(_Plan.of(w), 1, None))
        _check_outputs(f"asyncio {w.name}", w, runs, 1)
        _, runs = asyncio.run(_asyncio_many(_Plan.of(w), 1, 3))
        _check_outputs(f"asyncio(workers=3) {w.name}", w, runs, 1)
        _, runs = asyncio.run(_asyncio_many(_Plan.of(w), 4, None))
        _check_outputs(f"asyncio x4 {w.name}", w, runs, 4)

        dag = _langgraph_dag(w)
        for checkpointer in (False, True):
            for count in (1, 3):
                dag.calls.clear()
                _, runs = asyncio.run(_langgraph_many(dag, count, checkpointer))
                label = f"langgraph(checkpointer={checkpointer}) x{count} {w.name}"
                _check_outputs(label, w, runs, count)
                if dag.calls != Counter(dict.fromkeys(w.nodes, count)):
                    extra = [n for n, c in dag.calls.items() if c != count][:5]
                    raise AssertionError(f"{label}: nodes not run exactly {count}x: {extra}")
        if not asyncio.run(_checkpointed_state_matches(w)):
            raise AssertionError(f"langgraph checkpoint of {w.name} lacks the final outputs")
        print(f"selfcheck ok: {w.name} ({len(w)} nodes)")


if __name__ == "__main__":
    selfcheck()
