"""A layered layout of a DAG: which row each node sits in and its place in the row.

Pure and deterministic (same input, same layout). The classic three phases, kept
small:

1. **Layering** by longest path: a node sits one row below its lowest dependency, so
   every edge points down (``layer[source] < layer[target]``).
2. **Long edges** get a :class:`Bend` in every row they cross, so that no edge jumps
   over a row and each can be drawn between neighbouring rows.
3. **Crossing reduction** by barycentres: rows are re-ordered by the mean place of
   their neighbours in the row above, then below, for a few sweeps; the ordering with
   the fewest crossings seen is kept (so the result is never worse than the
   declaration order it starts from).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

SWEEPS = 8
"""Down-and-up barycentre sweeps: more rarely helps on the graphs people draw."""


@dataclass(frozen=True, slots=True)
class Bend:
    """Where a long edge crosses a row: the ``edge``-th edge, in row ``layer``."""

    edge: int
    layer: int


Slot = str | Bend
"""What a row holds: a node, or a bend of a long edge."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Rows of slots, top to bottom, and each edge's path through them."""

    rows: tuple[tuple[Slot, ...], ...]
    layer: dict[str, int]
    """Each node's row."""
    routes: tuple[tuple[Slot, ...], ...]
    """For each edge, in the order given: its source, its bends, its target."""

    def crossings(self) -> int:
        """Edge crossings between neighbouring rows."""
        return _all_crossings(self.rows, _links(self.routes))


def layered(nodes: Sequence[str], edges: Sequence[tuple[str, str]], *,
            sweeps: int = SWEEPS) -> Layout:
    """Lay out ``nodes`` (in this order) joined by ``edges`` (source, target), with
    ``sweeps`` rounds of crossing reduction (0: rows in declaration order).

    Raises :class:`ValueError` on a cycle or an edge naming an unknown node; duplicate
    edges are drawn once each.
    """
    layer = _layers(nodes, edges)
    depth = max(layer.values(), default=-1) + 1
    # slots are numbered: nodes first, then bends; the sweeps work on numbers only
    slots: list[Slot] = list(nodes)
    number = {node: i for i, node in enumerate(nodes)}
    rows: list[list[int]] = [[] for _ in range(depth)]
    for node in nodes:
        rows[layer[node]].append(number[node])
    routes: list[tuple[Slot, ...]] = []
    up: list[list[int]] = [[] for _ in slots]
    down: list[list[int]] = [[] for _ in slots]
    for index, (source, target) in enumerate(edges):
        bends = [Bend(index, row) for row in range(layer[source] + 1, layer[target])]
        path = [number[source]]
        for bend in bends:
            slots.append(bend)
            up.append([])
            down.append([])
            path.append(len(slots) - 1)
            rows[bend.layer].append(len(slots) - 1)
        path.append(number[target])
        for a, b in itertools.pairwise(path):
            down[a].append(b)
            up[b].append(a)
        routes.append((source, *bends, target))
    best = [list(row) for row in rows]
    fewest = _count(best, down, len(slots))
    place = [0] * len(slots)  # each slot's index in its row; links join neighbouring rows
    for row in rows:
        for i, slot in enumerate(row):
            place[slot] = i
    for _ in range(sweeps):
        if fewest == 0:
            break
        for i in range(1, depth):  # down: each row by its sources above
            rows[i] = _by_barycentre(rows[i], up, place)
        for i in range(depth - 2, -1, -1):  # up: each row by its targets below
            rows[i] = _by_barycentre(rows[i], down, place)
        count = _count(rows, down, len(slots))
        if count < fewest:
            fewest, best = count, [list(row) for row in rows]
    return Layout(rows=tuple(tuple(slots[i] for i in row) for row in best), layer=layer,
                  routes=tuple(routes))


def _layers(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, int]:
    known = set(nodes)
    preds: dict[str, list[str]] = {n: [] for n in nodes}
    succs: dict[str, list[str]] = {n: [] for n in nodes}
    for source, target in edges:
        if source not in known or target not in known:
            missing = source if source not in known else target
            raise ValueError(f"edge {source!r} -> {target!r} names an unknown node {missing!r}")
        preds[target].append(source)
        succs[source].append(target)
    unmet = {n: len(preds[n]) for n in nodes}
    layer = {n: 0 for n in nodes}
    ready = [n for n in nodes if unmet[n] == 0]
    seen = 0
    while ready:  # Kahn's order: each node is placed once its sources all are
        node = ready.pop()
        seen += 1
        for succ in succs[node]:
            layer[succ] = max(layer[succ], layer[node] + 1)
            unmet[succ] -= 1
            if unmet[succ] == 0:
                ready.append(succ)
    if seen != len(known):
        stuck = [n for n in nodes if unmet[n] > 0]
        raise ValueError(f"the graph has a cycle through {', '.join(map(repr, stuck[:5]))}")
    return layer


def _links(routes: Sequence[Sequence[Slot]]) -> list[tuple[Slot, Slot]]:
    return [(route[i], route[i + 1]) for route in routes for i in range(len(route) - 1)]


def _by_barycentre(row: list[int], neighbours: list[list[int]], place: list[int]
                   ) -> list[int]:
    """``row`` ordered by the mean place of each slot's neighbours in the next row; the
    new places are written to ``place``."""
    keyed: list[tuple[float, int, int]] = []
    for index, slot in enumerate(row):
        near = neighbours[slot]
        # a slot with no neighbour there keeps its place
        keyed.append((sum(place[n] for n in near) / len(near) if near else float(index),
                      index, slot))
    keyed.sort()
    ordered = [slot for _, _, slot in keyed]
    for i, slot in enumerate(ordered):
        place[slot] = i
    return ordered


def _count(rows: Sequence[Sequence[int]], down: list[list[int]], size: int) -> int:
    place = [0] * size
    for row in rows:
        for i, slot in enumerate(row):
            place[slot] = i
    crossings = 0
    for row in rows[:-1]:
        pairs = [(place[a], place[b]) for a in row for b in down[a]]
        crossings += _inversions(pairs)
    return crossings


def _all_crossings(rows: Sequence[Sequence[Slot]], links: Sequence[tuple[Slot, Slot]]) -> int:
    number: dict[Slot, int] = {}
    numbered = [[number.setdefault(slot, len(number)) for slot in row] for row in rows]
    down: list[list[int]] = [[] for _ in number]
    for a, b in links:
        down[number[a]].append(number[b])
    return _count(numbered, down, len(number))


def _inversions(pairs: list[tuple[int, int]]) -> int:
    """Pairs of links that cross: (a1 < a2 and b1 > b2), counted with a Fenwick tree."""
    pairs.sort()
    size = max((b for _, b in pairs), default=0) + 2
    tree = [0] * size
    crossings = 0
    for seen, (_, b) in enumerate(pairs):
        i = b + 1
        below = 0
        while i > 0:  # links seen so far ending at or left of b
            below += tree[i]
            i -= i & -i
        crossings += seen - below
        i = b + 1
        while i < size:
            tree[i] += 1
            i += i & -i
    return crossings
