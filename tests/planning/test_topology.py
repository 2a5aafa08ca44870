"""Plans of each shape get their topology, deterministically."""

from __future__ import annotations

from counterpoint.planning.plan import Subtask
from counterpoint.planning.topology import Shape, choose_topology


def _plan(needs: dict[str, list[str]]) -> list[Subtask]:
    return [Subtask(id=i, task=f"do {i}", worker="writer", needs=n) for i, n in needs.items()]


def test_each_shape() -> None:
    assert choose_topology(_plan({"t1": []})).shape is Shape.SINGLE
    chain = choose_topology(_plan({"t1": [], "t2": ["t1"], "t3": ["t2"]}))
    assert chain.shape is Shape.SEQUENTIAL and chain.measures.critical_share == 1.0
    fan = choose_topology(_plan({"t1": [], "t2": [], "t3": [], "t4": ["t1", "t2", "t3"]}))
    assert fan.shape is Shape.PARALLEL and fan.measures.width == 3
    two = choose_topology(_plan({"t1": [], "t2": ["t1"], "t3": [], "t4": ["t3"]}))
    assert two.shape is Shape.HIERARCHICAL and two.measures.components == 2
    assert choose_topology(_plan({"t1": [], "t2": ["t1"], "t3": [], "t4": ["t3"]})) == two
