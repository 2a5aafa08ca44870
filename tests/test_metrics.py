"""Metrics keep waiting apart from running (counterpoint.metrics)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.backend import InProcessBackend


def test_a_sync_step_waiting_for_a_thread_shows_as_waiting() -> None:
    """Regression: a step that waited for one of the pool's threads counted as running, so
    metrics said queue wait 0 and a width that no thread pool had."""
    first_in = threading.Event()

    def blocking(i: int) -> int:
        if not first_in.is_set():
            first_in.set()
            time.sleep(0.05)  # holds the only thread while the other waits for it
        return i

    g = cp.Graph("threads")
    g.add("a", blocking, i=1)
    g.add("b", blocking, i=2)
    result = cp.run_sync(g, store="memory", backend=InProcessBackend(threads=1))
    assert result.ok
    metrics = result.metrics
    waits = {k: n.waited.get("thread", 0.0) for k, n in metrics.nodes.items()}
    first, second = sorted(waits.values())
    assert second > first and second > 0, waits  # one waited for the other's thread
    assert metrics.waited["thread"] == pytest.approx(sum(waits.values()))
    waiter = max(waits, key=lambda k: waits[k])
    timing = metrics.nodes[waiter]
    # busy is what is left of the run time after every wait (a run's first steps also
    # wait for its first events to be durable: waited['log'])
    assert timing.busy_time == pytest.approx(timing.run_time - sum(timing.waited.values()))
    assert metrics.total_busy_time < metrics.total_run_time


def test_metrics_come_back_from_the_log_alone() -> None:
    def blocking(i: int) -> int:
        time.sleep(0.02)
        return i

    g = cp.Graph("threads-log")
    for i in range(3):
        g.add(f"n{i}", blocking, i=i)
    store = cp.MemoryStore()
    result = cp.run_sync(g, store=store, backend=InProcessBackend(threads=1))
    from counterpoint.cli.projection import project
    from counterpoint.metrics import compute

    replayed = compute(project(result.run_id, store.events(result.run_id)).state, 0.0)
    assert replayed.waited == result.metrics.waited
    assert replayed.waited.get("thread", 0.0) > 0


def test_queue_waits_of_the_run_and_of_its_log_agree() -> None:
    """Regression: a node that became ready and started in one burst has no node_ready
    record (its node_started implies it), so the log says it waited 0, while the run's own
    state counted from the run's creation: the `counterpoint run` summary showed 0.05-0.12 s
    of "waiting for a slot" per node that `show` of the same run showed as 0."""
    async def step(i: int) -> int:
        return i

    g = cp.Graph("waits-agree")
    for i in range(8):
        g.add(f"n{i}", step, i=i)  # 8 ready at once, 2 slots: 6 really wait
    store = cp.MemoryStore()
    result = cp.run_sync(g, store=store, options=cp.RunOptions(max_concurrency=2))
    from counterpoint.cli.projection import project
    from counterpoint.metrics import compute

    replayed = compute(project(result.run_id, store.events(result.run_id)).state, 0.0)
    live = {k: n.queue_wait for k, n in result.metrics.nodes.items()}
    assert live == {k: n.queue_wait for k, n in replayed.nodes.items()}
    assert sorted(live.values())[:2] == [0.0, 0.0]  # the two that started at once
    assert result.metrics.queue_wait == replayed.queue_wait


def test_waiting_for_a_models_concurrency_slot_shows_as_waiting() -> None:
    """Regression: nodes calling a model that serves one call at a time "ran in parallel"
    in the metrics while they queued for it."""
    model = cp.Model(cp.ScriptedModel(["one", "two", "three"], delay=0.05), max_concurrency=1,
                     cache=False)

    async def ask(i: int) -> str:
        answer = await model.generate(f"question {i}")
        return answer.text

    g = cp.Graph("one-slot")
    for i in range(3):
        g.add(f"q{i}", ask, i=i)
    result = cp.run_sync(g, store="memory")
    assert result.ok, result.nodes
    waits = sorted(n.waited.get("model", 0.0) for n in result.metrics.nodes.values())
    assert waits[0] == 0.0 and waits[1] > 0 and waits[2] > waits[1]
    assert result.metrics.mean_parallel_width < 1.5  # one call at a time did the work


def test_a_fork_counts_no_waiting_for_the_nodes_it_reused() -> None:
    """A reused node ran in the parent run, not in the fork: its recorded waits (a thread,
    a model slot) are not the fork's, as its run time is not."""
    first_in = threading.Event()

    def blocking(i: int) -> int:
        if not first_in.is_set():
            first_in.set()
            time.sleep(0.05)
        return i

    g = cp.Graph("threads")
    g.add("a", blocking, i=1)
    g.add("b", blocking, i=2)
    store = cp.MemoryStore()
    parent = cp.run_sync(g, store=store, backend=InProcessBackend(threads=1))
    assert parent.metrics.waited.get("thread", 0.0) > 0
    fork = cp.fork_sync(parent.run_id, graph=g, store=store)
    assert all(r.reused for r in fork.nodes.values())
    assert fork.metrics.waited == {} and fork.metrics.total_run_time == 0.0
    assert all(not t.waited for t in fork.metrics.nodes.values())
    store.close()


# ------------------------------------------------------------------ nodes added by an edit
def _spawning_log() -> list[Any]:
    """Node ``a`` runs 0-5 s and at 1 s adds ``b`` (a live edit), which runs 1-10 s."""
    from counterpoint.events import Event, EventKind
    from counterpoint.ids import NodeId

    t = 1000.0
    events = [
        Event(EventKind.RUN_CREATED, t, data={"graph": "g", "nodes": 1, "deps": {"a": []}}),
        Event(EventKind.NODE_STARTED, t, node=NodeId("a"), attempt=1),
        Event(EventKind.PATCH_APPLIED, t + 1, data={
            "reason": "grow", "by": "a", "add": [{"id": "b", "inputs": {}, "after": []}]}),
        Event(EventKind.NODE_STARTED, t + 1, node=NodeId("b"), attempt=1),
        Event(EventKind.NODE_SUCCEEDED, t + 5, node=NodeId("a"), attempt=1),
        Event(EventKind.NODE_SUCCEEDED, t + 10, node=NodeId("b"), attempt=1),
        Event(EventKind.RUN_FINISHED, t + 10, data={"status": "succeeded"})]
    for seq, event in enumerate(events, 1):
        event.seq = seq
    return events


def test_the_critical_path_runs_through_the_node_whose_edit_added_a_node() -> None:
    """``b`` could not start before ``a`` added it: the path is a -> b, and of ``a`` only
    the second before its edit counts (a -> b is the makespan, not 5 + 9 s)."""
    from counterpoint.history import project, spawned_by
    from counterpoint.ids import RunId
    from counterpoint.metrics import compute

    projection = project(RunId("r"), _spawning_log())
    assert [(node, spawn.by) for node, spawn in projection.spawned.items()] == [("b", "a")]
    assert spawned_by(_spawning_log()) == projection.spawned
    metrics = compute(projection.state, 0.0, projection.spawned)
    assert metrics.critical_path_nodes == ("a", "b")
    assert metrics.critical_path == pytest.approx(10.0) == metrics.makespan
    # a projection's state records no spawns (the log's are in projection.spawned), so
    # without them only the dependencies count
    assert compute(projection.state, 0.0).critical_path_nodes == ("b",)


SPAWNED = {"t1": "plan", "t2": "plan", "verify-1": "plan", "answer": "plan",
           "t3": "verify-1", "verify-2": "verify-1"}


def test_a_goal_runs_critical_path_begins_with_its_planning() -> None:
    """Regression: a goal run's path began at its first subtask, as if planning took no
    time; the ``plan`` node's edit added the subtasks (and each re-planning verify the
    next round)."""
    from goal_runs import goal_run

    from counterpoint.history import project
    from counterpoint.metrics import compute

    store = cp.MemoryStore()
    result = goal_run(store)
    projection = project(result.run_id, store.events(result.run_id))
    path = compute(projection.state, 0.0, projection.spawned).critical_path_nodes
    assert path == ("plan", "t1", "t2", "verify-1", "t3", "verify-2", "answer")
    # the run's own result says the same: its state recorded which node's edit added
    # which nodes (RunResult.metrics had the dependencies alone, and began after planning)
    assert result.metrics.critical_path_nodes == path
    assert {n: s.by for n, s in result.state.spawned.items()} == SPAWNED
