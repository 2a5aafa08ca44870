"""Graph building and validation: every structural mistake is caught before a run."""

from __future__ import annotations

import math
import re
from typing import Any

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


# --------------------------------------------------------------------------- where
def _line_below() -> int:
    import sys
    return sys._getframe(1).f_lineno + 1


def test_where_is_the_file_and_line_of_the_add_call() -> None:
    g = cp.Graph("g")
    line = _line_below()
    g.add("a", fetch, city="x")
    assert g.nodes["a"].where == f"{__file__}:{line}"
    line = _line_below()
    g.map("m", double, over=g.add("n", numbers))
    assert g.nodes["m"].where == f"{__file__}:{line}"


# --------------------------------------------------------------------------- step facts
def test_step_facts_are_worked_out_once_per_callable() -> None:
    from counterpoint.callables import step_facts

    async def local(a: int, ctx: cp.NodeContext) -> int:
        return a

    first = step_facts(local)
    assert step_facts(local) is first
    assert first.context_param == "ctx" and first.is_async and first.required == ("a",)
    assert first.key.endswith(":test_step_facts_are_worked_out_once_per_callable.<locals>.local")
    assert first.returns is int


def test_step_facts_of_methods_unhashable_and_unweakrefable_callables() -> None:
    from counterpoint.callables import step_facts

    class Steps:
        async def scale(self, n: int, factor: int = 2) -> int:
            return n * factor

    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __call__(self, text: str) -> int:
            return len(text)

    class Slotted:
        __slots__ = ()

        async def __call__(self, text: str) -> str:
            return text

    a, b = Steps(), Steps()
    assert step_facts(a.scale) is step_facts(b.scale)  # a new bound method each time
    assert step_facts(a.scale).names == ("n", "factor")  # self is bound
    assert step_facts(a.scale).required == ("n",)
    assert step_facts(Unhashable()).required == ("text",)
    assert not step_facts(Unhashable()).is_async
    slotted = step_facts(Slotted())  # cannot be weakly referenced: worked out, not cached
    assert slotted.is_async and slotted.returns is str
    g = cp.Graph("g")
    t = g.add("t", fetch, city="x")
    g.add("scaled", a.scale, n=g.add("len", Unhashable(), text=t))
    g.add("slotted", Slotted(), text=t)
    with pytest.raises(cp.GraphError, match="requires input 'text'"):
        g.add("bad", Unhashable())


def test_step_facts_are_dropped_with_their_callable() -> None:
    import gc

    from counterpoint import callables

    def make() -> object:
        async def temporary(x: int) -> int:
            return x
        return temporary

    fn = make()
    callables.step_facts(fn)  # type: ignore[arg-type]
    key = id(fn)
    assert key in callables._FACTS
    del fn
    gc.collect()
    assert key not in callables._FACTS


def test_specs_the_builder_makes_are_the_ones_the_constructor_makes() -> None:
    import dataclasses

    from counterpoint.graph import _new_ref

    async def join(a: str, n: int | None, k: int, lit: int = 0) -> int:
        return 0

    g = cp.Graph("g")
    k = g.input("k")
    a = g.add("a", fetch, city="x")
    n = g.add("n", numbers)
    g.add("j", join, a=a, n=g.add("d", double, n=3).or_none(), k=k, lit=4, after=["n", a])
    g.map("m", double, over=n, after=[a], estimate=0.5)
    g.add("s", _scaler(), x=n[0], k=k)
    g.map("sm", _scaler(), over=n, k=k)
    for spec in g.nodes.values():
        assert type(spec) is cp.NodeSpec
        made = cp.NodeSpec(**{f.name: getattr(spec, f.name)
                              for f in dataclasses.fields(spec) if f.init})
        for field in cp.NodeSpec.__slots__:  # type: ignore[attr-defined]
            assert getattr(spec, field) == getattr(made, field), (spec.id, field)
    assert g.nodes["j"].deps == ("a", "d", "n") and g.nodes["m"].deps == ("n", "a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.nodes["a"].id = cp.NodeId("other")  # type: ignore[misc]
    assert dataclasses.replace(g.nodes["a"], estimate=1.0).estimate == 1.0
    ref = _new_ref(cp.NodeId("n"), 7)
    assert type(ref) is cp.NodeRef and ref == cp.NodeRef(cp.NodeId("n"), owner=7)
    assert ref["k"].path == ("k",) and ref.owner == 7
    with pytest.raises(dataclasses.FrozenInstanceError):
        ref.node = cp.NodeId("other")  # type: ignore[misc]


# --------------------------------------------------------------------------- options
def test_node_options_override_only_what_they_set() -> None:
    from counterpoint.graph import NO_OPTIONS, NodeOptions

    base = cp.Policy(retries=1, timeout=5.0, resources={"gpu": 1})
    assert NO_OPTIONS.apply(base) is base
    changed = NodeOptions(retries=3, resources={"api": 2}).apply(base)
    assert (changed.retries, changed.timeout, dict(changed.resources)) == (3, 5.0, {"api": 2})
    g = cp.Graph("g")
    g.add("a", fetch, city="x", policy=base, timeout=1.0)
    assert (g.nodes["a"].policy.retries, g.nodes["a"].policy.timeout) == (1, 1.0)


# --------------------------------------------------------------------------- fallbacks
async def fallback_for_city(city: str) -> str:
    return "?"


async def fallback_without_params() -> str:
    return "?"


async def fallback_with_context(city: str, ctx: cp.NodeContext) -> str:
    return "?"


async def fallback_taking_anything(**inputs: object) -> str:
    return "?"


def test_fallback_must_accept_the_nodes_inputs() -> None:
    g = cp.Graph("g")
    g.add("ok", fetch, city="x", fallback=fallback_for_city)
    g.add("kw", fetch, city="x", fallback=fallback_taking_anything)
    line = _line_below()
    with pytest.raises(cp.GraphError) as info:
        g.add("bad", fetch, city="x", fallback=fallback_without_params)
    assert re.fullmatch(
        rf"{re.escape(__file__)}:{line + 1}: graph 'g', node 'bad': fallback "
        r"\S+:fallback_without_params has no parameter 'city'; its parameters are \[\]",
        str(info.value))
    with pytest.raises(cp.GraphError, match=r"node 'short': fallback \S+:fallback_for_city "
                                            r"requires input 'city'"):
        g.add("short", fallback_taking_anything, fallback=fallback_for_city)
    with pytest.raises(cp.GraphError, match=r"takes the node context in parameter 'ctx', but "
                                            r"a fallback is called with the node's inputs"):
        g.add("ctx", fetch, city="x", fallback=fallback_with_context)
    assert "bad" not in g.nodes and "short" not in g.nodes


def test_fallback_from_step_decorator_policy_and_sub_graphs_is_checked() -> None:
    @cp.step(fallback=fallback_without_params)
    async def decorated(city: str) -> str:
        return city

    g = cp.Graph("g")
    with pytest.raises(cp.GraphError, match=r"node 'd': fallback .* has no parameter 'city'"):
        g.add("d", decorated, city="x")
    with pytest.raises(cp.GraphError, match=r"node 'p': fallback .* has no parameter 'city'"):
        g.add("p", fetch, city="x", policy=cp.Policy(fallback=fallback_without_params))
    with pytest.raises(cp.GraphError, match=r"node 'm': fallback .* has no parameter 'n'"):
        g.map("m", double, over=g.add("n", numbers), fallback=fallback_for_city)
    with pytest.raises(cp.GraphError, match=r"node 's': fallback .* has no parameter 'x'"):
        g.add("s", _scaler(), x=1, k=2, fallback=fallback_for_city)


def test_fallback_of_a_mapped_step_receives_the_item() -> None:
    async def fallback_for_n(n: int) -> int:
        return 0

    g = cp.Graph("g")
    g.map("m", double, over=g.add("n", numbers), fallback=fallback_for_n)


# --------------------------------------------------------------------------- map over a sub-graph
def _scaler() -> cp.Graph:
    sub = cp.Graph("scale")
    x = sub.input("x", int)
    k = sub.input("k", int)
    sub.output(sub.add("scaled", lambda a, b: a * b, a=x, b=k))
    return sub


def test_map_over_a_subgraph_fans_out_from_the_list() -> None:
    g = cp.Graph("g")
    n = g.add("n", numbers)
    g.map("m", _scaler(), over=n, k=10)
    spec = g.nodes["m"]
    assert spec.kind is cp.NodeKind.MAP and spec.map_param == "x"
    assert spec.deps == ("n",) and spec.map_over == n
    g.validate()
    g.map("m2", _scaler(), over=n, item="k", x=2)
    assert g.nodes["m2"].map_param == "k"


def test_map_over_a_subgraph_needs_the_mapped_input() -> None:
    g = cp.Graph("g")
    n = g.add("n", numbers)
    with pytest.raises(cp.GraphError, match=r"node 'm': sub-graph 'scale' has no input 'y' to "
                                            r"receive the mapped item; declared inputs: "
                                            r"\['k', 'x'\]"):
        g.map("m", _scaler(), over=n, item="y", x=1, k=2)
    with pytest.raises(cp.GraphError, match=r"node 'm': sub-graph 'scale' has no input left "
                                            r"to receive the mapped item"):
        g.map("m", _scaler(), over=n, x=1, k=2)
    with pytest.raises(cp.GraphError, match=r"sub-graph 'scale' needs input\(s\) \['k'\]"):
        g.map("m", _scaler(), over=n)
    with pytest.raises(cp.GraphError, match=r"input 'x' receives the mapped item"):
        g.map("m", _scaler(), over=n, item="x", x=1, k=2)


# --------------------------------------------------------------------------- topology
def test_topology_follows_insertion_order_or_sorts_forward_references() -> None:
    from counterpoint.graph import find_cycle

    g = cp.Graph("g")
    a = g.add("a", fetch, city="x")
    g.add("c", count, text=a)
    g.add("b", count, text=a)
    topo = g.validate()
    assert topo.order == ("a", "c", "b")  # the order they were added in: it is topological
    assert topo.dependents == {"a": ("c", "b"), "c": (), "b": ()}
    forward = cp.Graph("forward")
    forward.add("late", double, n=cp.ref("early"))
    forward.add("early", count, text="abc")
    forward.add("after", fetch, city="x", after=["late"])
    topo = forward.validate()
    assert topo.order.index("early") < topo.order.index("late") < topo.order.index("after")
    assert topo.dependents["early"] == ("late",)
    assert find_cycle({cp.NodeId("a"): [cp.NodeId("c")], cp.NodeId("b"): [cp.NodeId("a")],
                       cp.NodeId("c"): [cp.NodeId("b")]}) in (
        ["a", "b", "c", "a"], ["b", "c", "a", "b"], ["c", "a", "b", "c"])
    assert find_cycle({cp.NodeId("a"): [], cp.NodeId("b"): [cp.NodeId("a")]}) == []


def test_fingerprint_is_the_hash_it_always_was() -> None:
    import hashlib

    g = cp.Graph("g")
    a = g.add("a", fetch, city="x")
    g.add("b", count, text=a, after=[a])
    g.map("m", double, over=g.add("n", numbers))
    g.add("s", _scaler(), x=1, k=2)
    digest = hashlib.sha256()  # how fingerprints of recorded runs were computed
    for spec in g.nodes.values():
        qualname = spec.step_key.partition(":")[2]
        digest.update(f"{spec.id}|{qualname}|{','.join(spec.deps)}|{spec.kind}\n".encode())
    assert g.fingerprint() == digest.hexdigest()[:16]


@pytest.mark.parametrize("wrap", [lambda a, b: [a, b], lambda a, b: (a, 1),
                                  lambda a, b: {"x": [b]}])
def test_an_input_that_holds_node_references_inside_a_container_is_refused(wrap: Any) -> None:
    g = cp.Graph("g")
    a = g.add("a", lambda: 1)
    b = g.add("b", lambda: 2)
    with pytest.raises(cp.GraphError) as err:
        g.add("total", lambda parts: parts, parts=wrap(a, b))
    message = str(err.value)
    assert "test_graph.py:" in message and "'total'" in message and "'parts'" in message
    assert "holding node references" in message and "an input of its own" in message
    assert "total" not in g.nodes  # nothing was added


def test_literal_containers_without_references_are_plain_inputs() -> None:
    g = cp.Graph("g")
    g.add("total", lambda parts: sum(parts), parts=[1, 2, (3,)][:2])
    assert cp.run_sync(g, store="memory").output == {"total": 3}


def _fetch(city: str) -> str:
    return city


@pytest.mark.parametrize(("build", "said"), [
    (lambda g: g.add("x", _fetch, city="a", estimate="1"),
     r"estimate must be a finite duration >= 0 seconds \(a number\), got '1'; or leave it "
     "out"),
    (lambda g: g.add("x", _fetch, city="a", estimate=math.inf), r"estimate must be a finite"),
    (lambda g: g.add("x", _fetch, city="a", estimate=True), r"estimate must be a finite"),
    (lambda g: g.add("x", _fetch, city="a", after="first"),
     r"after= takes a list of nodes .* got str 'first'; write after=\['first'\]"),
    (lambda g: g.add("x", _fetch, city="a", after=g.add("first", _fetch, city="b")),
     r"after= takes a list of nodes .* got NodeRef .*; write after=\[ref\]"),
    (lambda g: g.add("x", _fetch, city="a", after=3), r"after= takes a list of nodes"),
    (lambda g: g.add("x", _fetch, city="a", policy={"retries": 2}),
     r"policy= takes a cp.Policy, got dict \{'retries': 2\}; write "
     r"policy=cp.Policy\(retries=...\)"),
    (lambda g: g.add("x", _fetch, inputs=["a"]),
     r"inputs= takes a mapping of parameter names to values or nodes, .* got list \['a'\]"),
    (lambda g: g.map("x", _fetch, over=g.add("first", _fetch, city="b"), inputs=("a",)),
     r"inputs= takes a mapping"),
], ids=["estimate-str", "estimate-inf", "estimate-bool", "after-str", "after-ref",
        "after-int", "policy-dict", "inputs-list", "map-inputs-tuple"])
def test_a_node_option_of_the_wrong_kind_is_a_graph_error_where_it_was_added(
        build: Any, said: str) -> None:
    """Before: TypeError from a comparison ('>=' not supported between 'str' and 'int'),
    AttributeError ('dict' object has no attribute 'fallback'), TypeError ('list' object
    is not a mapping), and after='first' taken as the nodes 'f', 'i', 'r', 's', 't'."""
    g = cp.Graph("g")
    with pytest.raises(cp.GraphError, match=rf"^{re.escape(__file__)}:\d+: graph 'g', node 'x': "
                                         rf"{said}"):
        build(g)


def test_the_graph_output_must_be_a_node_reference() -> None:
    """Before: AttributeError: 'str' object has no attribute 'owner'."""
    g = cp.Graph("g")
    g.add("x", _fetch, city="a")
    with pytest.raises(cp.GraphError, match=r"the graph output takes a node reference \(the "
                                         r"value g.add returned\), got str 'x'"):
        g.output("x")  # type: ignore[arg-type]
