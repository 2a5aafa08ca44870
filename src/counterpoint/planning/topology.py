"""Which topology a goal's plan calls for, from its dependency structure (AdaptOrch).

:func:`choose_topology` measures a plan in O(V+E) (subtasks, width: the most subtasks at
one depth, depth: the longest chain, the critical path's share of the subtasks, and the
number of independent components) and names one of single agent, parallel fan-out and
synthesis, sequential chain, or hierarchical sub-goals, with the reason. Deterministic:
the same plan gives the same choice. :func:`lay_out` turns the plan into the subtasks a
goal run executes in that shape:

- single agent: one subtask, the whole goal, done by one worker with the plan's steps
  as its guide;
- parallel fan-out and synthesis: the plan as it is, each subtask waiting only for what
  it needs (independent ones run at once), and the answer synthesizes them;
- sequential chain: every subtask also waits for the one before it, in plan order, and
  gets its result;
- hierarchical sub-goals: one subtask per independent group of the plan (a sub-goal),
  done by one worker who follows the group's steps in order; the sub-goals run at once.

A goal run records the shape, why, and whether it was forced (``Limits.topology``) as a
``topology_chosen`` event before it adds the nodes, so the log's nodes show the shape.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .plan import Subtask


class Shape(enum.StrEnum):
    """How a goal's plan is executed (see the module docstring)."""

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


TopologyOption = Literal["auto", "single", "parallel", "sequential", "hierarchical"]
"""``Limits.topology``: ``auto`` lets :func:`choose_topology` decide; a shape forces it."""
TOPOLOGIES: tuple[str, ...] = ("auto", *(s.value for s in Shape))


@dataclass(frozen=True, kw_only=True, slots=True)
class TopologyChoice:
    shape: Shape
    measures: Measures
    why: str
    forced: bool = False
    """Chosen by ``Limits.topology`` rather than by the plan's measures."""


def measure(subtasks: Sequence[Subtask]) -> Measures:
    """The plan's measures (needs naming no subtask of the plan are ignored)."""
    level, groups = _levels(subtasks)
    count = len(subtasks)
    depth = max(level.values(), default=0)
    per_level: dict[int, int] = {}
    for value in level.values():
        per_level[value] = per_level.get(value, 0) + 1
    return Measures(subtasks=count, width=max(per_level.values(), default=0), depth=depth,
                    critical_share=depth / count if count else 0.0,
                    components=len(groups))


def _levels(subtasks: Sequence[Subtask]) -> tuple[dict[str, int], list[list[str]]]:
    """Each subtask's depth, and the independent groups (ids in plan order, groups in
    the order of their first subtask)."""
    ids = {s.id for s in subtasks}
    level: dict[str, int] = {}
    parent = {s.id: s.id for s in subtasks}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for s in _topological(subtasks):  # (a plan may list one before what it needs)
        needs = [n for n in s.needs if n in ids]
        level[s.id] = 1 + max((level.get(n, 1) for n in needs), default=0)
        for n in needs:
            parent[root(n)] = root(s.id)
    groups: dict[str, list[str]] = {}
    for s in subtasks:
        groups.setdefault(root(s.id), []).append(s.id)
    return level, list(groups.values())


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


def topology_for(subtasks: Sequence[Subtask], option: str = "auto") -> TopologyChoice:
    """:func:`choose_topology`, unless ``option`` forces a shape."""
    if option == "auto":
        return choose_topology(subtasks)
    shape = Shape(option)
    return TopologyChoice(shape=shape, measures=measure(subtasks), forced=True,
                          why=f"forced by Limits.topology={option!r}")


def lay_out(subtasks: Sequence[Subtask], shape: Shape, goal: str) -> list[Subtask]:
    """The subtasks a goal run executes for a plan of ``subtasks`` in ``shape`` (see the
    module docstring). Pure and deterministic: a resumed run lays out the same nodes."""
    plan = list(subtasks)
    if shape is Shape.PARALLEL or len(plan) <= 1:
        return plan
    if shape is Shape.SEQUENTIAL:
        chained = []
        ordered = _topological(plan)
        for before, subtask in zip([None, *ordered], ordered, strict=False):
            needs = list(subtask.needs)
            if before is not None and before.id not in needs:
                needs.append(before.id)
            chained.append(subtask.model_copy(update={"needs": needs}))
        return chained
    if shape is Shape.SINGLE:
        return [_merged("t1", f"the whole goal: {goal}", plan)]
    by_id = {s.id: s for s in plan}
    return [_merged(f"t{k}", f"sub-goal {k} of the goal", [by_id[i] for i in group])
            for k, group in enumerate(_levels(plan)[1], start=1)]


def _topological(plan: Sequence[Subtask]) -> list[Subtask]:
    """``plan`` in an order where each subtask comes after what it needs (plan order
    among those that are ready: a plan may list a subtask before one it needs)."""
    ids = {s.id for s in plan}
    done: set[str] = set()
    ordered: list[Subtask] = []
    while len(ordered) < len(plan):
        ready = [s for s in plan if s.id not in done and
                 all(n in done or n not in ids for n in s.needs)]
        if not ready:  # a cycle (check_plan refuses them): keep plan order for the rest
            ready = [s for s in plan if s.id not in done]
        ordered.append(ready[0])
        done.add(ready[0].id)
    return ordered


def _merged(sid: str, what: str, steps: Sequence[Subtask]) -> Subtask:
    """One subtask doing ``steps`` in order, by the worker most of them name (the first
    one named, on a tie)."""
    counts = Counter(s.worker for s in steps)
    worker = max(counts, key=lambda w: (counts[w], -[s.worker for s in steps].index(w)))
    listed = "; ".join(f"({n}) {s.task}" for n, s in enumerate(steps, start=1))
    expected = "; ".join(s.expected for s in steps if s.expected)
    return Subtask(id=sid, task=f"Do {what}, in these steps: {listed}", worker=worker,
                   needs=[], expected=expected)
