"""Concurrency and resource limits bind a run together with its sub-runs (scheduler.capacity)."""

from __future__ import annotations

import asyncio

import counterpoint as cp


class Peak:
    """Counts the steps inside it at once; keeps the most it saw."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0

    async def hold(self, value: int = 0) -> int:
        self.now += 1
        self.most = max(self.most, self.now)
        for _ in range(5):  # let every other ready step start meanwhile, if it may
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        self.now -= 1
        return value


def test_a_sub_run_shares_its_parents_named_resource_limit() -> None:
    """Regression: the parent and its sub-graph each held the one unit of "db"."""
    peak = Peak()
    inner = cp.Graph("inner")
    inner.add("b", peak.hold, resources={"db": 1})
    outer = cp.Graph("outer")
    outer.add("a", peak.hold, resources={"db": 1})
    outer.add("sub", inner)
    result = cp.run_sync(outer, store="memory", options=cp.RunOptions(limits={"db": 1}))
    assert result.ok, result.status
    assert peak.most == 1


def test_max_concurrency_bounds_the_run_with_its_sub_runs() -> None:
    peak = Peak()
    inner = cp.Graph("inner")
    for i in range(4):
        inner.add(f"i{i}", peak.hold, value=i)
    outer = cp.Graph("outer")
    outer.add("x", peak.hold)
    outer.add("y", peak.hold)
    outer.add("sub", inner)
    result = cp.run_sync(outer, store="memory", options=cp.RunOptions(max_concurrency=2))
    assert result.ok, result.status
    assert peak.most == 2  # the graph node itself holds no slot while its sub-run works


def test_a_sub_graph_runs_under_max_concurrency_one() -> None:
    """The graph node waiting for its sub-run must not take the only slot from it."""
    peak = Peak()
    inner = cp.Graph("inner")
    first = inner.add("p", peak.hold, value=1)
    inner.add("q", peak.hold, value=first)
    outer = cp.Graph("outer")
    outer.add("sub", inner)
    outer.add("z", peak.hold)
    result = cp.run_sync(outer, store="memory", options=cp.RunOptions(max_concurrency=1))
    assert result.ok, result.status
    assert peak.most == 1
