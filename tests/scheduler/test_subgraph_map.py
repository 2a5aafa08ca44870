"""``Graph.map`` over a sub-graph: one nested run per item, joined into a list."""

from __future__ import annotations

import pytest

import counterpoint as cp
from counterpoint.state import NodeStatus


async def items() -> list[int]:
    return [1, 2, 3]


async def nothing() -> list[int]:
    return []


async def multiply(a: int, b: int) -> int:
    return a * b


async def total(values: list[int]) -> int:
    return sum(values)


async def fail_on_two(a: int, b: int) -> int:
    if a == 2:
        raise ValueError("two")
    return a * b


def scaler(step: object = multiply) -> cp.Graph:
    sub = cp.Graph("scale")
    x = sub.input("x", int)
    k = sub.input("k", int)
    sub.output(sub.add("scaled", step, a=x, b=k))  # type: ignore[arg-type]
    return sub


def test_each_item_runs_the_subgraph_and_the_outputs_join_in_order(store: cp.RunStore) -> None:
    g = cp.Graph("outer")
    m = g.map("m", scaler(), over=g.add("items", items), k=10)
    g.add("total", total, values=m)
    result = cp.run_sync(g, store=store)
    assert result.ok
    assert result["m"] == [10, 20, 30]
    assert [result[f"m[{i}]"] for i in range(3)] == [10, 20, 30]
    assert result["total"] == 60
    for i in range(3):  # sub-run ids are <run>/<node>, the node being the map's item
        child = store.run(cp.RunId(f"{result.run_id}/m[{i}]"))
        assert child.status == "succeeded" and child.parent == result.run_id
        assert child.graph == "scale"


def test_an_empty_list_joins_to_an_empty_list() -> None:
    g = cp.Graph("outer")
    g.map("m", scaler(), over=g.add("none", nothing), k=10)
    result = cp.run_sync(g, store="memory")
    assert result.ok and result["m"] == []


def test_a_failing_item_fails_the_map() -> None:
    g = cp.Graph("outer")
    g.map("m", scaler(fail_on_two), over=g.add("items", items), k=10)
    result = cp.run_sync(g, store="memory")
    assert not result.ok
    assert result.nodes["m[0]"].status is NodeStatus.SUCCEEDED
    assert result.nodes["m[1]"].status is NodeStatus.FAILED
    assert "sub-graph run" in (result.nodes["m[1]"].error or {})["message"]
    assert result.nodes["m"].status is NodeStatus.BLOCKED


@pytest.mark.parametrize("item", ["x", "k"])
def test_the_item_goes_to_the_named_input(item: str) -> None:
    g = cp.Graph("outer")
    other = "k" if item == "x" else "x"
    g.map("m", scaler(), over=g.add("items", items), item=item, **{other: 3})
    assert cp.run_sync(g, store="memory")["m"] == [3, 6, 9]
