"""How a node spec stores its inputs: plain references as their source ids, which the
garbage collector does not track, behind ``spec.inputs`` as the public view."""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle

import counterpoint as cp
from counterpoint.ids import NodeId


async def seed(i: int) -> int:
    return i


async def mix(left: int, right: int) -> int:
    return left + right


async def anything(x):  # type: ignore[no-untyped-def]
    return x


async def pick(a: int, b: int | None, c: int, d: str, k: int, lit: str) -> int:
    return a


def _graph() -> cp.Graph:
    """A node of each input kind: plain, indexed and optional references, a graph input,
    a string literal equal to a node id, and an int literal."""
    g = cp.Graph("inputs")
    k = g.input("k", int)
    a = g.add("a", seed, i=1)
    b = g.add("b", seed, i=2)
    pairs = g.add("pairs", anything, x=[[1, 2]])
    g.add("p", pick, a=a, b=b.or_none(), c=pairs[0][1], d="a", k=k, lit="b")
    return g


def test_a_spec_of_plain_references_and_atoms_leaves_only_itself_tracked() -> None:
    g = cp.Graph("plain")
    a = g.add("a", seed, i=1)
    b = g.add("b", seed, i=2)
    g.add("m", mix, left=a, right=b)
    spec = g.nodes[NodeId("m")]
    assert spec.wires == {"left": "a", "right": "b"}
    assert not gc.is_tracked(spec.wires)
    assert all(type(v) is str for v in spec.wires.values())
    assert not gc.is_tracked(g.nodes[NodeId("a")].wires)
    made = cp.NodeSpec(id=NodeId("m"), fn=mix, inputs={"left": a, "right": b})
    assert not gc.is_tracked(made.wires) and made.wires == spec.wires
    shipped = pickle.loads(pickle.dumps(spec))
    assert not gc.is_tracked(shipped.wires) and shipped.wires == spec.wires


def test_inputs_gives_back_every_kind_of_input() -> None:
    g = _graph()
    spec = g.nodes[NodeId("p")]
    assert spec.inputs == {"a": cp.NodeRef(NodeId("a")),
                           "b": cp.NodeRef(NodeId("b"), optional=True),
                           "c": cp.NodeRef(NodeId("pairs"), (0, 1)),
                           "d": "a", "k": cp.InputRef("k"), "lit": "b"}
    assert list(spec.inputs) == ["a", "b", "c", "d", "k", "lit"]
    assert type(spec.inputs["a"].node) is str and type(spec.inputs["d"]) is str
    assert spec.refs == ("a", "b", "c", "k")
    assert spec.deps == ("a", "b", "pairs")
    assert spec.data_deps() == {"a", "pairs"}  # b is optional
    assert spec.wires["a"] == "a" and spec.wires["b"] == cp.NodeRef(NodeId("b"), optional=True)
    assert "NodeRef(node='a'" in repr(spec) and "wires" not in repr(spec)


def test_the_run_reads_the_stored_inputs() -> None:
    g = _graph()
    result = cp.run_sync(g, inputs={"k": 7})
    assert result["p"] == 1
    assert result.status is cp.RunStatus.SUCCEEDED


def test_replace_pickle_and_copies_keep_the_inputs() -> None:
    spec = _graph().nodes[NodeId("p")]
    moved = dataclasses.replace(spec, where="elsewhere:1")
    assert moved.where == "elsewhere:1" and moved.inputs == spec.inputs
    assert moved.wires == spec.wires and moved.refs == spec.refs and moved.deps == spec.deps
    other = dataclasses.replace(spec, inputs={"a": cp.NodeRef(NodeId("b")), "d": "x"})
    assert other.wires == {"a": "b", "d": "x"} and other.refs == ("a",)
    assert other.deps == ("b",)
    for twin in (pickle.loads(pickle.dumps(spec)), copy.copy(spec), copy.deepcopy(spec)):
        assert twin == spec
        assert twin.wires == spec.wires and twin.refs == spec.refs and twin.deps == spec.deps
    assert dataclasses.replace(spec, inputs={**spec.inputs, "d": "b"}) != spec


def test_a_literal_string_is_not_taken_for_a_reference() -> None:
    spec = cp.NodeSpec(id=NodeId("n"), fn=mix, inputs={"left": "a", "right": cp.ref("a")})
    assert spec.refs == ("right",) and spec.deps == ("a",)
    assert spec.inputs == {"left": "a", "right": cp.NodeRef(NodeId("a"))}


def test_a_maps_spawned_nodes_keep_its_inputs() -> None:
    async def scale(n: int, factor: int, label: str) -> str:
        return f"{label}{n * factor}"

    async def items() -> list[int]:
        return [1, 2, 3]

    g = cp.Graph("map")
    factor = g.add("factor", seed, i=10)
    g.map("scaled", scale, over=g.add("items", items), factor=factor, label="a")
    assert g.nodes[NodeId("scaled")].wires == {"factor": "factor", "label": "a"}
    result = cp.run_sync(g)
    assert result["scaled"] == ["a10", "a20", "a30"]
