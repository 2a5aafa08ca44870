"""Nodes waiting for people in one process: parallel asks, answers in any order, the
WAITING state, used-once answers, digests, first-answer-wins, fan-in after approvals."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.state import NodeStatus

from .helpers import until_pending


def _parallel(gate: asyncio.Event) -> cp.Graph:
    g = cp.Graph("parallel-asks")
    for name in ("a", "b", "c"):
        async def ask(ctx: cp.NodeContext, _name: str = name) -> str:
            answer = await ctx.ask(f"ship {_name}?", {"branch": _name})
            return f"{_name}:{'yes' if answer.approved else 'no:' + str(answer.reason)}"
        g.add(name, ask)

    async def worker() -> str:  # runs on while the others wait, and ends before them
        await gate.wait()
        return "worked"
    g.add("worker", worker)

    def fan_in(a: str, b: str, c: str, worker: str) -> list[str]:
        return [a, b, c, worker]
    g.add("fan_in", fan_in, a=cp.ref("a"), b=cp.ref("b"), c=cp.ref("c"),
          worker=cp.ref("worker"))
    return g


async def test_parallel_asks_answered_in_reverse_order_while_other_branches_run(
        tmp_path: Path) -> None:
    gate = asyncio.Event()
    store = cp.SQLiteStore(tmp_path / "runs.db")
    try:
        # one slot: the worker can run only because a waiting node holds no slot
        handle = await cp.start(_parallel(gate), store=store,
                                options=cp.RunOptions(max_concurrency=1))
        pending = await until_pending(handle, 3)
        assert len({a.id for a in pending}) == 3
        assert {handle.state.nodes[n].status for n in ("a", "b", "c")} == {NodeStatus.WAITING}
        gate.set()  # the worker finishes while all three still wait
        async with asyncio.timeout(30):
            async for event in handle.events():
                if event.kind is EventKind.NODE_SUCCEEDED and event.node == "worker":
                    break
        assert [a.status for a in handle.approvals()] == ["pending"] * 3
        by_node = {a.node: a for a in pending}
        handle.reject(by_node["c"].id, "not today", by="ops")
        handle.approve(by_node["b"].id, by="ops")
        handle.approve(by_node["a"].id)
        result = await handle.result()
    finally:
        store.close()
    assert result.status is cp.RunStatus.SUCCEEDED
    assert result.outputs["fan_in"] == ["a:yes", "b:yes", "c:no:not today", "worked"]
    assert "approval" in (result.state.nodes["a"].waited or {})  # waiting is not working
    events = cp.open_store(str(tmp_path / "runs.db")).events(result.run_id)
    answered = [e.data["id"] for e in events if e.kind is EventKind.APPROVAL_ANSWERED]
    assert answered == [by_node[n].id for n in ("c", "b", "a")]
    done = next(e.seq for e in events if e.kind is EventKind.NODE_SUCCEEDED
                and e.node == "worker")
    assert done < min(e.seq for e in events if e.kind is EventKind.APPROVAL_ANSWERED)


async def test_an_answer_is_given_once_and_a_second_one_is_refused() -> None:
    store = cp.MemoryStore()
    g = cp.Graph("once")

    async def gate(ctx: cp.NodeContext) -> bool:
        return (await ctx.ask("go?")).approved
    g.add("gate", gate)
    handle = await cp.start(g, store=store)
    [pending] = await until_pending(handle, 1)
    handle.approve(pending.id, by="ana")
    with pytest.raises(cp.ApprovalAnswered, match="approved by ana already"):
        cp.reject(store, pending.id, "too late", by="bob")
    result = await handle.result()
    assert result.outputs["gate"] is True
    with pytest.raises(cp.ApprovalNotFound, match="no approval ap-nope"):
        cp.approve(store, "ap-nope")


async def test_a_retried_step_gets_the_recorded_answer_and_is_not_asked_again() -> None:
    store = cp.MemoryStore()
    tries: list[int] = []
    g = cp.Graph("retried")

    async def flaky(ctx: cp.NodeContext) -> str:
        answer = await ctx.ask("charge 5?", {"amount": 5})
        tries.append(ctx.attempt)
        if ctx.attempt == 1:
            raise cp.Retry("transient")
        return "charged" if answer.approved else "skipped"
    g.add("flaky", flaky, policy=cp.Policy(retries=2, backoff=cp.Backoff(initial=0.0, jitter=0.0)))
    handle = await cp.start(g, store=store)
    [pending] = await until_pending(handle, 1)
    handle.approve(pending.id)
    result = await handle.result()
    assert result.outputs["flaky"] == "charged" and tries == [1, 2]
    kinds = [e.kind for e in store.events(result.run_id)]
    assert kinds.count(EventKind.APPROVAL_REQUESTED) == 1
    assert kinds.count(EventKind.APPROVAL_ANSWERED) == 1


async def test_an_ask_about_other_content_is_a_new_approval() -> None:
    store = cp.MemoryStore()
    g = cp.Graph("digests")

    async def twice(ctx: cp.NodeContext) -> list[bool]:
        first = await ctx.ask("pay?", {"amount": 5}, key="pay")
        second = await ctx.ask("pay?", {"amount": 500}, key="pay")  # same key, new content
        return [first.approved, second.approved]
    g.add("twice", twice)
    handle = await cp.start(g, store=store)
    [first] = await until_pending(handle, 1)
    handle.approve(first.id)
    pending = await until_pending(handle, 1)
    assert [a.id for a in pending] != [first.id] and pending[0].payload == {"amount": 500}
    assert pending[0].digest != first.digest
    handle.reject(pending[0].id, "too much")
    result = await handle.result()
    assert result.outputs["twice"] == [True, False]


async def test_a_cancelled_run_withdraws_its_pending_approvals() -> None:
    store = cp.MemoryStore()
    g = cp.Graph("cancelled")

    async def gate(ctx: cp.NodeContext) -> bool:
        return (await ctx.ask("go?")).approved
    g.add("gate", gate)
    handle = await cp.start(g, store=store)
    [pending] = await until_pending(handle, 1)
    handle.cancel()
    result = await handle.result()
    assert result.status is cp.RunStatus.CANCELLED
    assert [a.status for a in cp.approvals(store, result.run_id)] == ["withdrawn"]
    with pytest.raises(cp.ApprovalError,
                       match="takes no answer: its run was cancelled before it was answered"):
        cp.approve(store, pending.id)  # a finished run's approvals take no answers


async def test_a_run_with_nothing_left_but_waiting_detaches_and_a_resume_finishes_it() -> None:
    store = cp.MemoryStore()
    g = cp.Graph("detached")

    async def gate(ctx: cp.NodeContext) -> bool:
        return (await ctx.ask("go?")).approved
    g.add("gate", gate)
    handle = await cp.start(g, store=store, options=cp.RunOptions(detach_when_waiting=True))
    seen = [event.kind async for event in handle.events()]  # ends when the run detaches
    assert seen[-1] is EventKind.APPROVAL_REQUESTED
    result = await handle.result()
    assert result.status is cp.RunStatus.RUNNING and list(result.state.asking) == ["gate"]
    [pending] = cp.approvals(store)
    cp.approve(store, pending.id, by="ana")
    resumed = await cp.resume(result.run_id, store=store, graph=g)
    assert resumed.status is cp.RunStatus.SUCCEEDED and resumed.outputs["gate"] is True
    kinds = [e.kind for e in store.events(result.run_id)]
    assert kinds.count(EventKind.APPROVAL_REQUESTED) == 1  # answered: not asked again


async def test_two_people_answering_at_once_through_sqlite_one_wins(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    g = cp.Graph("race")

    async def gate(ctx: cp.NodeContext) -> bool:
        return (await ctx.ask("go?")).approved
    g.add("gate", gate)
    result = await cp.run(g, store=db, options=cp.RunOptions(detach_when_waiting=True))
    [pending] = cp.approvals(db)
    barrier = threading.Barrier(8)

    def answer(i: int) -> str:
        barrier.wait()  # every answer at the same moment, each with its own connection
        try:
            if i % 2:
                cp.approve(db, pending.id, by=f"p{i}")
            else:
                cp.reject(db, pending.id, "no", by=f"p{i}")
        except cp.ApprovalAnswered:
            return "refused"
        return "won"
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(answer, range(8)))
    assert sorted(outcomes) == ["refused"] * 7 + ["won"]
    winner = f"p{outcomes.index('won')}"
    resumed = await cp.resume(result.run_id, store=db, graph=g)
    assert resumed.outputs["gate"] is (int(winner[1:]) % 2 == 1)
    [approval] = cp.approvals(db, result.run_id)
    assert approval.answer is not None and approval.answer.by == winner


async def test_a_payload_that_is_not_json_fails_the_ask_instead_of_waiting_unlogged() -> None:
    store = cp.MemoryStore()
    g = cp.Graph("opaque")

    async def gate(ctx: cp.NodeContext) -> bool:
        return (await ctx.ask("ship it?", {"build": object()})).approved
    g.add("gate", gate)
    result = await cp.run(g, store=store, options=cp.RunOptions(detach_when_waiting=True))
    assert result.status is cp.RunStatus.FAILED  # not waiting for an approval nobody sees
    error = str(result.state.nodes[cp.NodeId("gate")].error or {})
    assert "ctx.ask('ship it?'): the payload cannot be stored as JSON" in error
    assert "give JSON data (a dict, a list, text, numbers), a dataclass or a pydantic " \
        "model" in error
    assert cp.approvals(store, result.run_id) == []


async def test_a_run_detaches_when_only_a_sub_run_waits_and_resumes_after_the_answer(
        tmp_path: Path) -> None:
    """``detach_when_waiting`` with the asking node inside a sub-graph: the whole run tree
    ends its execution (it used to wait forever), the approval stays pending, and once it
    is answered a resume finishes the run."""
    db = str(tmp_path / "runs.db")

    async def gate(ctx: cp.NodeContext) -> bool:
        return (await ctx.ask("go?")).approved

    inner = cp.Graph("inner")
    inner.add("gate", gate)

    async def after(ok: bool) -> str:
        return f"approved={ok}"

    outer = cp.Graph("outer")
    outer.add("report", after, ok=outer.add("sub", inner))
    result = await asyncio.wait_for(
        cp.run(outer, store=db, options=cp.RunOptions(detach_when_waiting=True)), 60)
    assert result.status is cp.RunStatus.RUNNING  # detached, not finished
    [pending] = cp.approvals(db)
    assert pending.run_id == f"{result.run_id}/sub" and pending.status == "pending"
    cp.approve(db, pending.id, by="lead")
    resumed = await asyncio.wait_for(cp.resume(result.run_id, store=db, graph=outer), 60)
    assert resumed.ok and resumed["report"] == "approved={'gate': True}"


async def test_the_run_tree_detaches_once_its_other_branches_end(tmp_path: Path) -> None:
    """The sub-run asks while a branch of the top-level run still works: the tree detaches
    when that branch ends, its output recorded."""
    db = str(tmp_path / "runs.db")
    asked = asyncio.Event()

    async def gate(ctx: cp.NodeContext) -> bool:
        asked.set()
        return (await ctx.ask("go?")).approved

    async def busy() -> str:
        await asked.wait()  # still working when the sub-run asks
        await asyncio.sleep(0)
        return "done"

    inner = cp.Graph("inner")
    inner.add("gate", gate)
    outer = cp.Graph("outer")
    outer.add("sub", inner)
    outer.add("busy", busy)
    result = await asyncio.wait_for(
        cp.run(outer, store=db, options=cp.RunOptions(detach_when_waiting=True)), 60)
    assert result.status is cp.RunStatus.RUNNING
    assert result["busy"] == "done"
    assert [a.run_id for a in cp.approvals(db)] == [f"{result.run_id}/sub"]


def test_ctx_ask_in_a_sync_step_fails_the_node_saying_why() -> None:
    """A plain ``def`` step cannot await a person; its call of ctx.ask is refused at once
    (it used to return a coroutine nobody awaited: no approval, and the step went on)."""
    def gate(ctx: cp.NodeContext) -> str:
        ctx.ask("go?")  # a sync step: no await possible
        return "went on"

    g = cp.Graph("sync-ask")
    g.add("gate", gate)
    result = cp.run_sync(g, store=cp.MemoryStore())
    assert result.nodes["gate"].status is cp.NodeStatus.FAILED
    assert "ctx.ask needs an async step (`async def`)" in str(result.nodes["gate"].error)


async def test_a_retried_sub_graph_node_does_not_ask_again_what_was_answered(
        tmp_path: Path) -> None:
    """The sub-graph node times out after its approval was answered and is retried: the
    sub-graph runs again in a new sub-run (``sub~2``), whose ask takes the answer given in
    the first one instead of asking the person again (a step's own retry never does)."""
    db = str(tmp_path / "runs.db")

    async def gate(ctx: cp.NodeContext) -> str:
        answer = await ctx.ask("ship it?", {"what": "v1.2"})
        if not ctx.run_id.endswith("~2"):  # the first sub-run hangs after the answer...
            await asyncio.Event().wait()
        return f"shipped by {answer.by}"

    inner = cp.Graph("inner")
    inner.add("gate", gate)
    outer = cp.Graph("outer")
    outer.add("sub", inner, timeout=2.0, retries=1,
              policy=cp.Policy(backoff=cp.Backoff(initial=0.0)))
    options = cp.RunOptions(detach_when_waiting=True)
    first = await asyncio.wait_for(cp.run(outer, store=db, options=options), 60)
    [pending] = cp.approvals(db)
    cp.approve(db, pending.id, by="lead")
    result = await asyncio.wait_for(cp.resume(first.run_id, store=db, graph=outer), 60)
    assert result.ok, result.nodes["sub"].error  # ...until its node's timeout: retried
    assert result["sub"] == {"gate": "shipped by lead"}
    asked = [(a.run_id, a.status, a.answer.by if a.answer else None)
             for a in cp.approvals(db, run_id=f"{first.run_id}/sub~2")]
    assert asked == [(f"{first.run_id}/sub~2", "approved", "lead")]
