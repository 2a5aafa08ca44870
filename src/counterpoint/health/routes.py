"""A cost-weighted graph of alternatives and its cheapest healthy path (Dijkstra).

Nodes are names; an edge has a cost and, if it stands for a call, the health target it
uses (``model:NAME``, ``tool:NAME``). :meth:`RouteGraph.cheapest` finds the cheapest path
between two nodes over the edges a predicate allows: a failed or open-circuit edge
weighs infinity, that is, it is left out (the Self-Healing Router's recomputation).
Ties go to the path whose edges were added first, so the answer is deterministic.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from ..checks import number


@dataclass(frozen=True, kw_only=True, slots=True)
class Edge:
    """One way on: from ``source`` to ``target`` at ``cost``, using ``uses`` if a call."""

    source: str
    target: str
    cost: float
    uses: str | None = None
    """The health target this edge calls (``None``: a step that calls nothing)."""
    order: int = 0
    """Position in the graph (ties go to the edge added first)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Route:
    """A path: its edges in order and their summed cost."""

    edges: tuple[Edge, ...]
    cost: float

    @property
    def nodes(self) -> tuple[str, ...]:
        if not self.edges:
            return ()
        return (self.edges[0].source, *(e.target for e in self.edges))

    @property
    def calls(self) -> tuple[str, ...]:
        """The health targets the path calls, in order."""
        return tuple(e.uses for e in self.edges if e.uses is not None)


class RouteGraph:
    """A directed graph of alternatives with non-negative edge costs."""

    def __init__(self) -> None:
        self._out: dict[str, list[Edge]] = {}
        self._count = itertools.count()

    def add(self, source: str, target: str, cost: float, *, uses: str | None = None) -> Edge:
        number(cost, f"route {source} -> {target}: cost")
        edge = Edge(source=source, target=target, cost=cost, uses=uses,
                    order=next(self._count))
        self._out.setdefault(source, []).append(edge)
        self._out.setdefault(target, [])
        return edge

    @property
    def edges(self) -> list[Edge]:
        return sorted((e for out in self._out.values() for e in out), key=lambda e: e.order)

    def cheapest(self, source: str, target: str,
                 allowed: Callable[[Edge], bool] = lambda _: True) -> Route | None:
        """The cheapest path from ``source`` to ``target`` over allowed edges (the others
        weigh infinity), or ``None`` if there is none. Bounded: each node is settled once."""
        # (cost, tie-break by edge order along the path, node, edges so far)
        queue: list[tuple[float, tuple[int, ...], str, tuple[Edge, ...]]] = [
            (0.0, (), source, ())]
        settled: set[str] = set()
        while queue:
            cost, orders, node, path = heapq.heappop(queue)
            if node in settled:
                continue
            settled.add(node)
            if node == target:
                return Route(edges=path, cost=cost)
            for edge in self._out.get(node, ()):
                if edge.target not in settled and allowed(edge):
                    heapq.heappush(queue, (cost + edge.cost, (*orders, edge.order),
                                           edge.target, (*path, edge)))
        return None
