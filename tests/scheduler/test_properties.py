"""Scheduler invariants over random DAGs (Hypothesis), with and without live edits.

For every generated graph: each node of a successful run runs exactly once, no
node starts before all of its inputs exist, the makespan is at least the
critical path, and replaying the run's log rebuilds the same final state.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import counterpoint as cp
from counterpoint.api import replay
from counterpoint.events import EventKind
from counterpoint.state import NodeState, RunState


@dataclass
class Trace:
    """What the steps saw: a global order of start and end marks."""

    clock: itertools.count[int] = field(default_factory=itertools.count)
    starts: dict[str, int] = field(default_factory=dict)
    ends: dict[str, int] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)


TRACE = Trace()
_ENDINGS = {EventKind.NODE_SUCCEEDED, EventKind.NODE_CANCELLED, EventKind.NODE_SKIPPED,
            EventKind.NODE_BLOCKED}


async def node_step(name: str, delay: float, **inputs: int) -> int:
    TRACE.runs[name] = TRACE.runs.get(name, 0) + 1
    TRACE.starts[name] = next(TRACE.clock)
    if delay:
        await asyncio.sleep(delay)
    TRACE.ends[name] = next(TRACE.clock)
    return 1 + sum(inputs.values())


async def growing_step(ctx: cp.NodeContext, name: str, delay: float, plan: list[list[int]],
                       **inputs: int) -> int:
    """Adds one node per entry of ``plan`` (its dependencies, as indexes of existing nodes)."""
    value = await node_step(name, delay, **inputs)
    edit = cp.Edit("grow")
    existing = sorted(ctx.nodes())
    for k, deps in enumerate(plan):
        picks = {f"d{j}": cp.ref(existing[i % len(existing)]) for j, i in enumerate(deps)}
        edit.add(f"{name}_g{k}", node_step, name=f"{name}_g{k}", delay=0.0, **picks)
    ctx.apply(edit)
    return value


@st.composite
def dags(draw: st.DrawFn, max_nodes: int = 18) -> tuple[cp.Graph, int | None]:
    n = draw(st.integers(1, max_nodes))
    g = cp.Graph("prop")
    grow_at = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    for i in range(n):
        deps = draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        delay = draw(st.sampled_from([0.0, 0.0, 0.001, 0.003]))
        inputs: dict[str, Any] = {f"d{j}": cp.ref(f"n{d}") for j, d in enumerate(deps)}
        if i == grow_at:
            plan = draw(st.lists(st.lists(st.integers(0, 40), max_size=3, unique=True),
                                 min_size=1, max_size=4))
            g.add(f"n{i}", growing_step, name=f"n{i}", delay=delay, plan=plan, **inputs)
        else:
            g.add(f"n{i}", node_step, name=f"n{i}", delay=delay, **inputs)
    limit = draw(st.one_of(st.none(), st.integers(1, 4)))
    return g, limit


def check_invariants(result: cp.RunResult) -> None:
    state = result.state
    assert result.ok, result.status
    assert set(TRACE.runs) == set(state.nodes)
    assert all(count == 1 for count in TRACE.runs.values()), TRACE.runs
    for node_id, ns in state.nodes.items():
        for dep in ns.spec.deps:
            assert TRACE.ends[dep] < TRACE.starts[node_id], (dep, node_id)
    metrics = result.metrics
    assert metrics.makespan + 1e-9 >= metrics.critical_path


@st.composite
def wide_dags(draw: st.DrawFn) -> tuple[cp.Graph, int | None]:
    """Layers of up to 40 nodes, each depending on up to 3 of the layer before: the wide
    dispatches that log their starts after the first steps, and long hand-over chains."""
    g = cp.Graph("wide")
    previous: list[str] = []
    for layer in range(draw(st.integers(1, 4))):
        current: list[str] = []
        for i in range(draw(st.integers(1, 40))):
            name = f"l{layer}n{i}"
            deps = draw(st.lists(st.sampled_from(previous), max_size=3, unique=True)) \
                if previous else []
            delay = draw(st.sampled_from([0.0, 0.0, 0.0005, 0.002]))
            g.add(name, node_step, name=name, delay=delay,
                  **{f"d{j}": cp.ref(d) for j, d in enumerate(deps)})
            current.append(name)
        previous = current
    return g, draw(st.one_of(st.none(), st.none(), st.integers(1, 20)))


def run_and_check(graph: cp.Graph, limit: int | None) -> None:
    global TRACE
    TRACE = Trace()
    store = cp.MemoryStore()
    result = cp.run_sync(graph, store=store, options=cp.RunOptions(max_concurrency=limit))
    check_invariants(result)
    events = store.events(result.run_id)
    # appended in the order of their numbers: what a crash keeps is always a prefix
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    started = {e.node for e in events if e.kind is EventKind.NODE_STARTED}
    assert started == set(result.state.nodes)

    # every node ends exactly once in the log
    endings = [e.node for e in events if e.kind in _ENDINGS
               or (e.kind is EventKind.NODE_FAILED and (e.data or {}).get("final"))]
    assert sorted(endings) == sorted(result.state.nodes)  # type: ignore[type-var]

    # the log alone rebuilds the same final state (the state is a projection of the log)
    topo = graph.validate()
    rebuilt = RunState.new(result.run_id, graph.name, [graph.nodes[n] for n in topo.order])
    replay(rebuilt, events, graph)
    assert rebuilt.status is result.status
    def seen(nodes: dict[cp.NodeId, NodeState]) -> dict[cp.NodeId, tuple[object, ...]]:
        return {k: (v.status, v.attempt, v.output, v.ready_at, v.first_ready_at, v.started_at,
                    v.finished_at, v.run_time) for k, v in nodes.items()}

    assert seen(rebuilt.nodes) == seen(result.state.nodes)  # times included
    assert rebuilt.version == result.state.version


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(dags())
def test_random_dags_run_every_node_once_in_dependency_order(case: tuple[cp.Graph, int | None]
                                                             ) -> None:
    run_and_check(*case)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(wide_dags())
def test_wide_random_dags_run_every_node_once_and_log_in_order(
        case: tuple[cp.Graph, int | None]) -> None:
    run_and_check(*case)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(max_nodes=10), st.integers(0, 2**16))
def test_dispatch_respects_dependencies_under_resource_limits(
        case: tuple[cp.Graph, int | None], seed: int) -> None:
    graph, _ = case
    global TRACE
    TRACE = Trace()
    limited = cp.Graph("limited")
    for node_id, spec in graph.nodes.items():
        tag = {"slot": 1} if (seed >> (int(node_id[1:]) % 16)) & 1 else None
        limited.add(node_id, spec.fn, inputs=dict(spec.inputs), after=spec.after,
                    resources=tag)  # type: ignore[arg-type]
    held = any(s.policy.resources for s in limited.nodes.values())  # else refused: it
    result = cp.run_sync(limited, store="memory",  # would limit nothing (check_limits)
                         options=cp.RunOptions(limits={"slot": 1} if held else {}))
    check_invariants(result)
    running: list[tuple[int, int]] = [
        (TRACE.starts[n], TRACE.ends[n]) for n, s in limited.nodes.items()
        if s.policy.resources]
    running.sort()
    for (_, end), (start, _) in itertools.pairwise(running):
        assert end < start  # at most one holder of the "slot" resource at a time
