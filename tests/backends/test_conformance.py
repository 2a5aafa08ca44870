"""The backend conformance suite: the runtime's behaviour (statuses, retries, timeouts,
cancel, live edits, map, sub-runs, resume), run on every execution backend.

``pytestmark`` gives every test the ``backend`` fixture of tests/backends/conftest.py,
which makes each backend in turn the default of the runs the test starts. Steps that run
on a backend may be in another process (Ray), so they tell the test what happened through
files (:func:`_count`), and a step that must share the test's event loop takes a
:class:`~counterpoint.NodeContext`, which keeps it in the controller on every backend.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from steps import add, const, run, sleep_then
from support import stop_executing

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.state import NodeStatus, RunStatus

pytestmark = pytest.mark.usefixtures("backend")


def _count(marker: str) -> int:
    """Append a line to ``marker`` and return how many it holds: the calls so far, seen
    from any process."""
    with Path(marker).open("a") as file:
        file.write("x\n")
    return len(Path(marker).read_text().splitlines())


def _calls(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def without(state: Any, node: str) -> Any:
    """A copy of a run state without one node (to look past it in raise_for_status)."""
    from dataclasses import replace
    return replace(state, nodes={k: v for k, v in state.nodes.items() if k != node})


def test_outputs_flow_along_data_edges() -> None:
    g = cp.Graph("sum")
    a = g.add("a", const, value=2)
    b = g.add("b", const, value=3)
    g.add("c", add, a=a, b=b)
    result = run(g)
    assert result.ok and result.status is RunStatus.SUCCEEDED
    assert result["c"] == 5
    assert result.outputs == {"a": 2, "b": 3, "c": 5}
    assert result.nodes["c"].status is NodeStatus.SUCCEEDED
    assert result.output == {"c": 5}


def test_failure_blocks_dependents_and_independent_branches_finish() -> None:
    async def broken() -> int:
        raise ValueError("bad input row 7")

    g = cp.Graph("isolation")
    bad = g.add("bad", broken)
    g.add("child", add, a=bad, b=1)
    g.add("independent", sleep_then, seconds=0.05, value="done")
    result = run(g)
    assert result.status is RunStatus.FAILED
    assert result.nodes["bad"].status is NodeStatus.FAILED
    assert result.nodes["bad"].error is not None
    assert result.nodes["bad"].error["message"] == "bad input row 7"
    assert result.nodes["child"].status is NodeStatus.BLOCKED
    assert result.nodes["child"].error == {"cause": "bad", "message": "bad input row 7"}
    assert result["independent"] == "done"
    assert result.metrics.failures == {"bad": "ValueError: bad input row 7"}
    with pytest.raises(cp.NodeFailed, match=r"node 'bad' failed \(ValueError: bad input row 7\)"):
        result.raise_for_status()
    with pytest.raises(cp.UpstreamFailed, match=r"node 'child' blocked \(upstream 'bad' failed"):
        cp.RunResult(run_id=result.run_id, graph=result.graph, status=result.status,
                     state=without(result.state, "bad")).raise_for_status()


def test_fail_fast_cancels_the_rest() -> None:
    async def broken() -> int:
        raise RuntimeError("stop")

    g = cp.Graph("ff")
    g.add("bad", broken)
    g.add("long", sleep_then, seconds=5)
    result = run(g, options=cp.RunOptions(fail_fast=True))
    assert result.status is RunStatus.FAILED
    assert result.nodes["long"].status is NodeStatus.CANCELLED
    assert "fail_fast" in (result.nodes["long"].error or {})["reason"]


def test_timeout_then_fallback() -> None:
    async def slow(q: str) -> str:
        await asyncio.sleep(5)
        return "late"

    def cached(q: str) -> str:
        return f"cached:{q}"

    g = cp.Graph("fallback")
    g.add("f", slow, q="x", timeout=0.05, retries=1, fallback=cached,
          policy=cp.Policy(backoff=cp.Backoff(initial=0.01)))
    result = run(g)
    assert result["f"] == "cached:x"
    assert result.nodes["f"].attempts == 3  # two timed-out attempts, then the fallback


def test_timeout_failure_names_node_and_limit() -> None:
    g = cp.Graph("timeout")
    g.add("f", sleep_then, seconds=5, timeout=0.05)
    result = run(g)
    error = result.nodes["f"].error or {}
    assert error["type"] == "NodeTimeout"
    assert "node 'f': attempt 1 exceeded its timeout of 0.05s" in error["message"]


def test_deadline_returns_partial_result() -> None:
    async def quick(ctx: cp.NodeContext) -> str:  # in the controller: done long before 0.2 s
        return "kept"  # (on Ray, a first task's worker can take longer than that to start)

    g = cp.Graph("deadline")
    g.add("quick", quick)
    g.add("slow", sleep_then, seconds=10)
    g.add("after", const, after=["slow"])
    result = run(g, options=cp.RunOptions(deadline=0.2))
    assert result.status is RunStatus.TIMED_OUT
    assert result["quick"] == "kept"
    assert result.nodes["slow"].status is NodeStatus.CANCELLED
    assert result.nodes["after"].status is NodeStatus.CANCELLED
    with pytest.raises(cp.DeadlineExceeded, match=r"2 node\(s\) unfinished \(slow, after\)"):
        result.raise_for_status()


def test_conditional_branches_skip_the_unchosen() -> None:
    async def route(n: int) -> cp.Choose:
        return cp.Choose("small" if n < 10 else "large", value=n)

    async def label(n: int, size: str) -> str:
        return f"{size}:{n}"

    async def pick_one(a: str | None, b: str | None) -> str:
        return a or b or "none"

    g = cp.Graph("branch")
    r = g.add("route", route, n=3)
    small = g.add("small", label, n=r, size="small")
    large = g.add("large", label, n=r, size="large")
    g.add("report", pick_one, a=small.or_none(), b=large.or_none())
    store = cp.MemoryStore()
    result = run(g, store=store)
    assert result.ok
    assert result["route"] == 3
    assert result.nodes["large"].status is NodeStatus.SKIPPED
    skips = [e.node for e in store.events(result.run_id) if e.kind is EventKind.NODE_SKIPPED]
    assert skips == ["large"]  # recorded once
    assert result["report"] == "small:3"


def test_dynamic_fan_out_and_join() -> None:
    async def split(text: str) -> list[str]:
        return text.split()

    async def shout(word: str) -> str:
        return word.upper()

    async def glue(parts: list[str]) -> str:
        return " ".join(parts)

    g = cp.Graph("fanout")
    words = g.add("split", split, text="one two three four")
    loud = g.map("shout", shout, over=words)
    g.add("glue", glue, parts=loud)
    result = run(g)
    assert result["glue"] == "ONE TWO THREE FOUR"
    assert [result[f"shout[{i}]"] for i in range(4)] == ["ONE", "TWO", "THREE", "FOUR"]


def test_empty_fan_out_joins_to_an_empty_list() -> None:
    async def nothing() -> list[int]:
        return []

    async def twice(x: int) -> int:
        return 2 * x

    g = cp.Graph("empty-map")
    g.map("m", twice, over=g.add("n", nothing))
    assert run(g)["m"] == []


def test_subgraph_as_a_node(tmp_path: Path) -> None:
    inner = cp.Graph("inner")
    x = inner.input("x")
    d = inner.add("double", add, a=x, b=x)
    inner.output(d)

    outer = cp.Graph("outer")
    five = outer.add("five", const, value=5)
    sub = outer.add("sub", inner, x=five)
    outer.add("plus_one", add, a=sub, b=1)
    store = cp.SQLiteStore(tmp_path / "runs.db")
    result = cp.run_sync(outer, store=store)
    assert result["plus_one"] == 11
    child = store.run(cp.RunId(f"{result.run_id}/sub"))
    assert child.status == "succeeded" and child.parent == result.run_id
    store.close()


def test_live_edit_from_a_running_node() -> None:
    async def planner(ctx: cp.NodeContext) -> str:
        edit = cp.Edit("found more work")
        extra = edit.add("extra", const, value=41)
        edit.add("use_extra", add, a=extra, b=1)
        edit.cancel("obsolete")
        version = ctx.apply(edit)
        assert version == 1
        return "planned"

    g = cp.Graph("edits")
    p = g.add("plan", planner)
    g.add("obsolete", sleep_then, seconds=5, after=[p])
    result = run(g)
    assert result.ok
    assert result["use_extra"] == 42
    assert result.nodes["obsolete"].status is NodeStatus.CANCELLED


def test_patch_applied_is_recorded(tmp_path: Path) -> None:
    async def grow(ctx: cp.NodeContext) -> int:
        edit = cp.Edit("grow")
        edit.add("grown", const, value=7)
        ctx.apply(edit)
        return 0

    g = cp.Graph("recorded")
    g.add("grow", grow)
    store = cp.SQLiteStore(tmp_path / "runs.db")
    result = cp.run_sync(g, store=store)
    patches = [e for e in store.events(result.run_id) if e.kind is EventKind.PATCH_APPLIED]
    assert len(patches) == 1 and patches[0].data is not None
    assert patches[0].data["version"] == 1
    assert patches[0].data["add"][0]["id"] == "grown"
    store.close()


def test_handle_cancel_and_event_stream() -> None:
    async def scenario() -> tuple[cp.RunResult, list[EventKind]]:
        g = cp.Graph("cancel")
        g.add("a", const)
        g.add("b", sleep_then, seconds=10, after=["a"])
        handle = await cp.start(g, store="memory")
        kinds: list[EventKind] = []
        async for event in handle.events():
            kinds.append(event.kind)
            if event.kind is EventKind.NODE_STARTED and event.node == "b":
                handle.cancel()
        return await handle.result(), kinds

    result, kinds = asyncio.run(scenario())
    assert result.status is RunStatus.CANCELLED
    assert kinds[-1] is EventKind.RUN_FINISHED
    assert result.nodes["b"].status is NodeStatus.CANCELLED


def test_a_map_sent_down_a_branch_runs_its_items() -> None:
    async def choose() -> cp.Choose:
        return cp.Choose("m")

    async def items() -> list[int]:
        return [1, 2, 3]

    async def double(x: int) -> int:
        return 2 * x

    g = cp.Graph("map-branch")
    c = g.add("choose", choose)
    g.map("m", double, over=g.add("src", items), after=[c])
    result = run(g)
    assert result.ok and result["m"] == [2, 4, 6]


def test_cancelling_an_expanded_map_cancels_its_items() -> None:
    async def items() -> list[float]:
        return [5.0, 5.0]

    async def scenario() -> cp.RunResult:
        g = cp.Graph("map-cancel")
        g.map("m", sleep_then, over=g.add("src", items))
        handle = await cp.start(g, store="memory")
        async for event in handle.events():
            if event.kind is EventKind.NODE_STARTED and event.node == "m[1]":
                break
        edit = cp.Edit()
        edit.cancel("m")
        handle.apply(edit)
        return await handle.result()

    result = asyncio.run(asyncio.wait_for(scenario(), timeout=4))
    assert [result.nodes[n].status for n in ("m", "m[0]", "m[1]")] == [NodeStatus.CANCELLED] * 3


def test_a_sub_graph_timeout_ends_its_sub_run(tmp_path: Path) -> None:
    inner = cp.Graph("inner-timeout")
    inner.add("wait", sleep_then, seconds=5)
    outer = cp.Graph("outer-timeout")
    outer.add("sub", inner, timeout=0.2)
    store = cp.SQLiteStore(tmp_path / "runs.db")
    result = cp.run_sync(outer, store=store)
    assert result.status is RunStatus.FAILED
    assert "exceeded its timeout of 0.2s" in (result.nodes["sub"].error or {})["message"]
    assert store.run(cp.RunId(f"{result.run_id}/sub")).status == "cancelled"
    store.close()


# ---------------------------------------------------------------- retries, counted in files
async def _flaky(marker: str) -> str:
    if _count(marker) < 3:
        raise ConnectionError("transient")
    return "ok"


def test_retries_with_backoff_then_success(tmp_path: Path) -> None:
    marker = tmp_path / "calls"
    g = cp.Graph("retry")
    g.add("f", _flaky, marker=str(marker),
          policy=cp.Policy(retries=3, backoff=cp.Backoff(initial=0.01)))
    result = run(g)
    assert result["f"] == "ok" and _calls(marker) == 3
    assert result.nodes["f"].attempts == 3
    assert result.metrics.retries == 2


def _fails_once(marker: str) -> int:
    if _count(marker) == 1:
        raise RuntimeError("first attempt fails")
    return 7


def test_a_retried_sync_step_succeeds_on_its_second_attempt(tmp_path: Path) -> None:
    g = cp.Graph("retry-sync")
    g.add("a", _fails_once, marker=str(tmp_path / "m"), retries=1)
    result = run(g)
    assert result["a"] == 7
    assert result.state.nodes["a"].attempt == 2


async def _fatal(marker: str) -> str:
    _count(marker)
    raise cp.NodeFailed("invalid API key", retryable=False)


def test_non_retryable_errors_are_not_retried(tmp_path: Path) -> None:
    marker = tmp_path / "calls"
    g = cp.Graph("fatal")
    g.add("f", _fatal, marker=str(marker), retries=5)
    result = run(g)
    assert _calls(marker) == 1 and result.status is RunStatus.FAILED
    assert "invalid API key" in (result.nodes["f"].error or {})["message"]


# ------------------------------------------------------------------------- edits and cancel
def test_live_edit_from_outside_cancels_in_flight_and_replaces_pending() -> None:
    async def scenario() -> cp.RunResult:
        opened = asyncio.Event()

        async def gate(ctx: cp.NodeContext) -> None:  # in the controller: it shares the loop
            await opened.wait()

        g = cp.Graph("outside")
        gate_ref = g.add("gate", gate)
        g.add("long", sleep_then, seconds=10)
        g.add("later", const, value="old", after=[gate_ref])
        handle = await cp.start(g, store="memory")
        async for event in handle.events():
            if event.kind is EventKind.NODE_STARTED and event.node == "long":
                break
        edit = cp.Edit("operator change")
        edit.cancel("long")
        edit.replace("later", const, value="new", after=["gate"])
        handle.apply(edit)
        opened.set()
        return await handle.result()

    result = asyncio.run(asyncio.wait_for(scenario(), timeout=30))
    assert result.ok
    assert result.nodes["long"].status is NodeStatus.CANCELLED
    assert result["later"] == "new"


# ------------------------------------------------------------------------------------ resume
def test_resume_continues_a_sub_run_without_redoing_its_logged_nodes(tmp_path: Path) -> None:
    marker = tmp_path / "first-calls"
    in_work = asyncio.Event()

    async def counted(marker: str, x: int) -> int:
        _count(marker)
        return x + 1

    async def work(ctx: cp.NodeContext, x: int) -> int:  # in the controller: it shares the loop
        if not in_work.is_set():
            in_work.set()
            await asyncio.sleep(30)  # the first attempt is still going when the run stops
        return 2 * x

    inner = cp.Graph("inner-resume")
    first = inner.add("first", counted, marker=str(marker), x=inner.input("x"))
    inner.output(inner.add("work", work, x=first))
    outer = cp.Graph("outer-resume")
    outer.output(outer.add("sub", inner, x=5))
    store = cp.SQLiteStore(tmp_path / "runs.db")

    async def scenario() -> cp.RunResult:
        running = asyncio.create_task(cp.run(outer, store=store, run_id="R"))
        await in_work.wait()
        running.cancel()  # the process shutting down in the middle of the sub-run
        with pytest.raises(asyncio.CancelledError):
            await running
        await store.flush()
        assert store.run(cp.RunId("R/sub")).status == "running"
        return await cp.resume("R", store=store, graph=outer)

    try:
        result = asyncio.run(asyncio.wait_for(scenario(), timeout=30))
        assert result.ok and result.output == 12
        assert _calls(marker) == 1  # its success was logged in the sub-run
        assert [r.run_id for r in store.runs() if r.run_id.startswith("R/")] == ["R/sub"]
    finally:
        store.close()


def test_resume_finishes_a_stop_that_a_crash_interrupted(tmp_path: Path) -> None:
    """A logged ``run_stopping`` is honoured on resume: nothing runs again, the run ends."""
    marker = tmp_path / "calls"
    g = cp.Graph("stopped")
    g.add("a", _count, marker=str(marker))
    g.add("b", _count, marker=str(marker), after=["a"])
    store = cp.MemoryStore()
    rid = cp.RunId("r-stopping")
    for seq, event in enumerate([
            cp.Event(EventKind.RUN_CREATED, 1.0, data={"graph": "stopped", "options": {}}),
            cp.Event(EventKind.NODE_READY, 1.1, cp.NodeId("a")),
            cp.Event(EventKind.NODE_STARTED, 1.2, cp.NodeId("a"), 1),
            cp.Event(EventKind.RUN_STOPPING, 1.3, data={"reason": "cancelled"})], start=1):
        event.seq = seq
        store.append(rid, event)
    result = asyncio.run(cp.resume(rid, store=store, graph=g))
    assert result.status is RunStatus.CANCELLED
    assert _calls(marker) == 0
    assert [result.nodes[n].status for n in ("a", "b")] == [NodeStatus.CANCELLED] * 2


def test_resume_after_a_stop_runs_only_the_nodes_not_logged(tmp_path: Path) -> None:
    marker = tmp_path / "calls"
    g = cp.Graph("resumed")
    a = g.add("a", _count, marker=str(marker))
    g.add("b", sleep_then, seconds=30, value=1, after=[a])
    g.add("c", _count, marker=str(marker), after=["b"])
    store = cp.SQLiteStore(tmp_path / "runs.db")

    async def scenario() -> cp.RunResult:
        handle = await cp.start(g, store=store, run_id="S")
        async for event in handle.events():
            if event.kind is EventKind.NODE_STARTED and event.node == "b":
                break
        await stop_executing(handle)  # as a process shutting down does
        await store.flush()
        quick = cp.Graph("resumed")  # the same graph, b now quick
        a2 = quick.add("a", _count, marker=str(marker))
        quick.add("b", sleep_then, seconds=0, value=1, after=[a2])
        quick.add("c", _count, marker=str(marker), after=["b"])
        return await cp.resume("S", store=store, graph=quick)

    try:
        result = asyncio.run(asyncio.wait_for(scenario(), timeout=30))
        assert result.ok
        assert result["a"] == 1 and result["c"] == 2  # a ran once, before the stop
        assert _calls(marker) == 2
    finally:
        store.close()


def _pid() -> int:
    import os
    return os.getpid()


def test_steps_run_where_the_backend_puts_them(backend: Any) -> None:
    """The fixture really switches backends: on Ray a step runs in another process."""
    import os

    from counterpoint.ray import RayBackend
    g = cp.Graph("where")
    g.add("sync", _pid)
    result = run(g)
    assert (result["sync"] != os.getpid()) is isinstance(backend, RayBackend)
