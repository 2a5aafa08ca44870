"""Graph building and validation: every structural mistake is caught before a run."""

from __future__ import annotations

import pytest

import counterpoint as cp


async def fetch(city: str) -> str:
    return city


async def count(text: str) -> int:
    return len(text)


async def double(n: int) -> int:
    return n * 2


def numbers() -> list[int]:
    return [1, 2]


def words() -> list[str]:
    return ["a"]


async def anything(x):  # type: ignore[no-untyped-def]
    return x


def test_add_returns_refs_and_wires_data_edges() -> None:
    g = cp.Graph("g")
    a = g.add("a", fetch, city="Paris")
    b = g.add("b", count, text=a)
    assert isinstance(b, cp.NodeRef) and b.node == "b"
    assert g.nodes["b"].deps == ("a",)
    topo = g.validate()
    assert topo.order.index("a") < topo.order.index("b")


def test_duplicate_id_names_both_places() -> None:
    g = cp.Graph("g")
    g.add("a", fetch, city="x")
    with pytest.raises(cp.GraphError,
                       match=r"node 'a': duplicate node id \(first added at .*test_graph.py:\d+\)"):
        g.add("a", fetch, city="y")


def test_unknown_dependency_is_reported_at_validation() -> None:
    g = cp.Graph("g")
    g.add("b", count, text=cp.ref("nope"))
    with pytest.raises(cp.GraphError, match=r"node 'b' depends on unknown node 'nope'"):
        g.validate()


def test_cycle_is_printed() -> None:
    g = cp.Graph("g")
    g.add("a", double, n=cp.ref("c"))
    g.add("b", double, n=cp.ref("a"))
    g.add("c", double, n=cp.ref("b"))
    with pytest.raises(cp.GraphError, match=r"has a cycle: (\w) -> (\w) -> (\w) -> \1"):
        g.validate()


def test_cycle_through_ordering_edges() -> None:
    g = cp.Graph("g")
    g.add("a", fetch, city="x", after=["b"])
    g.add("b", fetch, city="y", after=["a"])
    with pytest.raises(cp.GraphError, match=r"cycle: . -> . -> ."):
        g.validate()


def test_unknown_parameter() -> None:
    g = cp.Graph("g")
    with pytest.raises(cp.GraphError, match=r"has no parameter 'town'"):
        g.add("a", fetch, town="x")


def test_missing_required_input() -> None:
    g = cp.Graph("g")
    with pytest.raises(cp.GraphError, match=r"requires input 'city'"):
        g.add("a", fetch)


def test_annotated_type_mismatch() -> None:
    g = cp.Graph("g")
    a = g.add("a", fetch, city="x")
    with pytest.raises(cp.GraphError, match=r"input 'n' expects int but node 'a' returns str"):
        g.add("b", double, n=a)


def test_compatible_and_unannotated_types_pass() -> None:
    g = cp.Graph("g")
    a = g.add("a", fetch, city="x")
    b = g.add("b", count, text=a)
    g.add("c", double, n=b)
    g.add("d", anything, x=a)
    g.validate()


def test_map_checks_item_type() -> None:
    g = cp.Graph("g")
    w = g.add("w", words)
    with pytest.raises(cp.GraphError,
                       match=r"mapped parameter 'n' expects int but items of node 'w' are str"):
        g.map("m", double, over=w)
    n = g.add("n", numbers)
    g.map("ok", double, over=n)


def test_refs_from_another_graph_are_rejected() -> None:
    g1, g2 = cp.Graph("one"), cp.Graph("two")
    a = g1.add("a", fetch, city="x")
    with pytest.raises(cp.GraphError, match="another graph"):
        g2.add("b", count, text=a)


def test_reserved_characters_in_ids() -> None:
    g = cp.Graph("g")
    with pytest.raises(cp.GraphError, match="node ids must be"):
        g.add("a[0]", fetch, city="x")


def test_empty_graph_is_invalid() -> None:
    with pytest.raises(cp.GraphError, match="has no nodes"):
        cp.Graph("empty").validate()


def test_step_decorator_wires_by_parameter_name() -> None:
    g = cp.Graph("g")

    @g.step
    async def city() -> str:
        return "Paris"

    @g.step(retries=2)
    async def length(city: str) -> int:
        return len(city)

    assert g.nodes["length"].deps == ("city",)
    assert g.nodes["length"].policy.retries == 2
    with pytest.raises(cp.GraphError, match="parameter 'missing' matches no node"):
        @g.step
        async def broken(missing: str) -> int:
            return 0


def test_step_policy_decorator_is_picked_up() -> None:
    @cp.step(retries=3, timeout=2.0)
    async def flaky() -> int:
        return 1

    g = cp.Graph("g")
    g.add("f", flaky)
    assert g.nodes["f"].policy.retries == 3
    assert g.nodes["f"].policy.timeout == 2.0


def test_subgraph_inputs_are_checked() -> None:
    sub = cp.Graph("sub")
    x = sub.input("x")
    sub.add("d", double, n=x)
    g = cp.Graph("g")
    with pytest.raises(cp.GraphError, match=r"needs input\(s\) \['x'\]"):
        g.add("s", sub)
    with pytest.raises(cp.GraphError, match=r"has no input\(s\) \['y'\]"):
        g.add("s", sub, x=1, y=2)


def test_policy_validation() -> None:
    with pytest.raises(cp.UserError, match="retries must be >= 0"):
        cp.Policy(retries=-1)
    with pytest.raises(cp.UserError, match="timeout must be > 0"):
        cp.Policy(timeout=0)


def test_fingerprint_tracks_structure() -> None:
    g = cp.Graph("g")
    g.add("a", fetch, city="x")
    first = g.fingerprint()
    g.add("b", count, text=cp.ref("a"))
    assert g.fingerprint() != first
