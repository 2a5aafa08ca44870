"""Forks (counterpoint.scheduler.fork): a new run from a prefix of another run's log.

Each test runs a real graph, forks it and counts which steps ran again: outputs
recorded before the fork point are reused (copied into the fork's log, marked so),
what the fork changed and what depends on it runs, and the lineage is recorded both
ways. The last test kills a fork's process with SIGKILL and resumes it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support import stop_executing, wait_until

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.ids import NodeId, RunId
from counterpoint.store import ForkPoint, RunStore, SQLiteStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))
import fork_graph  # noqa: E402

ALL = {"source", "double", "other", "combine", "finish"}


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    fork_graph.RAN.clear()


def _ran() -> Counter[str]:
    counts = Counter(fork_graph.RAN)
    fork_graph.RAN.clear()
    return counts


def _reused(result: cp.RunResult) -> set[str]:
    return {k for k, n in result.nodes.items() if n.reused}


def _parent(store: RunStore) -> cp.RunResult:
    result = cp.run_sync(fork_graph.graph, store=store)
    assert result.ok and result["finish"] == "total 14"
    assert _ran() == Counter(ALL)
    return result


# ------------------------------------------------------------------ what is reused
def test_fork_at_a_node_reruns_it_and_what_depends_on_it_only(store: RunStore) -> None:
    parent = _parent(store)
    fork = cp.fork_sync(parent.run_id, at="double", store=store)
    assert fork.ok and fork.outputs == parent.outputs
    assert _ran() == Counter({"double", "combine", "finish"})
    assert _reused(fork) == {"source", "other"}


def test_fork_at_a_seq_reuses_the_successes_logged_up_to_it(store: RunStore) -> None:
    parent = _parent(store)
    events = store.events(parent.run_id)
    successes = [e for e in events if e.kind is EventKind.NODE_SUCCEEDED]
    cut = successes[1].seq  # the second success: everything logged up to it is kept
    before = {e.node for e in successes if e.seq <= cut}
    fork = cp.fork_sync(parent.run_id, at=cut, store=store)
    assert fork.ok and fork.outputs == parent.outputs
    assert _reused(fork) == before
    assert set(_ran()) == ALL - before
    assert store.run(fork.run_id).forked_from == ForkPoint(run=parent.run_id, seq=cut)


def test_a_fork_at_every_seq_ends_as_the_parent_did_rerunning_only_the_rest() -> None:
    store = cp.MemoryStore()
    parent = _parent(store)
    events = store.events(parent.run_id)
    for cut in range(1, len(events) + 1):
        logged = {e.node for e in events[:cut] if e.kind is EventKind.NODE_SUCCEEDED}
        fork = cp.fork_sync(parent.run_id, at=cut, store=store)
        assert fork.ok and fork.outputs == parent.outputs, cut
        assert _reused(fork) == logged, cut
        assert _ran() == Counter(ALL - logged), cut  # each node that was not reused ran once


def test_a_graph_other_than_the_recorded_one_is_refused(store: RunStore) -> None:
    parent = _parent(store)
    other = cp.Graph("forked")
    other.add("source", fork_graph.source)
    with pytest.raises(cp.ForkError, match="differs from the one the run recorded"):
        cp.fork_sync(parent.run_id, graph=other, store=store)


def test_a_replaced_step_changes_what_depends_on_it(store: RunStore) -> None:
    parent = _parent(store)
    fork = cp.fork_sync(parent.run_id, replace={"double": fork_graph.triple}, store=store)
    assert fork.ok
    assert (fork["double"], fork["combine"], fork["finish"]) == (6, 16, "total 16")
    assert _ran() == Counter({"triple", "combine", "finish"})
    assert _reused(fork) == {"source", "other"}


def test_a_replaced_value_is_the_nodes_output_without_running_it(store: RunStore) -> None:
    parent = _parent(store)
    fork = cp.fork_sync(parent.run_id, replace={"other": 100}, store=store)
    assert fork["combine"] == 104 and fork["other"] == 100
    assert _ran() == Counter({"combine", "finish"})
    assert _reused(fork) == {"source", "double"}


def test_a_changed_input_invalidates_the_nodes_that_read_it(store: RunStore) -> None:
    graph = cp.Graph("scaled")
    n = graph.input("n", int)
    calls: list[str] = []

    def scale(n: int, factor: int) -> int:
        calls.append("scale")
        return n * factor

    def inc(x: int) -> int:
        calls.append("inc")
        return x + 1

    def fixed() -> int:
        calls.append("fixed")
        return 7

    graph.add("inc", inc, x=graph.add("scale", scale, n=n, factor=3))
    graph.add("fixed", fixed)
    parent = cp.run_sync(graph, inputs={"n": 2}, store=store)
    calls.clear()
    same = cp.fork_sync(parent.run_id, inputs={"n": 2}, graph=graph, store=store)
    assert calls == [] and _reused(same) == {"scale", "inc", "fixed"}
    fork = cp.fork_sync(parent.run_id, inputs={"n": 5}, graph=graph, store=store)
    assert (fork["scale"], fork["inc"], fork["fixed"]) == (15, 16, 7)
    assert sorted(calls) == ["inc", "scale"]
    assert _reused(fork) == {"fixed"}


def test_a_fork_resumes_from_its_own_log_alone(store: RunStore) -> None:
    parent = _parent(store)
    fork = cp.fork_sync(parent.run_id, at="combine", store=store)
    events = store.events(fork.run_id)
    assert events[0].kind is EventKind.RUN_CREATED
    copied = [e for e in events if (e.data or {}).get("reused")]
    assert {e.node for e in copied} == {"source", "double", "other"}
    for event in copied:  # each copy names the parent's event it came from
        origin = store.events(parent.run_id)[event.data["reused"]["seq"] - 1]  # type: ignore[index]
        assert (origin.kind, origin.node, origin.value) == (event.kind, event.node, event.value)
    assert _ran() == Counter({"combine", "finish"})
    again = asyncio.run(cp.resume(fork.run_id, store=store))
    assert again.outputs == fork.outputs and _ran() == Counter()  # rebuilt from its log


# ------------------------------------------------------------------ lineage
def test_lineage_is_recorded_both_ways_and_a_fork_can_be_forked(store: RunStore) -> None:
    parent = _parent(store)
    first = cp.fork_sync(parent.run_id, at="double", store=store)
    second = cp.fork_sync(parent.run_id, replace={"other": 1}, store=store)
    grandchild = cp.fork_sync(first.run_id, replace={"double": fork_graph.triple},
                              store=store)
    assert grandchild["finish"] == "total 16"
    assert _reused(grandchild) == {"source", "other"}
    assert store.run(first.run_id).forked_from == ForkPoint(
        run=parent.run_id, seq=len(store.events(parent.run_id)), node=NodeId("double"))
    assert store.run(grandchild.run_id).forked_from.run == first.run_id  # type: ignore[union-attr]
    assert store.run(parent.run_id).forked_from is None
    assert [r.run_id for r in store.forks(parent.run_id)] == [first.run_id, second.run_id]
    assert [r.run_id for r in store.forks(first.run_id)] == [grandchild.run_id]
    assert store.forks(grandchild.run_id) == []


def test_the_parents_log_is_not_touched(store: RunStore) -> None:
    parent = _parent(store)
    before = [(e.seq, e.kind, e.node, e.data, e.value) for e in store.events(parent.run_id)]
    cp.fork_sync(parent.run_id, at="double", store=store)
    after = [(e.seq, e.kind, e.node, e.data, e.value) for e in store.events(parent.run_id)]
    assert after == before


# ------------------------------------------------------------------ misuse
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"at": 999}, "out of range: the run has events 1.."),
    ({"at": 0}, "out of range"),
    ({"at": "nowhere"}, "names node 'nowhere', which the run does not have"),
    ({"replace": {"ghost": 1}}, "--replace names node 'ghost'"),
    ({"replace": {"double": fork_graph.combine}}, "cannot replace node 'double'"),
    ({"inputs": {"n": 1}}, "has no input(s) ['n']"),
])
def test_a_bad_fork_is_refused_before_anything_is_written(
        store: RunStore, kwargs: dict[str, Any], message: str) -> None:
    parent = _parent(store)
    runs = len(store.runs())
    with pytest.raises(cp.ForkError, match=re.escape(message)):
        cp.fork_sync(parent.run_id, store=store, **kwargs)
    assert len(store.runs()) == runs
    assert _ran() == Counter()


def test_a_graph_no_file_defines_needs_graph(store: RunStore) -> None:
    calls: list[str] = []
    parent = cp.run_sync(_map_graph(calls), store=store)
    with pytest.raises(cp.SourceError, match=r"^cannot fork: "):
        cp.fork_sync(parent.run_id, store=store)
    assert cp.fork_sync(parent.run_id, graph=_map_graph(calls), store=store).ok


def test_an_unknown_run_is_not_found(store: RunStore) -> None:
    with pytest.raises(cp.RunNotFound):
        cp.fork_sync("r-nothing", store=store)


# ------------------------------------------------------------------ live and interrupted
def test_forking_an_interrupted_run_reruns_what_was_in_flight() -> None:
    store = cp.MemoryStore()
    gate = asyncio.Event()

    async def held(total: int) -> str:
        await gate.wait()
        return f"held {total}"

    graph = cp.Graph("held")
    graph.add("finish", held, total=graph.add("combine", fork_graph.combine,
                                                x=graph.add("double", fork_graph.double,
                                                            x=graph.add("source",
                                                                        fork_graph.source)),
                                                y=graph.add("other", fork_graph.other)))

    async def scenario() -> tuple[cp.RunResult, cp.RunResult]:
        handle = await cp.start(graph, store=store)
        await _until(lambda: handle.state.nodes[NodeId("finish")].status is cp.NodeStatus.RUNNING)
        await stop_executing(handle)  # the process "died" with finish in flight
        assert store.run(handle.run_id).status == "running"
        _ran()
        gate.set()
        fork = await cp.fork(handle.run_id, store=store, graph=graph)
        return fork, await cp.resume(handle.run_id, store=store, graph=graph)

    fork, resumed = asyncio.run(scenario())
    assert fork.ok and fork["finish"] == "held 14"
    assert _reused(fork) == {"source", "double", "other", "combine"}
    assert resumed.ok  # the parent is still resumable after being forked


def test_forking_a_live_run_reads_what_it_logged_so_far() -> None:
    store = cp.MemoryStore()
    gate = asyncio.Event()

    async def held(total: int) -> str:
        await gate.wait()
        return f"held {total}"

    graph = cp.Graph("live")
    graph.add("finish", held, total=graph.add("combine", fork_graph.combine,
                                                x=graph.add("double", fork_graph.double,
                                                            x=graph.add("source",
                                                                        fork_graph.source)),
                                                y=graph.add("other", fork_graph.other)))

    async def scenario() -> tuple[cp.RunResult, cp.RunResult]:
        handle = await cp.start(graph, store=store)
        await _until(lambda: handle.state.nodes[NodeId("finish")].status is cp.NodeStatus.RUNNING)
        await handle.flush()  # what the state shows is in the log (its events go in batches)
        fork = await cp.fork(handle.run_id, replace={"finish": "given"}, store=store,
                             graph=graph)
        gate.set()
        return fork, await handle.result()

    fork, parent = asyncio.run(scenario())
    assert fork.ok and fork["finish"] == "given"
    assert _reused(fork) == {"source", "double", "other", "combine"}
    assert parent.ok and parent["finish"] == "held 14"
    assert Counter(fork_graph.RAN) == Counter({"source", "double", "other", "combine"})


async def _until(check: Any) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while not check():
        assert loop.time() < deadline, "timed out waiting for the run"
        await asyncio.sleep(0.005)


# ------------------------------------------------------------------ maps and sub-runs
def _map_graph(calls: list[str]) -> cp.Graph:
    def items() -> list[int]:
        calls.append("items")
        return [1, 2, 3]

    def square(x: int) -> int:
        calls.append(f"square {x}")
        return x * x

    def add(a: int, b: int) -> int:
        calls.append("add")
        return a + b

    def total(xs: list[int], extra: int) -> int:
        calls.append("total")
        return sum(xs) + extra

    inner = cp.Graph("inner")
    inner.output(inner.add("add", add, a=inner.input("a", int), b=10))

    graph = cp.Graph("mapped")
    squares = graph.map("square", square, over=graph.add("items", items))
    sub = graph.add("sub", inner, a=5)
    graph.add("total", total, xs=squares, extra=sub)
    return graph


def test_map_items_and_sub_runs_in_the_prefix_are_reused(store: RunStore) -> None:
    calls: list[str] = []
    graph = _map_graph(calls)
    parent = cp.run_sync(graph, store=store)
    assert parent["total"] == 14 + 15
    calls.clear()
    fork = cp.fork_sync(parent.run_id, at="total", graph=graph, store=store)
    assert fork["total"] == parent["total"]
    assert calls == ["total"]
    assert _reused(fork) == {"items", "square[0]", "square[1]", "square[2]", "square", "sub"}


def test_forking_at_a_map_reruns_its_items_and_one_item_can_be_replaced(
        store: RunStore) -> None:
    calls: list[str] = []
    graph = _map_graph(calls)
    parent = cp.run_sync(graph, store=store)
    calls.clear()
    fork = cp.fork_sync(parent.run_id, at="square", graph=graph, store=store)
    assert fork["total"] == parent["total"]
    assert sorted(calls) == ["square 1", "square 2", "square 3", "total"]
    assert _reused(fork) == {"items", "sub"}
    calls.clear()
    one = cp.fork_sync(parent.run_id, replace={"square[1]": 100}, graph=graph, store=store)
    assert one["square"] == [1, 100, 9] and one["total"] == 110 + 15
    assert calls == ["total"]
    assert _reused(one) == {"items", "square[0]", "square[2]", "sub"}


def test_a_rerun_sub_graph_node_gets_a_sub_run_of_the_fork(store: RunStore) -> None:
    calls: list[str] = []
    graph = _map_graph(calls)
    parent = cp.run_sync(graph, store=store)
    calls.clear()
    fork = cp.fork_sync(parent.run_id, at="sub", graph=graph, store=store)
    assert fork["total"] == parent["total"]
    assert sorted(calls) == ["add", "total"]
    child = store.run(RunId(f"{fork.run_id}/sub"))
    assert child.parent == fork.run_id and child.status == "succeeded"


# ------------------------------------------------------------------ live edits
def test_a_live_edit_is_kept_when_its_node_is_reused_and_made_again_when_it_reruns(
        store: RunStore) -> None:
    parent = cp.run_sync(fork_graph.planned, store=store)
    assert parent["extra"] == 3
    assert _ran() == Counter({"source", "planner", "extra", "other"})
    kept = cp.fork_sync(parent.run_id, at="other", store=store)
    assert kept.ok and kept["extra"] == 3 and _ran() == Counter({"other"})
    assert _reused(kept) == {"source", "planner", "extra"}
    again = cp.fork_sync(parent.run_id, at="planner", store=store)
    assert again.ok and again["extra"] == 3
    assert _ran() == Counter({"planner", "extra"})  # its edit was made again, once
    edits = [e for e in store.events(again.run_id) if e.kind is EventKind.PATCH_APPLIED]
    assert len(edits) == 1 and not (edits[0].data or {}).get("reused")


# ------------------------------------------------------------------ model calls
def test_reused_model_calls_come_from_the_log_and_rerun_ones_from_the_cache(
        store: RunStore) -> None:
    model = cp.Model(cp.ScriptedModel(["Lisbon", "Porto"], name="fork-test"))

    async def ask(country: str) -> str:
        return (await model.generate(f"A city in {country}?")).text

    async def pair(a: str, b: str) -> str:
        return f"{a} and {b}"

    graph = cp.Graph("cities")
    graph.add("pair", pair, a=graph.add("pt", ask, country="Portugal"),
              b=graph.add("pt2", ask, country="Portugal, not Lisbon"))
    parent = cp.run_sync(graph, store=store)
    assert parent.usage.calls == 2
    downstream = cp.fork_sync(parent.run_id, at="pair", graph=graph, store=store)
    assert (downstream.usage.reused, downstream.usage.calls) == (2, 0)
    assert downstream.usage.reuse_share == 1.0
    again = cp.fork_sync(parent.run_id, at="pt", graph=graph, store=store)
    assert (again.usage.reused, again.usage.cache_hits, again.usage.calls) == (1, 1, 0)
    assert again["pair"] == parent["pair"]


# ------------------------------------------------------------------ crash
def _runner(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(FIXTURES / "fork_runner.py"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})


def _done(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def test_a_fork_killed_while_running_resumes_without_redoing_what_it_reused(
        tmp_path: Path) -> None:
    db, side, gate = tmp_path / "runs.db", tmp_path / "side.txt", tmp_path / "gate"
    env = {"FORK_SIDE_FILE": str(side), "FORK_GATE_FILE": str(gate)}
    gate.touch()
    assert _done(_runner("run", str(db), "r-parent", env=env))["status"] == "succeeded"
    side.unlink()
    gate.unlink()  # the fork's finish waits for the gate: the process is killed there
    proc = _runner("fork", str(db), "r-parent", "r-fork", env=env)

    def finish_started() -> bool:
        reader = SQLiteStore(db)
        try:
            return any(e.kind is EventKind.NODE_STARTED and e.node == "finish"
                       for e in reader.events(RunId("r-fork")))
        except cp.RunNotFound:
            return False
        finally:
            reader.close()

    wait_until(finish_started, "the fork's finish node to start")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    gate.touch()
    result = _done(_runner("resume", str(db), "r-fork", env=env))
    assert result["status"] == "succeeded"
    assert result["outputs"]["finish"] == "total 16"  # the replacement held across the crash
    ran = Counter(side.read_text().split())
    assert ran == Counter({"triple": 1, "combine": 1, "finish": 1})  # finish ran only after
    store = SQLiteStore(db)
    try:
        assert store.run(RunId("r-fork")).forked_from == ForkPoint(
            run=RunId("r-parent"), seq=len(store.events(RunId("r-parent"))),
            node=NodeId("double"))
        assert [r.run_id for r in store.forks(RunId("r-parent"))] == ["r-fork"]
    finally:
        store.close()
