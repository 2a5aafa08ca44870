"""Ready nodes of equal rank start in the order they were added."""

from __future__ import annotations

import counterpoint as cp
from counterpoint.events import EventKind


async def mark(name: str) -> str:
    return name


def test_ties_start_in_insertion_order() -> None:
    """Regression: roots of equal rank started in reverse insertion order."""
    g = cp.Graph("ties")
    names = ["c", "a", "d", "b", "e"]
    for name in names:
        g.add(name, mark, name=name, estimate=1.0)
    store = cp.MemoryStore()
    result = cp.run_sync(g, store=store, options=cp.RunOptions(max_concurrency=1))
    assert result.ok
    started = [e.node for e in store.events(result.run_id) if e.kind is EventKind.NODE_STARTED]
    assert started == names


def test_higher_rank_goes_first_whatever_the_order() -> None:
    g = cp.Graph("ranks")
    g.add("short", mark, name="short", estimate=1.0)
    g.add("long", mark, name="long", estimate=5.0)
    store = cp.MemoryStore()
    result = cp.run_sync(g, store=store, options=cp.RunOptions(max_concurrency=1))
    started = [e.node for e in store.events(result.run_id) if e.kind is EventKind.NODE_STARTED]
    assert started == ["long", "short"]
