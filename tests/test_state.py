"""The pure scheduling core, driven without an event loop."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import counterpoint as cp
from counterpoint.events import Event, EventKind
from counterpoint.graph import Graph
from counterpoint.ids import NodeId, RunId
from counterpoint.patch import Edit
from counterpoint.rules import check_patch, pick, react
from counterpoint.state import NodeStatus, RunState, RunStatus
from counterpoint.transitions import evolve


async def step(x: int = 0) -> int:
    return x


async def other(x: int = 0) -> int:
    return x


async def maybe(x: int | None = None) -> int:
    return x or 0


def new_state(graph: Graph, **kwargs: object) -> RunState:
    topo = graph.validate()
    return RunState.new(RunId("r"), graph.name, [graph.nodes[n] for n in topo.order],
                        **kwargs)  # type: ignore[arg-type]


def apply(state: RunState, event: Event) -> list[Event]:
    """Apply an event and everything it implies, depth first; return all applied events."""
    applied: list[Event] = []
    queue = [event]
    while queue:
        ev = queue.pop(0)
        evolve(state, ev)
        applied.append(ev)
        queue.extend(react(state, ev, ev.at))
    return applied


def start(state: RunState, node: str) -> None:
    apply(state, Event(EventKind.NODE_STARTED, 1.0, NodeId(node), 1))


def succeed(state: RunState, node: str, output: object = 1, **data: object) -> list[Event]:
    return apply(state, Event(EventKind.NODE_SUCCEEDED, 2.0, NodeId(node), 1,
                              data=dict(data) or None, value="1", output=output))


def statuses(state: RunState) -> dict[str, NodeStatus]:
    return {k: v.status for k, v in state.nodes.items()}


def diamond() -> Graph:
    g = cp.Graph("diamond")
    a = g.add("a", step)
    b = g.add("b", step, x=a)
    c = g.add("c", step, x=a)
    g.add("d", step, x=b, after=[c])
    return g


def test_created_run_marks_roots_ready() -> None:
    state = new_state(diamond())
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    assert statuses(state) == {"a": "ready", "b": "pending", "c": "pending", "d": "pending"}


def test_success_readies_dependents_only_when_all_inputs_exist() -> None:
    state = new_state(diamond())
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    assert pick(state, 10) == ["a"]
    start(state, "a")
    succeed(state, "a")
    assert statuses(state)["b"] == "ready" and statuses(state)["c"] == "ready"
    for node in pick(state, 10):
        start(state, node)
    succeed(state, "b")
    assert statuses(state)["d"] == "pending"  # still waits for c
    events = succeed(state, "c")
    assert statuses(state)["d"] == "ready"
    assert [e.kind for e in events] == [EventKind.NODE_SUCCEEDED, EventKind.NODE_READY]
    start(state, "d")
    events = succeed(state, "d")
    assert events[-1].kind is EventKind.RUN_FINISHED
    assert state.status is RunStatus.SUCCEEDED


def test_failure_blocks_dependents_naming_the_cause_and_spares_others() -> None:
    g = cp.Graph("g")
    a = g.add("a", step)
    b = g.add("b", step, x=a)
    g.add("c", step, x=b)
    g.add("other", step)
    state = new_state(g)
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    start(state, "a")
    apply(state, Event(EventKind.NODE_FAILED, 1.0, NodeId("a"), 1,
                       data={"final": True, "type": "ValueError", "message": "boom"}))
    assert statuses(state) == {"a": "failed", "b": "blocked", "c": "blocked", "other": "ready"}
    assert state.nodes[NodeId("c")].error == {"cause": "a", "message": "boom"}
    start(state, "other")
    events = succeed(state, "other")
    assert events[-1].data == {"status": RunStatus.FAILED}


def test_non_final_failure_waits_for_retry() -> None:
    g = cp.Graph("g")
    g.add("a", step)
    state = new_state(g)
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    start(state, "a")
    apply(state, Event(EventKind.NODE_FAILED, 1.0, NodeId("a"), 1,
                       data={"final": False, "message": "flaky"}))
    assert state.nodes[NodeId("a")].status is NodeStatus.RETRYING
    assert state.running == 0 and state.open == 1


def test_choose_skips_unchosen_successors_and_their_data_dependents() -> None:
    g = cp.Graph("g")
    r = g.add("route", step)
    left = g.add("left", step, x=r)
    right = g.add("right", step, x=r)
    g.add("after_right", step, x=right)
    g.add("join", maybe, x=left.or_none(), after=[right])
    state = new_state(g)
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    start(state, "route")
    succeed(state, "route", chosen=["left"])
    s = statuses(state)
    assert s["right"] == "skipped" and s["after_right"] == "skipped"
    assert s["left"] == "ready" and s["join"] == "pending"
    start(state, "left")
    succeed(state, "left")
    assert statuses(state)["join"] == "ready"  # ordering edge to a skipped node is satisfied


def test_pick_orders_by_upward_rank() -> None:
    g = cp.Graph("g")
    short = g.add("short", step)
    long_head = g.add("long_head", other)
    mid = g.add("mid", other, x=long_head)
    g.add("tail", other, x=mid)
    g.add("short_tail", step, x=short)
    state = new_state(g, estimates={"test_state:other": 5.0, "test_state:step": 1.0})
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    assert state.nodes[NodeId("long_head")].rank == 15.0
    assert pick(state, 1) == ["long_head"]
    assert pick(state, 1) == ["short"]


@settings(max_examples=100, deadline=None)
@given(estimates=st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0]), min_size=1, max_size=30),
       slots=st.integers(min_value=1, max_value=40), stale=st.integers(min_value=0,
                                                                     max_value=5))
def test_pick_of_every_ready_node_is_the_order_of_one_at_a_time(
        estimates: list[float], slots: int, stale: int) -> None:
    # pick sorts the heap once when every ready node fits in the slots; that must be the
    # order of picking one at a time (and skip entries of nodes no longer ready)
    def fresh() -> RunState:
        g = cp.Graph("g")
        for i, estimate in enumerate(estimates):
            g.add(f"n{i}", step, estimate=estimate)
        state = new_state(g)
        apply(state, Event(EventKind.RUN_CREATED, 0.0))
        for i in range(min(stale, len(estimates))):  # cancelled while ready: a stale entry
            apply(state, Event(EventKind.NODE_CANCELLED, 0.0, NodeId(f"n{i}")))
        return state

    at_once, one_by_one = fresh(), fresh()
    chosen = pick(at_once, slots)
    singles: list[NodeId] = []
    while len(singles) < slots and (got := pick(one_by_one, 1)):
        singles.extend(got)
    assert chosen == singles
    assert sorted(at_once.ready) == sorted(one_by_one.ready)


@settings(max_examples=100, deadline=None)
@given(deps=st.lists(st.lists(st.integers(0, 30), max_size=3, unique=True), min_size=1,
                     max_size=20),
       kinds=st.lists(st.sampled_from(["step", "other"]), min_size=20, max_size=20),
       first=st.dictionaries(st.sampled_from(["test_state:step", "test_state:other"]),
                             st.floats(0.001, 10.0)),
       second=st.dictionaries(st.sampled_from(["test_state:step", "test_state:other"]),
                              st.floats(0.001, 10.0)))
def test_fresh_states_reuse_the_wiring_and_rank_as_new_ones_do(
        deps: list[list[int]], kinds: list[str], first: dict[str, float],
        second: dict[str, float]) -> None:
    g = cp.Graph("g")
    for i, wanted in enumerate(deps):
        after = sorted({f"n{d % i}" for d in wanted}) if i else []
        g.add(f"n{i}", step if kinds[i] == "step" else other, after=after)
    topology = g.validate()
    for estimates in (first, second, first):  # ranks follow the estimates both ways
        got = RunState.fresh(RunId("r"), "g", topology, g.nodes, estimates=estimates,
                             limits={})
        want = new_state(g, estimates=estimates)
        assert [(k, n.order, n.unmet, n.dependents, n.status) for k, n in got.nodes.items()] \
            == [(k, n.order, n.unmet, n.dependents, n.status) for k, n in want.nodes.items()]
        assert [got.nodes[k].rank for k in got.nodes] == \
            pytest.approx([want.nodes[k].rank for k in want.nodes])
        assert got.open == want.open == len(deps)
        assert got.remaining == pytest.approx(want.remaining)
        assert got.remaining == pytest.approx(sum(
            estimates.get(g.nodes[n].step_key, 1.0) for n in g.nodes))


def test_pick_respects_resource_limits_without_head_of_line_blocking() -> None:
    g = cp.Graph("g")
    g.add("llm1", step, resources={"llm": 1})
    g.add("llm2", step, resources={"llm": 1})
    g.add("cpu", step)
    state = new_state(g, limits={"llm": 1})
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    chosen = pick(state, 10)
    assert sorted(chosen) == ["cpu", "llm1"] or sorted(chosen) == ["cpu", "llm2"]
    for node in chosen:
        start(state, node)
    assert state.in_use == {"llm": 1}
    assert pick(state, 10) == []  # the other llm node waits
    llm = next(n for n in chosen if n.startswith("llm"))
    succeed(state, llm)
    assert len(pick(state, 10)) == 1


def test_map_expansion_spawns_children_and_join() -> None:
    async def square(x: int) -> int:
        return x * x

    def nums() -> list[int]:
        return [1, 2, 3]

    g = cp.Graph("g")
    n = g.add("n", nums)
    g.map("sq", square, over=n)
    state = new_state(g)
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    start(state, "n")
    events = succeed(state, "n", output=[1, 2, 3])
    assert EventKind.MAP_EXPANDED in [e.kind for e in events]
    s = statuses(state)
    assert [s[f"sq[{i}]"] for i in range(3)] == ["ready"] * 3
    assert state.nodes[NodeId("sq")].spec.kind is cp.NodeKind.JOIN
    assert state.nodes[NodeId("sq[1]")].spec.inputs["x"] == cp.NodeRef(NodeId("n"), (1,))


def test_remaining_work_counts_the_estimates_of_unfinished_nodes() -> None:
    async def square(x: int) -> int:
        return x * x

    def nums() -> list[int]:
        return [1, 2, 3]

    g = cp.Graph("g")
    n = g.add("n", nums, estimate=2.0)
    g.map("sq", square, over=n, estimate=0.5)
    g.add("learned", step)
    state = new_state(g, estimates={"test_state:step": 4.0})
    assert state.remaining == pytest.approx(2.0 + 0.5 + 4.0)
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    start(state, "n")
    assert state.remaining == pytest.approx(6.5)  # a running node still has its work
    succeed(state, "n", output=[1, 2, 3])
    # three 0.5 s children and the join (estimate unknown: the default 1 s) replace the map
    assert state.remaining == pytest.approx(3 * 0.5 + 1.0 + 4.0)
    for child in ("sq[0]", "sq[1]", "sq[2]"):
        start(state, child)
        succeed(state, child)
    assert state.remaining == pytest.approx(1.0 + 4.0)
    for node in ("sq", "learned"):
        start(state, node)
        succeed(state, node)
    assert state.remaining == pytest.approx(0.0)
    assert state.open == 0


def test_map_over_non_list_fails_clearly() -> None:
    async def square(x: int) -> int:
        return x

    def nums() -> list[int]:
        return []

    g = cp.Graph("g")
    g.map("sq", square, over=g.add("n", nums))
    state = new_state(g)
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    start(state, "n")
    succeed(state, "n", output={"not": "a list"})
    node = state.nodes[NodeId("sq")]
    assert node.status is NodeStatus.FAILED
    message = (node.error or {})["message"]
    assert message.endswith(": map node 'sq' maps over the output of 'n', which is a dict, "
                            "not a list; return a list from 'n', or map over a part of its "
                            "output that is a list (over=ref['key'])")
    assert message.startswith(f"{__file__}:")  # where g.map was called


def _mapped_over(output: object, *path: str, where: str | None = None) -> str:
    """The message of a map node over ``n``'s ``output`` (at ``path``), added at ``where``."""
    async def square(x: int) -> int:
        return x

    def nums() -> list[int]:
        return []

    g = cp.Graph("g")
    over = g.add("n", nums)
    for key in path:
        over = over[key]
    g.map("sq", square, over=over)
    if where is not None:  # as a workflow's compiler records the YAML line of the step
        g.nodes[NodeId("sq")] = replace(g.nodes[NodeId("sq")], where=where)
    state = new_state(g)
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    start(state, "n")
    succeed(state, "n", output=output)
    node = state.nodes[NodeId("sq")]
    assert node.status is NodeStatus.FAILED
    return str((node.error or {})["message"])


def test_a_workflow_map_over_a_non_list_is_said_in_the_workflows_words() -> None:
    """Regression: a YAML workflow's ``map: ${steps.n.output.items}`` was answered in
    Python (``over=ref['key']``), without the file and line."""
    assert _mapped_over({"items": "a b"}, "items", where="flow.yaml:7") == (
        "flow.yaml:7: step 'sq' maps over the output of step 'n' at .items, which is a "
        "str, not a list; return a list from step 'n', or map over a part of its output "
        "that is a list (map: ${steps.n.output.KEY})")


def test_a_map_over_a_part_that_is_not_there_names_the_part() -> None:
    """Before: ``got KeyError``, the part not named."""
    message = _mapped_over({"count": 2}, "items", where="g.py:3")
    assert message.startswith("g.py:3: map node 'sq' maps over the output of 'n' at "
                              "['items'], which is not there (KeyError: 'items'); ")


def test_patch_validation_rejects_cycles_finished_nodes_and_stale_versions() -> None:
    g = cp.Graph("g")
    a = g.add("a", step)
    g.add("b", step, x=a)
    state = new_state(g)
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    start(state, "a")
    succeed(state, "a")

    cyc = Edit()
    cyc.add("c", step, x=cp.ref("b"))
    cyc.edge("c", "b")
    with pytest.raises(cp.PatchError, match="cycle"):
        check_patch(state, cyc.build(g.name, state.specs()))

    done = Edit()
    done.cancel("a")
    with pytest.raises(cp.PatchError, match="finished nodes are immutable"):
        check_patch(state, done.build(g.name, state.specs()))

    replace_started = Edit()
    replace_started.replace("a", step)
    with pytest.raises(cp.PatchError, match="only nodes that have not started"):
        check_patch(state, replace_started.build(g.name, state.specs()))

    stale = Edit(expected_version=3)
    stale.add("z", step)
    with pytest.raises(cp.PatchError, match="version 3"):
        check_patch(state, stale.build(g.name, state.specs()))

    dup = Edit()
    dup.add("b", step)
    with pytest.raises(cp.PatchError, match="duplicate node id"):
        dup.build(g.name, state.specs())


def test_patch_applies_atomically_and_bumps_version() -> None:
    g = cp.Graph("g")
    a = g.add("a", step)
    g.add("b", step, x=a)
    state = new_state(g)
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    edit = Edit("more work")
    edit.add("c", step, x=cp.ref("a"))
    edit.edge("c", "b")
    patch = edit.build(g.name, state.specs())
    check_patch(state, patch)
    apply(state, Event(EventKind.PATCH_APPLIED, 1.0, output=patch))
    assert state.version == 1
    assert state.nodes[NodeId("b")].spec.deps == ("a", "c")
    start(state, "a")
    succeed(state, "a")
    assert statuses(state)["c"] == "ready" and statuses(state)["b"] == "pending"


def test_resume_event_requeues_in_flight_nodes() -> None:
    g = cp.Graph("g")
    g.add("a", step)
    g.add("b", step)
    state = new_state(g)
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    start(state, "a")
    start(state, "b")
    succeed(state, "b")
    events = apply(state, Event(EventKind.RUN_RESUMED, 5.0))
    assert [(e.kind, e.node) for e in events[1:]] == [(EventKind.NODE_READY, "a")]
    assert state.running == 0
    assert state.nodes[NodeId("b")].status is NodeStatus.SUCCEEDED


def test_a_patch_may_replace_a_node_to_depend_on_a_node_it_adds() -> None:
    # regression: replaces were applied before adds, so the new dependency was unknown
    g = Graph("p")
    g.add("a", step)
    g.add("tail", step, after=["a"])
    state = new_state(g)
    edit = Edit("rewire")
    edit.add("b", step, after=["a"])
    edit.replace("tail", step, after=["b"])
    patch = edit.build("p", {k: v.spec for k, v in state.nodes.items()})
    check_patch(state, patch)
    evolve(state, Event(EventKind.PATCH_APPLIED, 0.0, output=patch))
    assert state.nodes[NodeId("b")].dependents == (NodeId("tail"),)
    assert NodeId("tail") not in state.nodes[NodeId("a")].dependents
    assert state.nodes[NodeId("tail")].unmet == 1


def test_a_resume_ends_the_running_nodes_an_edit_cancelled_instead_of_rerunning_them() -> None:
    # the log holds the edit, but not the node_cancelled its running node's task would
    # have logged: the process died in between
    g = Graph("p")
    g.add("a", step)
    g.add("b", step, after=["a"])
    g.add("c", step)
    state = new_state(g)
    apply(state, Event(EventKind.RUN_CREATED, 0.0))
    start(state, "a")
    start(state, "c")
    edit = Edit("drop a")
    edit.cancel("a")
    patch = edit.build("p", {k: v.spec for k, v in state.nodes.items()})
    apply(state, Event(EventKind.PATCH_APPLIED, 1.0, output=patch))
    assert state.nodes[NodeId("a")].status is NodeStatus.RUNNING  # its task would stop it
    events = apply(state, Event(EventKind.RUN_RESUMED, 5.0))
    assert {(e.kind, e.node) for e in events[1:]} == {
        (EventKind.NODE_CANCELLED, "a"), (EventKind.NODE_CANCELLED, "b"),
        (EventKind.NODE_READY, "c")}
    assert state.nodes[NodeId("a")].error == {"reason": "drop a"}


def test_the_model_tally_keeps_each_models_mean_latency_of_answered_calls() -> None:
    tally = cp.ModelTally()
    answered = {"input_tokens": 3, "output_tokens": 2, "cost": None}
    tally.add({**answered, "model": "small", "latency": 0.2})
    tally.add({**answered, "model": "small", "latency": 0.4})
    tally.add({**answered, "model": "big", "latency": 1.0})
    tally.add({"model": "small", "error": "timeout", "latency": 9.0})  # failed: not counted
    tally.add({"model": "small", "cache_hit": True, "latency": 0.0})  # not sent: not counted
    assert tally.mean_latency("small") == pytest.approx(0.3)
    assert tally.mean_latency("big") == pytest.approx(1.0)
    assert tally.mean_latency("other") is None
    assert cp.ModelTally().mean_latency("small") is None


def test_nodes_added_together_are_wired_as_added_one_at_a_time() -> None:
    """add_specs gives each source one new tuple of dependents for all the nodes added
    with it (a map of n items once cost n^2), in the order they were added, and leaves
    the tuple that other runs of the graph share as it was."""
    from counterpoint.state import add_specs

    graph = Graph("wide")
    source = graph.add("source", _one)
    graph.add("early", _same, x=source)
    state = RunState.new(RunId("r"), "wide", graph.nodes.values())
    shared = state.nodes[NodeId("source")].dependents
    extra = Graph("extra")
    src = extra.add("source", _one)
    late = [extra.add(f"late{i}", _same, x=src) for i in range(5)]
    added = add_specs(state, [extra.nodes[NodeId(r.node)] for r in late])
    assert added == [f"late{i}" for i in range(5)]
    assert state.nodes[NodeId("source")].dependents == ("early", *added)
    assert shared == ("early",)  # not mutated: a new tuple
    assert all(state.nodes[n].unmet == 1 for n in added)
    assert state.open == 2 + 5


def _one() -> int:
    return 1


def _same(x: int) -> int:
    return x
