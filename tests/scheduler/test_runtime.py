"""The executor: readiness-driven dispatch, limits, failures, retries, edits, deadlines.

What every execution backend must keep (statuses, retries, timeouts, cancel, edits, map,
sub-runs, resume) is in tests/backends/test_conformance.py, which runs on each backend;
what is left here is the in-process executor's own behaviour."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
from steps import add, const, run, sleep_then

import counterpoint as cp
from counterpoint import codec
from counterpoint.events import EventKind
from counterpoint.state import NodeStatus, RunStatus


def test_sync_steps_run_in_worker_threads() -> None:
    loop_thread = threading.get_ident()

    def blocking() -> int:
        return threading.get_ident()

    g = cp.Graph("sync")
    g.add("s", blocking)
    result = run(g)
    assert result["s"] != loop_thread


def test_a_sync_step_reads_the_nodes_while_the_loop_adds_some() -> None:
    """``ctx.nodes()`` from a worker thread while an async sibling keeps adding nodes: a
    thread switch inside a plain iteration over the live dict raised "dictionary changed
    size during iteration" (a tiny switch interval makes such switches near certain)."""
    adds = 60

    def reader(ctx: cp.NodeContext) -> int:
        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            for calls in range(1, 100_000):
                if len(ctx.nodes()) >= 500 + 2 + adds * 10:
                    return calls
            return -1
        finally:
            sys.setswitchinterval(old)

    async def grower(ctx: cp.NodeContext) -> int:
        for i in range(adds):
            edit = cp.Edit()
            for j in range(10):
                edit.add(f"x{i}_{j}", const)
            ctx.apply(edit)
            await asyncio.sleep(0.001)
        return adds

    g = cp.Graph("grow-while-reading")
    for i in range(500):
        g.add(f"n{i}", const)
    g.add("reader", reader)
    g.add("grower", grower)
    result = run(g)
    assert result.nodes["reader"].error is None
    assert result.ok and result["reader"] > 0 and len(result.nodes) == 500 + 2 + adds * 10


def test_indexed_inputs_and_graph_inputs() -> None:
    async def pair() -> dict[str, int]:
        return {"x": 4, "y": 5}

    g = cp.Graph("idx")
    base = g.input("base")
    p = g.add("p", pair)
    g.add("s", add, a=p["x"], b=base)
    result = run(g, inputs={"base": 10})
    assert result["s"] == 14
    with pytest.raises(cp.UserError, match=r"needs input\(s\) \['base'\]"):
        run(g)


def test_keyword_inputs_arrive_in_the_order_they_were_declared() -> None:
    """Literals, node outputs and graph inputs interleaved: a ``**kwargs`` step sees them
    in declaration order, each resolved."""
    async def pair() -> dict[str, int]:
        return {"x": 4, "y": 5}

    async def collect(**inputs: Any) -> list[tuple[str, Any]]:
        return list(inputs.items())

    g = cp.Graph("order")
    base = g.input("base")
    p = g.add("p", pair)
    one = g.add("one", const, value=1)
    g.add("c", collect, z="lit", y=p["y"], x=base, w=one, v=[1, 2], u=p)
    result = run(g, inputs={"base": 10})
    assert result["c"] == [("z", "lit"), ("y", 5), ("x", 10), ("w", 1), ("v", [1, 2]),
                           ("u", {"x": 4, "y": 5})]
    spec = g.nodes[cp.NodeId("c")]
    assert list(spec.refs) == ["y", "x", "w", "u"]  # derived once per spec


def test_slow_branch_does_not_hold_back_an_unrelated_one() -> None:
    order: list[str] = []

    async def record(name: str, seconds: float = 0.0) -> str:
        await asyncio.sleep(seconds)
        order.append(name)
        return name

    g = cp.Graph("branches")
    slow = g.add("slow", record, name="slow", seconds=0.3)
    fast1 = g.add("fast1", record, name="fast1", seconds=0.01)
    fast2 = g.add("fast2", record, name="fast2", seconds=0.01, after=[fast1])
    g.add("fast3", record, name="fast3", after=[fast2])
    g.add("end", record, name="end", after=[slow])
    result = run(g)
    assert result.ok
    # the fast chain finished completely while the slow node was still running
    assert order.index("fast3") < order.index("slow")


class Gauge:
    """Counts how many calls of :meth:`step` are in flight at once."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0

    async def step(self, i: int) -> int:
        self.running += 1
        self.peak = max(self.peak, self.running)
        await asyncio.sleep(0.01)
        self.running -= 1
        return i


def test_max_concurrency_is_never_exceeded() -> None:
    gauge = Gauge()
    g = cp.Graph("limited")
    for i in range(20):
        g.add(f"n{i}", gauge.step, i=i)
    result = run(g, options=cp.RunOptions(max_concurrency=3))
    assert result.ok and gauge.peak == 3
    assert result.metrics.peak_parallel_width == 3


def test_named_resource_limits() -> None:
    gauge = Gauge()
    llm_call = gauge.step
    g = cp.Graph("resources")
    for i in range(12):
        g.add(f"llm{i}", llm_call, i=i, resources={"provider": 1})
    result = run(g, options=cp.RunOptions(limits={"provider": 4}))
    assert result.ok and gauge.peak == 4
    with pytest.raises(cp.UserError, match=r"needs 5 of 'provider' but the run's limit is 4"):
        g.add("greedy", llm_call, i=0, resources={"provider": 5})
        run(g, options=cp.RunOptions(limits={"provider": 4}))



def test_retries_with_backoff_then_success() -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ConnectionError("transient")
        return "ok"

    g = cp.Graph("retry")
    g.add("f", flaky, policy=cp.Policy(retries=3, backoff=cp.Backoff(initial=0.01)))
    result = run(g, store="memory")
    assert result["f"] == "ok" and calls == 3
    assert result.nodes["f"].attempts == 3
    assert result.metrics.retries == 2


def test_non_retryable_errors_are_not_retried() -> None:
    calls = 0

    async def fatal() -> str:
        nonlocal calls
        calls += 1
        raise cp.NodeFailed("invalid API key", retryable=False)

    g = cp.Graph("fatal")
    g.add("f", fatal, retries=5)
    result = run(g)
    assert calls == 1 and result.status is RunStatus.FAILED



def test_choosing_an_unknown_successor_fails_clearly() -> None:
    async def route() -> cp.Choose:
        return cp.Choose("nowhere")

    g = cp.Graph("bad-branch")
    r = g.add("route", route)
    g.add("x", const, after=[r])
    result = run(g)
    assert "chose ['nowhere'], which are not its successors" in \
        (result.nodes["route"].error or {})["message"]



def test_unserializable_output_fails_the_node_without_losing_the_log(tmp_path: Path) -> None:
    async def handle() -> object:
        return threading.Lock()

    g = cp.Graph("unserializable")
    g.add("ok", const, value=1)
    g.add("bad", handle)
    store = cp.SQLiteStore(tmp_path / "runs.db")
    result = cp.run_sync(g, store=store)
    error = result.nodes["bad"].error or {}
    assert error["type"] == "OutputNotSerializable" and "cannot be stored as JSON" in \
        error["message"]
    kinds = [e.kind for e in store.events(result.run_id)]
    assert kinds[0] is EventKind.RUN_CREATED and kinds[-1] is EventKind.RUN_FINISHED
    store.close()



def test_an_iterator_output_fails_the_node_instead_of_being_consumed(tmp_path: Path) -> None:
    """Regression: a generator (or an open file) was stored as the list it yields, which
    used it up, so the dependents got it empty while the log said otherwise."""

    async def rows() -> object:
        return (i for i in range(3))

    async def total(items: object) -> int:
        return sum(items)  # type: ignore[call-overload]

    g = cp.Graph("iterator")
    g.add("total", total, items=g.add("rows", rows))
    store = cp.SQLiteStore(tmp_path / "runs.db")
    result = cp.run_sync(g, store=store)
    error = result.nodes["rows"].error or {}
    assert error["type"] == "OutputNotSerializable" and "is an iterator" in error["message"]
    assert result.nodes["rows"].attempts == 1  # not retried: it would fail again
    assert result.nodes["total"].status is cp.NodeStatus.BLOCKED
    assert not [e for e in store.events(result.run_id) if e.kind is EventKind.NODE_SUCCEEDED]
    store.close()


def test_an_iterator_inside_an_output_fails_the_node_and_says_where() -> None:
    """Regression: a generator inside a dict or list was stored as the list it yields
    while the dependents got the live output, its generator used up: they read an empty
    list and the run succeeded."""

    async def rows() -> dict[str, Any]:
        return {"name": "r", "batches": [[1, 2], (i for i in range(3))]}

    async def total(data: dict[str, Any]) -> int:
        return sum(sum(b) for b in data["batches"])

    g = cp.Graph("nested-iterator")
    g.add("total", total, data=g.add("rows", rows))
    result = cp.run_sync(g, store="memory")
    error = result.nodes["rows"].error or {}
    assert error["type"] == "OutputNotSerializable"
    assert "holds an iterator (generator) at ['batches'][1]" in error["message"]
    assert result.nodes["total"].status is cp.NodeStatus.BLOCKED
    # plain data, sets and a container that repeats a list are stored as before
    assert codec.encode({"s": {1}, "l": [[1], [1]], "t": (None, 1.5, b"x")}) == \
        '{"s":[1],"l":[[1],[1]],"t":[null,1.5,"x"]}'


def test_a_coroutine_returned_unawaited_is_named_and_closed() -> None:
    """An async step that returns ``f()`` where it meant ``await f()``: the error says so,
    and the coroutine is closed (Python warned "coroutine ... was never awaited" when it
    was collected). A plain ``def`` step returning a coroutine is awaited: the callable
    contract."""
    made: list[Any] = []

    async def fetch() -> int:
        return 1

    async def forgot() -> object:
        made.append(fetch())
        return made[0]

    def sync_returns_one() -> object:
        return fetch()

    g = cp.Graph("unawaited")
    g.add("forgot", forgot)
    g.add("sync", sync_returns_one)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = cp.run_sync(g, store="memory")
        gc.collect()
    error = result.nodes["forgot"].error or {}
    assert error.get("type") == "OutputNotSerializable", error
    assert "awaitable that was not awaited" in error["message"]
    assert "`await f(...)`" in error["message"]
    assert result.nodes["forgot"].attempts == 1  # not retried: it would fail again
    assert made[0].cr_frame is None  # closed
    assert result.nodes["sync"].output == 1


def test_live_edit_from_outside_cancels_in_flight_and_replaces_pending() -> None:
    async def scenario() -> cp.RunResult:
        opened = asyncio.Event()

        async def gate() -> None:
            await opened.wait()

        g = cp.Graph("outside")
        gate_ref = g.add("gate", gate)
        g.add("long", sleep_then, seconds=10)
        g.add("later", const, value="old", after=[gate_ref])
        handle = await cp.start(g, store="memory")  # both roots run from its first burst
        edit = cp.Edit("operator change")
        edit.cancel("long")
        edit.replace("later", const, value="new", after=["gate"])
        handle.apply(edit)
        with pytest.raises(cp.PatchError, match="'gate' is running; only nodes that have not"):
            bad = cp.Edit()
            bad.edge("later", "gate")
            handle.apply(bad)
        opened.set()
        return await handle.result()

    result = asyncio.run(scenario())
    assert result.ok
    assert result.nodes["long"].status is NodeStatus.CANCELLED
    assert result["later"] == "new"



def test_learned_estimates_steer_the_order(tmp_path: Path) -> None:
    order: list[str] = []

    async def quick(tag: str) -> str:
        order.append(tag)
        return tag

    async def slow_head(tag: str) -> str:
        order.append(tag)
        await asyncio.sleep(0.05)
        return tag

    g = cp.Graph("learn")
    g.add("quick", quick, tag="quick")
    g.add("slow", slow_head, tag="slow")
    store = cp.SQLiteStore(tmp_path / "runs.db")
    opts = cp.RunOptions(max_concurrency=1)
    cp.run_sync(g, store=store, options=opts)
    estimates = {k.rpartition(".")[2]: v for k, v in store.estimates().items()}
    assert estimates["slow_head"] > estimates["quick"]
    order.clear()
    cp.run_sync(g, store=store, options=opts)
    assert order == ["slow", "quick"]  # the longer step is on the critical path: first
    store.close()


def test_metrics_are_consistent() -> None:
    g = cp.Graph("metrics")
    a = g.add("a", sleep_then, seconds=0.05, value=1)
    g.add("b", sleep_then, seconds=0.05, value=2, after=[a])
    g.add("c", sleep_then, seconds=0.05, value=3)
    m = run(g).metrics
    assert m.critical_path_nodes == ("a", "b")
    assert m.makespan >= m.critical_path > 0
    assert m.makespan_over_critical_path is not None and m.makespan_over_critical_path >= 1
    assert m.peak_parallel_width == 2
    assert set(m.nodes) == {"a", "b", "c"}
    assert all(t.queue_wait is not None and t.queue_wait >= 0 for t in m.nodes.values())


def test_invalid_options_are_user_errors() -> None:
    with pytest.raises(cp.UserError, match="max_concurrency must be >= 1"):
        cp.RunOptions(max_concurrency=0)
    with pytest.raises(cp.UserError, match="deadline must be > 0"):
        cp.RunOptions(deadline=-1)


def test_subscribing_after_the_end_gets_the_whole_run_and_ends() -> None:
    async def scenario() -> list[EventKind]:
        g = cp.Graph("late")
        g.add("a", const)
        handle = await cp.start(g, store="memory")
        await handle.result()
        return [e.kind async for e in handle.events()]

    assert asyncio.run(asyncio.wait_for(scenario(), timeout=10)) == [
        EventKind.RUN_CREATED, EventKind.NODE_STARTED, EventKind.NODE_SUCCEEDED,
        EventKind.RUN_FINISHED]


def test_a_subscriber_right_after_start_gets_every_event_from_the_first() -> None:
    """Regression: events 1-3 were missed by ``handle.events()`` right after ``start``."""
    async def scenario() -> tuple[list[int], list[int]]:
        g = cp.Graph("early")
        a = g.add("a", const)
        g.add("b", add, a=a, b=a)
        store = cp.MemoryStore()
        handle = await cp.start(g, store=store)
        seen = [e.seq async for e in handle.events()]
        await handle.result()
        return seen, [e.seq for e in store.events(handle.run_id)]

    seen, logged = asyncio.run(asyncio.wait_for(scenario(), timeout=10))
    assert seen == logged
    assert seen[0] == 1


def test_cancelling_a_subgraph_node_cancels_its_sub_run(tmp_path: Path) -> None:
    async def scenario() -> cp.RunResult:
        inside = asyncio.Event()

        async def wait() -> None:
            inside.set()
            await asyncio.sleep(10)

        inner = cp.Graph("inner-slow")
        inner.add("wait", wait)
        outer = cp.Graph("outer-cancel")
        outer.add("sub", inner)
        store = cp.SQLiteStore(tmp_path / "runs.db")
        handle = await cp.start(outer, store=store)
        await inside.wait()  # the sub-run is running its node
        handle.cancel()
        result = await handle.result()
        assert store.run(cp.RunId(f"{result.run_id}/sub")).status == "cancelled"
        store.close()
        return result

    result = asyncio.run(asyncio.wait_for(scenario(), timeout=10))
    assert result.status is RunStatus.CANCELLED
    assert result.nodes["sub"].status is NodeStatus.CANCELLED


def test_a_failing_store_ends_the_run_with_its_error(tmp_path: Path) -> None:
    """When the log cannot be written the run stops and says so; it does not hang."""
    import sqlite3

    store = cp.SQLiteStore(tmp_path / "runs.db")
    store.migrate()  # the file and its schema (otherwise made by the first write)
    conn = sqlite3.connect(store.path)
    conn.execute("DROP TABLE segments")  # every commit from now on fails
    conn.commit()
    conn.close()
    g = cp.Graph("doomed")
    previous = g.add("n0", sleep_then, seconds=0.01, value=0)
    for i in range(1, 30):
        previous = g.add(f"n{i}", sleep_then, seconds=0.01, value=i, after=[previous])

    async def scenario() -> None:
        with pytest.raises(cp.StoreError, match="no such table: segments"):
            await cp.run(g, store=store)

    asyncio.run(asyncio.wait_for(scenario(), timeout=20))


def test_an_event_the_store_cannot_take_ends_its_own_run_only(tmp_path: Path) -> None:
    """Runs sharing a store send it their events in the same pass of the loop: a run that
    records data JSON cannot hold stops with the error naming it, while the runs whose
    events went in that pass finish, their logs whole."""
    store = cp.SQLiteStore(tmp_path / "runs.db")

    async def careless(ctx: cp.NodeContext) -> int:
        await asyncio.sleep(0.01)  # its event leaves with the others' in one pass
        ctx.record(EventKind.AGENT_TURN, {"reply": object()})
        return 1

    bad = cp.Graph("careless")
    bad.add("a", careless)
    good = cp.Graph("tidy")
    good.add("b", sleep_then, after=[good.add("a", sleep_then, seconds=0.01, value=1)],
             seconds=0.0, value=2)

    async def scenario() -> list[Any]:
        return await asyncio.gather(cp.run(bad, store=store), *(cp.run(good, store=store)
                                                                for _ in range(5)),
                                    return_exceptions=True)

    try:
        failed, *others = asyncio.run(asyncio.wait_for(scenario(), timeout=20))
        assert isinstance(failed, cp.StoreError)
        assert "node 'a') cannot be stored" in str(failed) and "JSON-compatible" in str(failed)
        for result in others:
            assert result.status is RunStatus.SUCCEEDED
            kinds = [e.kind for e in store.events(result.run_id)]
            assert kinds[0] is EventKind.RUN_CREATED and kinds[-1] is EventKind.RUN_FINISHED
            assert store.run(result.run_id).status == "succeeded"
        bad_run = next(r for r in store.runs() if r.graph == "careless")
        assert [e.kind for e in store.events(bad_run.run_id)] == [
            EventKind.RUN_CREATED, EventKind.NODE_STARTED]  # what came before the culprit
    finally:
        store.close()


# ------------------------------------------------------------ regressions from review
def test_a_node_in_its_fallback_still_obeys_the_deadline() -> None:
    async def boom() -> int:
        raise ValueError("primary failed")

    async def slow_fallback() -> int:
        await asyncio.sleep(5)
        return 42

    g = cp.Graph("fallback-deadline")
    g.add("a", boom, fallback=slow_fallback)
    result = asyncio.run(asyncio.wait_for(
        cp.run(g, store="memory", options=cp.RunOptions(deadline=0.3)), timeout=4))
    assert result.status is RunStatus.TIMED_OUT
    assert result.nodes["a"].status is NodeStatus.CANCELLED



def test_a_new_edge_from_a_failed_node_blocks_a_ready_node() -> None:
    async def fail() -> int:
        raise ValueError("f broke")

    async def wire(ctx: cp.NodeContext) -> int:
        assert ctx.nodes()["b"] is NodeStatus.READY  # waiting for the single slot
        edit = cp.Edit()
        edit.edge("f", "b")
        ctx.apply(edit)
        return 1

    g = cp.Graph("edge-to-ready")
    g.add("f", fail, estimate=10)
    g.add("s", wire, estimate=5)
    g.add("b", const, estimate=1)
    result = run(g, options=cp.RunOptions(max_concurrency=1))
    assert result.nodes["b"].status is NodeStatus.BLOCKED


# --------------------------------------------------------------------------- task hand-over
# A node that succeeds hands its task to the first node its success starts (runtime
# ``_run_node``). These tests pin down what that must and must not change.


def _recording(tasks: dict[str, asyncio.Task[Any] | None]) -> Any:
    async def step(name: str, **_: Any) -> str:
        tasks[name] = asyncio.current_task()
        return name
    return step


def test_the_node_a_success_starts_runs_on_in_the_same_task() -> None:
    tasks: dict[str, asyncio.Task[Any] | None] = {}
    step = _recording(tasks)
    g = cp.Graph("handover")
    a = g.add("a", step, name="a")
    b = g.add("b", step, name="b", x=a)
    g.add("c", step, name="c", x=a)  # a's success starts b and c: one of them gets a's task
    g.add("d", step, name="d", x=b)
    result = run(g)
    assert result.ok
    assert result.outputs == {"a": "a", "b": "b", "c": "c", "d": "d"}
    assert tasks["a"] is not None
    shared = [n for n in "bc" if tasks[n] is tasks["a"]]
    assert len(shared) == 1, "exactly one of a's successors takes over its task"
    assert tasks["b"] is not tasks["c"]


def test_a_long_chain_of_steps_that_never_wait_still_lets_other_tasks_run() -> None:
    window = 128  # nodes; the runtime hands a new task over every _ADOPT_LIMIT (64) nodes
    ticks = 0
    seen: list[int] = []

    async def step(**_: Any) -> int:
        seen.append(ticks)
        return len(seen)

    async def scenario() -> cp.RunResult:
        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0)
                ticks += 1

        g = cp.Graph("long-chain")
        prev = g.add("n0", step)
        for i in range(1, 4 * window):
            prev = g.add(f"n{i}", step, x=prev)
        tick = asyncio.create_task(ticker())
        try:
            return await cp.run(g, store="memory")
        finally:
            tick.cancel()

    result = asyncio.run(scenario())
    assert result.ok and len(seen) == 4 * window
    for start in range(len(seen) - window):  # the other task ran in every stretch
        assert seen[start + window] > seen[start], f"other tasks starved after node {start}"


def test_cancelling_a_node_running_in_a_handed_over_task_cancels_only_that_node() -> None:
    tasks: dict[str, asyncio.Task[Any] | None] = {}
    hold = asyncio.Event()
    parked = asyncio.Event()

    async def first() -> int:
        tasks["first"] = asyncio.current_task()
        return 1

    async def waits(x: int) -> int:
        tasks["waits"] = asyncio.current_task()
        parked.set()
        await hold.wait()
        return x

    async def scenario() -> cp.RunResult:
        g = cp.Graph("cancel-handover")
        f = g.add("first", first)
        w = g.add("waits", waits, x=f)
        g.add("after", const, value=3, after=[w])
        g.add("other", sleep_then, seconds=0.05, value="kept")
        handle = await cp.start(g, store="memory")
        await parked.wait()  # "waits" is parked on the event
        edit = cp.Edit("not needed")
        edit.cancel("waits")
        handle.apply(edit)
        return await handle.result()

    result = asyncio.run(scenario())
    assert tasks["waits"] is tasks["first"], "the test needs 'waits' to run in first's task"
    assert result.nodes["first"].status is NodeStatus.SUCCEEDED
    assert result.nodes["waits"].status is NodeStatus.CANCELLED
    assert result.nodes["waits"].error == {"reason": "not needed"}
    assert result.nodes["after"].status is NodeStatus.CANCELLED
    assert result["other"] == "kept"


def test_a_task_that_swallowed_its_cancel_hands_over_nothing() -> None:
    tasks: dict[str, asyncio.Task[Any] | None] = {}
    started = asyncio.Event()

    async def stubborn() -> str:
        tasks["stubborn"] = asyncio.current_task()
        started.set()
        with contextlib.suppress(asyncio.CancelledError):  # ignores its cancellation
            await asyncio.sleep(10)
        return "done anyway"

    async def next_step(x: str) -> str:
        tasks["next"] = asyncio.current_task()
        await asyncio.sleep(0)  # a task still being cancelled would be cancelled here
        return x + "!"

    async def scenario() -> cp.RunResult:
        g = cp.Graph("stubborn")
        s = g.add("stubborn", stubborn)
        g.add("next", next_step, x=s)
        handle = await cp.start(g, store="memory")
        await started.wait()
        tasks["stubborn"].cancel()  # type: ignore[union-attr]  # not through the run
        return await handle.result()

    result = asyncio.run(scenario())
    assert result.ok, result.nodes
    assert result["next"] == "done anyway!"
    assert tasks["next"] is not tasks["stubborn"]


# --------------------------------------------------------------------------- wide dispatch
# A dispatch that starts _LOG_LATER nodes or more logs their node_started events after the
# loop has run the nodes' first steps. The log must not notice: numbers in order, every
# start before its end, and a flush barrier covers the starts too.


@pytest.mark.parametrize("barrier", [True, False], ids=["flush-barrier", "ends-at-once"])
def test_a_wide_fan_out_logs_every_start_in_order_before_its_end(barrier: bool) -> None:
    from counterpoint.scheduler.core import LOG_LATER as _LOG_LATER

    width = 3 * _LOG_LATER

    class Recording(cp.MemoryStore):
        """Notes which events had reached the store when a flush was asked for."""

        def __init__(self) -> None:
            super().__init__()
            self.appended: list[tuple[EventKind, str | None]] = []
            self.seqs: list[int] = []
            self.at_flush: list[set[tuple[EventKind, str | None]]] = []

        def append(self, run_id: cp.RunId, event: cp.Event) -> None:
            super().append(run_id, event)
            self.appended.append((event.kind, event.node))
            self.seqs.append(event.seq)

        async def flush(self) -> None:
            self.at_flush.append(set(self.appended))
            await super().flush()

    store = Recording()
    flushed_by: list[int] = []

    async def leaf(ctx: cp.NodeContext, i: int, x: int) -> int:
        if barrier and i == 0:  # the first leaf runs on in root's task, before the others
            flushed_by.append(len(store.at_flush))
            await ctx.flush()  # the barrier must log what the run has applied first
        if i % 3 == 1:
            return x + i  # ends in its first step, before the starts are logged
        await asyncio.sleep(0.001 * (i % 3))
        return x + i

    async def scenario() -> tuple[cp.RunResult, list[cp.Event]]:
        g = cp.Graph("wide")
        root = g.add("root", const, value=1)
        for i in range(width):  # leaf0 on the longest path: it takes over root's task
            g.add(f"leaf{i}", leaf, i=i, x=root, estimate=5.0 if i == 0 else None)
        handle = await cp.start(g, store=store)
        streamed = [e async for e in handle.events()]
        return await handle.result(), streamed

    result, streamed = asyncio.run(scenario())
    assert result.ok and result[f"leaf{width - 1}"] == width
    assert len(flushed_by) == barrier
    for index in flushed_by:
        assert (EventKind.NODE_STARTED, "leaf0") in store.at_flush[index]
    logged = store.events(result.run_id)
    # appended in the order of their numbers: what a crash leaves is always a prefix
    assert store.seqs == list(range(1, len(logged) + 1))
    assert [e.seq for e in logged] == store.seqs
    first = streamed[0].seq  # the subscription began after the run had started
    assert first <= 3 and [(e.seq, e.kind, e.node) for e in streamed] == \
        [(e.seq, e.kind, e.node) for e in logged[first - 1:]]
    position = {(e.kind, e.node): i for i, e in enumerate(logged)}
    for i in range(width):
        node = f"leaf{i}"
        assert position[(EventKind.NODE_STARTED, node)] < \
            position[(EventKind.NODE_SUCCEEDED, node)]


# --------------------------------------------------------------------------- outbox
# Events reach the store at the end of the loop's pass, a burst of many nodes in one call,
# in the order of their numbers; whatever needs them in the store sends them first.


def test_nodes_ending_in_one_pass_reach_the_store_together_in_order() -> None:
    class Counting(cp.MemoryStore):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[list[int]] = []

        def append_many(self, run_id: cp.RunId, events: Any) -> None:
            self.calls.append([e.seq for e in events])
            super().append_many(run_id, events)

    store = Counting()
    width = 50
    in_store_at_barrier: list[set[str | None]] = []

    async def scenario() -> cp.RunResult:
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting: list[int] = []
        all_waiting = asyncio.Event()

        async def branch(i: int) -> int:
            waiting.append(i)
            if len(waiting) == width:
                all_waiting.set()
            await gate
            return i

        async def barrier(ctx: cp.NodeContext, **ends: int) -> int:
            before = len(store.calls)
            await ctx.flush()  # sends the outbox: the branches' successes are in the store
            assert len(store.calls) > before
            in_store_at_barrier.append({e.node for e in store.events(ctx.run_id)
                                        if e.kind is EventKind.NODE_SUCCEEDED})
            return sum(ends.values())

        g = cp.Graph("together")
        ends = {f"b{i}": g.add(f"b{i}", branch, i=i) for i in range(width)}
        g.add("barrier", barrier, **ends)
        handle = await cp.start(g, store=store)
        await all_waiting.wait()
        calls_before = len(store.calls)
        gate.set_result(None)  # every branch ends in the next pass of the loop
        result = await handle.result()
        successes = [c for c in store.calls[calls_before:] if len(c) >= width]
        assert successes, store.calls[calls_before:]  # one call carried all their ends
        return result

    result = asyncio.run(scenario())
    assert result.ok and result["barrier"] == sum(range(width))
    assert in_store_at_barrier == [{f"b{i}" for i in range(width)}]
    sent = [seq for call in store.calls for seq in call]
    assert sent == list(range(1, len(sent) + 1))  # every event once, in number order
    assert len(store.events(result.run_id)) == len(sent)


# --------------------------------------------------------------------------- sync steps
def test_a_sync_step_records_and_edits_through_the_run_s_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync step runs in a worker thread; what it records or edits is done on the loop."""
    from counterpoint.scheduler import Execution

    emitted_in: set[str] = set()
    original = Execution.emit

    def watching(self: Execution, event: cp.Event) -> None:
        emitted_in.add(threading.current_thread().name)
        original(self, event)

    monkeypatch.setattr(Execution, "emit", watching)

    def grow(ctx: cp.NodeContext) -> str:
        ctx.record(EventKind.AGENT_TURN, {"from": threading.current_thread().name})
        edit = cp.Edit("add a node from a worker thread")
        edit.add("added", const, value=7)
        version = ctx.apply(edit)
        again = cp.Edit("add it again")
        again.add("added", const, value=8)
        with pytest.raises(cp.PatchError, match="'added': duplicate node id"):
            ctx.apply(again)  # the loop's error reaches the step
        return f"version {version}"

    g = cp.Graph("sync-edits")
    g.add("grow", grow)
    store = cp.MemoryStore()
    result = cp.run_sync(g, store=store)
    assert result.ok and result["grow"] == "version 1" and result["added"] == 7
    assert emitted_in == {threading.main_thread().name}
    turns = [e.data for e in store.events(result.run_id) if e.kind is EventKind.AGENT_TURN]
    assert len(turns) == 1 and turns[0] is not None
    assert turns[0]["from"] != threading.main_thread().name  # it was a worker thread


def test_a_flush_before_the_deferred_starts_are_logged_leaves_nothing_to_send(
        tmp_path: Path) -> None:
    """The flush barrier logs and sends a wide dispatch's starts; the callback that would
    have logged them then finds nothing to send, and must not fail on it."""
    from counterpoint.scheduler.core import LOG_LATER as _LOG_LATER

    errors: list[dict[str, Any]] = []

    async def leaf(ctx: cp.NodeContext, i: int, x: int) -> int:
        if i == 0:  # runs on in root's task, before the callback that logs the starts
            await ctx.flush()
        await asyncio.sleep(0.005)
        return x + i

    async def scenario() -> cp.RunResult:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: errors.append(
            context))
        g = cp.Graph("wide-flush")
        root = g.add("root", const, value=1)
        for i in range(_LOG_LATER + 4):
            g.add(f"leaf{i}", leaf, i=i, x=root, estimate=5.0 if i == 0 else None)
        store = cp.SQLiteStore(tmp_path / "runs.db")
        try:
            return await cp.run(g, store=store)
        finally:
            store.close()

    result = asyncio.run(scenario())
    assert result.ok and result["leaf3"] == 4
    assert errors == []


class _CatchingLoop:
    """Test double for a run's event loop seen from a sync step's thread: it reports
    running, and keeps what is sent to it (``held``) instead of running it, so a test
    decides when, or whether, the loop gets to it. With ``stops_on_send`` it reports
    stopped from the first send on: the loop stopped just after the step checked it."""

    def __init__(self, *, stops_on_send: bool) -> None:
        self.running = True
        self.stops_on_send = stops_on_send
        self.held: list[tuple[Any, tuple[Any, ...]]] = []

    def is_running(self) -> bool:
        return self.running

    def call_soon_threadsafe(self, callback: Any, *args: Any) -> None:
        self.held.append((callback, args))
        if self.stops_on_send:
            self.running = False


def test_an_edit_sent_just_as_the_loop_stops_gets_an_error_not_a_hang(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop runs when the sync step checks, then stops before it runs the edit: the
    step must not wait forever (an executor thread that never returns also blocks the
    interpreter's exit). A deliberate test double stands in for that loop, since the real
    window is a few instructions wide: it says it runs, keeps the callback without running
    it, then says it has stopped."""
    import counterpoint.scheduler as runtime_module

    fake = _CatchingLoop(stops_on_send=True)
    outcome: list[BaseException | int] = []

    def edits(ctx: cp.NodeContext) -> int:
        edit = cp.Edit("racing the stop")
        edit.add("late", const, value=1)

        def apply() -> None:
            try:
                outcome.append(ctx.apply(edit))
            except BaseException as exc:  # the outcome is what the test checks
                outcome.append(exc)

        monkeypatch.setattr(runtime_module.Execution, "foreign_loop", lambda self: fake)
        try:  # in a daemon thread, so that a hang fails the test instead of stalling it
            waiter = threading.Thread(target=apply, daemon=True)
            waiter.start()
            waiter.join(10)
        finally:
            monkeypatch.undo()
        if waiter.is_alive():
            outcome.append(TimeoutError("ctx.apply still waits after 10 s"))
            return 1
        # the loop runs again and gets to the dropped callback: the step was told the edit
        # was not applied, so it must not be
        real_loop = ctx._execution.foreign_loop()
        assert real_loop is not None
        ran = threading.Event()
        callback, args = fake.held[0]
        real_loop.call_soon_threadsafe(lambda: (callback(*args), ran.set()))
        assert ran.wait(10)
        outcome.append(len(ctx.nodes()))
        return 1

    g = cp.Graph("stop-race")
    g.add("edits", edits)
    result = run(g)
    assert result.ok
    assert len(fake.held) == 1
    assert len(outcome) == 2 and isinstance(outcome[0], cp.PatchError), outcome
    assert "stopped before the edit was applied" in str(outcome[0])
    assert outcome[1] == 1  # the dropped edit, run later, added nothing
    assert "late" not in result.nodes


def test_a_record_that_reaches_the_loop_after_the_run_finished_is_not_logged(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A sync step's record is sent to the loop; if the loop stopped just after the step
    checked it and runs the callback only after the run has finished, the event must not
    land after ``run_finished``. A test double loop holds the callback until then."""
    import counterpoint.scheduler as runtime_module

    fake = _CatchingLoop(stops_on_send=False)

    def records(ctx: cp.NodeContext) -> int:
        monkeypatch.setattr(runtime_module.Execution, "foreign_loop", lambda self: fake)
        try:
            ctx.record(EventKind.AGENT_TURN, {"late": True})
        finally:
            monkeypatch.undo()
        return 1

    store = cp.MemoryStore()
    g = cp.Graph("late-record")
    g.add("records", records)
    result = run(g, store=store)
    assert result.ok and len(fake.held) == 1
    callback, args = fake.held[0]
    with caplog.at_level("WARNING", logger="counterpoint"):
        callback(*args)  # the loop runs it now, after the run's end
    kinds = [e.kind for e in store.events(result.run_id)]
    assert kinds[-1] is EventKind.RUN_FINISHED and EventKind.AGENT_TURN not in kinds
    assert [r.name for r in caplog.records] == ["counterpoint.context"]  # not dropped silently
    assert f"run {result.run_id}, node 'records': a agent_turn event recorded by attempt 1 " \
           "reached the run after it finished (succeeded) and was not logged" in caplog.text


def test_a_sync_step_that_edits_after_its_run_ended_gets_an_error_not_a_hang() -> None:
    """A worker thread outlives its cancelled run; its edit and its records cannot reach a
    stopped loop (nor be applied to the run when that loop runs again)."""
    release = threading.Event()
    done = threading.Event()
    outcome: list[BaseException | int] = []

    def slow(ctx: cp.NodeContext) -> int:
        release.wait(10)
        edit = cp.Edit("too late")
        edit.add("late", const, value=1)
        try:
            outcome.append(ctx.apply(edit))
        except BaseException as exc:  # the outcome is what the test checks
            outcome.append(exc)
        try:
            ctx.record(EventKind.AGENT_TURN, {"late": True})
        except BaseException as exc:
            outcome.append(exc)
        finally:
            done.set()
        return 1

    g = cp.Graph("late-edit")
    g.add("slow", slow)
    loop = asyncio.new_event_loop()
    try:
        result = loop.run_until_complete(
            cp.run(g, store="memory", options=cp.RunOptions(deadline=0.05)))
        assert result.status is RunStatus.TIMED_OUT
        release.set()  # the loop is stopped, not closed: nothing would run the edit
        assert done.wait(10)
    finally:
        loop.close()
    assert len(outcome) == 2 and isinstance(outcome[0], cp.PatchError), outcome
    assert "event loop has stopped, so nothing more can be applied" in str(outcome[0])
    assert isinstance(outcome[1], cp.UserError), outcome
    assert "event loop has stopped, so nothing more can be recorded" in str(outcome[1])


def test_inputs_are_checked_against_their_declared_types() -> None:
    """A run's inputs, and a sub-graph's, fit the types the graph declared them with:
    ``"3"`` for an ``int`` is 3, a value that does not fit is refused before anything
    runs (for a sub-graph: its node fails, naming the input)."""
    async def double(n: int) -> int:
        return 2 * n

    g = cp.Graph("typed")
    g.add("d", double, n=g.input("n", int))
    store = cp.MemoryStore()
    assert cp.run_sync(g, inputs={"n": "3"}, store=store)["d"] == 6
    with pytest.raises(cp.UserError, match=r"graph 'typed', input 'n' must be int, got 'x' "
                                           r"\(Input should be a valid integer"):
        cp.run_sync(g, inputs={"n": "x"}, store=store)
    assert len(store.runs()) == 1  # the refused run left nothing

    async def word() -> str:
        return "many"

    outer = cp.Graph("outer")
    outer.add("inner", g, n=outer.add("word", word))
    result = cp.run_sync(outer, store="memory")
    error = result.nodes["inner"].error or {}
    assert "input 'n' must be int, got 'many'" in error.get("message", ""), error
