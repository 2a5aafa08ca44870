"""Which topology a goal's plan calls for, from its dependency structure (AdaptOrch).

:func:`choose_topology` measures a plan in O(V+E) (subtasks, width: the most subtasks at
one depth, depth: the longest chain, the critical path's share of the subtasks, and the
number of independent components) and names one of single agent, parallel fan-out and
synthesis, sequential chain, or hierarchical sub-goals, with the reason. Deterministic:
the same plan gives the same choice. A goal run records it as a ``topology_chosen``
event; its execution is the same DAG whatever the choice (per-topology execution is
not built yet).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from .plan import Subtask


class Shape(enum.StrEnum):
    SINGLE = "single"
    PARALLEL = "parallel"
    SEQUENTIAL = "sequential"
    HIERARCHICAL = "hierarchical"


@dataclass(frozen=True, kw_only=True, slots=True)
class Measures:
    subtasks: int
    width: int
    """The most subtasks at one depth (that can run at once)."""
    depth: int
    """Subtasks on the longest dependency chain."""
    critical_share: float
    """``depth / subtasks``: 1.0 for a chain."""
    components: int
    """Groups of subtasks with no dependency between groups."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TopologyChoice:
    shape: Shape
    measures: Measures
    why: str


def measure(subtasks: Sequence[Subtask]) -> Measures:
    """The plan's measures (needs naming no subtask of the plan are ignored)."""
    ids = {s.id for s in subtasks}
    level: dict[str, int] = {}
    parent = {s.id: s.id for s in subtasks}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for s in subtasks:  # plans list a subtask after what it needs (check_plan)
        needs = [n for n in s.needs if n in ids]
        level[s.id] = 1 + max((level.get(n, 1) for n in needs), default=0)
        for n in needs:
            parent[root(n)] = root(s.id)
    count = len(subtasks)
    depth = max(level.values(), default=0)
    per_level: dict[int, int] = {}
    for value in level.values():
        per_level[value] = per_level.get(value, 0) + 1
    return Measures(subtasks=count, width=max(per_level.values(), default=0), depth=depth,
                    critical_share=depth / count if count else 0.0,
                    components=len({root(s.id) for s in subtasks}))


def choose_topology(subtasks: Sequence[Subtask]) -> TopologyChoice:
    """The topology for a plan of ``subtasks`` (see the module docstring)."""
    m = measure(subtasks)
    if m.subtasks <= 1:
        return TopologyChoice(shape=Shape.SINGLE, measures=m, why="one subtask")
    if m.width == 1:
        return TopologyChoice(shape=Shape.SEQUENTIAL, measures=m,
                              why=f"a chain of {m.depth}: each step needs the one before")
    if m.components > 1 and m.depth > 1:
        return TopologyChoice(shape=Shape.HIERARCHICAL, measures=m,
                              why=f"{m.components} independent sub-goals with inner "
                                  f"dependencies (depth {m.depth})")
    if m.critical_share >= 0.75:
        return TopologyChoice(shape=Shape.SEQUENTIAL, measures=m,
                              why=f"the critical path holds {m.critical_share:.0%} of the "
                                  "subtasks")
    return TopologyChoice(shape=Shape.PARALLEL, measures=m,
                          why=f"{m.width} subtasks can run at once over depth {m.depth}: "
                              "fan out, then synthesize")
