"""The breaker's states on a manual clock, and the cheapest healthy path (a property)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from counterpoint.errors import UserError
from counterpoint.health import Breaker, BreakerOptions, BreakerState, RouteGraph
from counterpoint.testing import ManualClock


def test_error_rate_opens_then_a_failed_probe_reopens() -> None:
    clock = ManualClock()
    breaker = Breaker("tool:t", BreakerOptions(failures=5, error_rate=0.5, window=4,
                                               min_calls=4, open_for=10.0), clock)
    for ok in (True, False, True):
        breaker.succeeded() if ok else breaker.failed("boom")
    change = breaker.failed("boom")
    assert change is not None and change.after is BreakerState.OPEN
    assert breaker.acquire() == (False, None)
    clock.advance(10.0)
    allowed, change = breaker.acquire()
    assert allowed and change is not None and change.after is BreakerState.HALF_OPEN
    assert breaker.acquire()[0] is False  # one probe at a time
    change = breaker.failed("still down")
    assert change is not None and change.after is BreakerState.OPEN


def test_slow_calls_open_it() -> None:
    breaker = Breaker("model:m", BreakerOptions(slow_call=1.0, window=2, min_calls=2),
                      ManualClock())
    breaker.succeeded(2.0)
    change = breaker.succeeded(3.0)
    assert change is not None and "longer than 1s" in change.why


def test_bad_options_are_a_clear_error() -> None:
    with pytest.raises(UserError, match="failures must be >= 1"):
        BreakerOptions(failures=0)


edges = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 20),
                           st.booleans()), max_size=25)


def _paths(graph: RouteGraph, node: str, goal: str, seen: tuple[str, ...]
           ) -> list[tuple[float, bool]]:
    if node == goal:
        return [(0.0, False)]
    found = []
    for edge in graph.edges:
        if edge.source == node and edge.target not in seen:
            for cost, opened in _paths(graph, edge.target, goal, (*seen, edge.target)):
                found.append((cost + edge.cost, opened or edge.uses == "open"))
    return found


@given(edges)
def test_the_chosen_path_is_the_cheapest_healthy_one_and_uses_no_open_edge(
        spec: list[tuple[int, int, int, bool]]) -> None:
    graph = RouteGraph()
    for a, b, cost, is_open in spec:
        graph.add(f"n{a}", f"n{b}", float(cost), uses="open" if is_open else "ok")
    graph.add("n0", "n0", 0.0)
    route = graph.cheapest("n0", "n5", lambda e: e.uses != "open")
    healthy = [c for c, opened in _paths(graph, "n0", "n5", ("n0",)) if not opened]
    if route is None:
        assert not healthy
    else:
        assert "open" not in route.calls
        assert route.cost == min(healthy)
        assert route.cost == sum(e.cost for e in route.edges)
