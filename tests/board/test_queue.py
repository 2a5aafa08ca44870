"""Claim-queue work: items claimed under leases, completed exactly once, claims of ended
attempts and run-out leases expired in the log, results checked, puts idempotent."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.board import pool
from counterpoint.events import EventKind
from counterpoint.store import MemoryStore

WAIT = 10.0
"""Seconds before a test gives up on something that should happen at once."""


class Clock:
    """A deterministic clock for leases: it moves only when the test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _data(store: MemoryStore, run: cp.RunId, kind: EventKind) -> list[dict[str, Any]]:
    return [e.data or {} for e in store.events(run) if e.kind is kind]


async def test_a_pool_completes_every_item_exactly_once() -> None:
    g = cp.Graph("pool", board=cp.Board(queues={"tasks": cp.WorkQueue()}))

    def fill(ctx: cp.NodeContext) -> int:
        tasks = ctx.board.queue("tasks")
        return len([tasks.put({"n": n}) for n in range(40)])

    async def square(payload: dict[str, int]) -> int:
        await asyncio.sleep(0)  # let the other workers claim meanwhile
        return payload["n"] ** 2

    filled = g.add("fill", fill)
    workers = pool(g, "w", square, size=6, queue="tasks", after=[filled])
    store = MemoryStore()
    result = await cp.run(g, store=store)
    assert result.ok
    queue = result.board.queues["tasks"]
    assert {i.id: i.result for i in queue.items.values()} == \
        {f"fill#{n + 1}": n ** 2 for n in range(40)}
    done = Counter(d["item"] for d in _data(store, result.run_id, EventKind.CLAIM_DONE))
    assert set(done.values()) == {1} and len(done) == 40
    claimed = [item for w in workers for item in result[w.node]]
    assert sorted(claimed) == sorted(done)  # each worker reports what it completed
    assert sum(1 for w in workers if result[w.node]) > 1  # the work was shared


async def test_the_claim_of_a_failed_attempt_expires_and_its_item_is_done_once() -> None:
    g = cp.Graph("failing", board=cp.Board(queues={"tasks": cp.WorkQueue()}))
    failed = []

    async def flaky(payload: str, ctx: cp.NodeContext) -> str:
        if payload == "b" and ctx.attempt == 1:
            failed.append(ctx.node)
            raise RuntimeError("worker died mid-claim")
        return payload.upper()

    def fill(ctx: cp.NodeContext) -> None:
        for item in "abc":
            ctx.board.queue("tasks").put(item, id=item)

    filled = g.add("fill", fill)
    pool(g, "w", flaky, size=1, queue="tasks", after=[filled], retries=1)
    store = MemoryStore()
    result = await cp.run(g, store=store)
    assert result.ok and failed == ["w-1"]
    assert result.board.queues["tasks"].items["b"].result == "B"
    expired = _data(store, result.run_id, EventKind.CLAIM_EXPIRED)
    assert [(d["item"], d["claim"]) for d in expired] == [("b", 1)]
    assert "attempt 1 of node 'w-1' ended without completing it" in expired[0]["reason"]
    done = Counter(d["item"] for d in _data(store, result.run_id, EventKind.CLAIM_DONE))
    assert done == {"a": 1, "b": 1, "c": 1}
    assert result.board.queues["tasks"].items["b"].expired == 1


async def test_a_lease_that_ran_out_passes_the_item_on_and_the_late_result_is_refused(
        ) -> None:
    clock = Clock()
    g = cp.Graph("leases", board=cp.Board(queues={"tasks": cp.WorkQueue(lease=30)},
                                          clock=clock))
    slow_has_it = asyncio.Event()
    fast_done = asyncio.Event()
    lost: list[str] = []

    async def slow(ctx: cp.NodeContext) -> None:
        tasks = ctx.board.queue("tasks")
        tasks.put("job", id="job")
        claim = tasks.claim()
        assert claim is not None and claim.lease_until == 1030.0
        slow_has_it.set()
        await asyncio.wait_for(fast_done.wait(), WAIT)
        with pytest.raises(cp.ClaimLost) as caught:
            tasks.complete(claim, "late")
        lost.append(str(caught.value))

    async def fast(ctx: cp.NodeContext) -> str:
        await asyncio.wait_for(slow_has_it.wait(), WAIT)
        tasks = ctx.board.queue("tasks")
        assert tasks.claim() is None  # the lease still runs
        clock.now = 1031.0
        claim = tasks.claim(lease=5)
        assert claim is not None and claim.number == 2 and claim.lease_until == 1036.0
        tasks.complete(claim, "on time")
        fast_done.set()
        return claim.item

    g.add("slow", slow)
    g.add("fast", fast)
    store = MemoryStore()
    result = await cp.run(g, store=store)
    assert result.ok, result.nodes
    item = result.board.queues["tasks"].items["job"]
    assert (item.status, item.result, item.expired) == ("done", "on time", 1)
    assert "claim 1 is no longer held" in lost[0] and "completed already" in lost[0]
    expired = _data(store, result.run_id, EventKind.CLAIM_EXPIRED)
    assert [d["reason"] for d in expired] == ["the lease of attempt 1 of node 'slow' ran out"]


async def test_verify_refuses_a_result_and_the_claim_stays_held() -> None:
    def verify(payload: Any, result: Any) -> bool | str:
        return isinstance(result, int) or f"expected a number for {payload!r}"

    g = cp.Graph("verified", board=cp.Board(queues={"q": cp.WorkQueue(verify=verify)}))

    def worker(ctx: cp.NodeContext) -> list[str]:
        q = ctx.board.queue("q")
        q.put("x", id="x")
        claim = q.claim()
        assert claim is not None
        try:
            q.complete(claim, "not a number")
        except cp.BoardConflict as exc:
            message = str(exc)
        q.complete(claim, 7)
        return [message]

    g.add("worker", worker)
    store = MemoryStore()
    result = await cp.run(g, store=store)
    assert "result refused: expected a number for 'x'; the claim is still held" in \
        result["worker"][0]
    assert result.board.queues["q"].items["x"].result == 7
    rejected = _data(store, result.run_id, EventKind.BOARD_CONFLICT)
    assert [(d["key"], d["outcome"]) for d in rejected] == [("q/x", "rejected")]


async def test_a_retried_producer_puts_the_same_items_not_new_ones() -> None:
    g = cp.Graph("producer", board=cp.Board())

    def produce(ctx: cp.NodeContext) -> list[str]:
        tasks = ctx.board.queue("tasks")
        ids = [tasks.put(n) for n in range(3)] + [tasks.put("named", id="fixed")]
        if ctx.attempt == 1:
            raise cp.Retry("try again")
        return ids

    g.add("make", produce, retries=1)
    store = MemoryStore()
    result = await cp.run(g, store=store)
    assert result["make"] == ["make#1", "make#2", "make#3", "fixed"]
    puts = _data(store, result.run_id, EventKind.QUEUE_PUT)
    assert [d["item"] for d in puts] == ["make#1", "make#2", "make#3", "fixed"]
    assert result.board.queues["tasks"].counts() == {"open": 4, "claimed": 0, "done": 0}


async def test_an_idle_worker_takes_over_the_item_of_a_worker_that_failed_for_good() -> None:
    g = cp.Graph("takeover", board=cp.Board(queues={"tasks": cp.WorkQueue()}))
    holding = asyncio.Event()

    async def work(payload: str, ctx: cp.NodeContext) -> str:
        if payload == "slow" and ctx.node == "w-1":
            holding.set()
            await asyncio.sleep(0)  # the other worker finds nothing open, and waits
            raise RuntimeError("w-1 dies holding its claim, with no retries left")
        if payload == "quick":
            await asyncio.wait_for(holding.wait(), WAIT)
        return payload.upper()

    def fill(ctx: cp.NodeContext) -> None:
        for item in ("slow", "quick"):
            ctx.board.queue("tasks").put(item, id=item)

    filled = g.add("fill", fill)
    pool(g, "w", work, size=2, queue="tasks", after=[filled])
    store = MemoryStore()
    result = await cp.run(g, store=store)
    assert result.nodes["w-1"].status is cp.NodeStatus.FAILED  # the run fails for it...
    items = result.board.queues["tasks"].items
    assert {i: (items[i].status, items[i].result) for i in items} == {
        "slow": ("done", "SLOW"), "quick": ("done", "QUICK")}  # ...but no item is lost
    assert result["w-2"] == ["quick", "slow"]
    done = Counter(d["item"] for d in _data(store, result.run_id, EventKind.CLAIM_DONE))
    assert done == {"slow": 1, "quick": 1}


async def test_release_reopens_an_item_and_the_views_read_the_board() -> None:
    g = cp.Graph("views", board=cp.Board(keys={"k": cp.Key(policy="first_wins")}))

    def step(ctx: cp.NodeContext) -> dict[str, Any]:
        q = ctx.board.queue("jobs")
        q.put("one", id="1")
        claim = q.claim()
        assert claim is not None
        q.release(claim)
        with pytest.raises(cp.ClaimLost, match="claim 1 is no longer held"):
            q.complete(claim, "too late: released")
        again = q.claim()
        assert again is not None and again.number == 2
        q.complete(again, "ONE")
        ctx.board.write("k", "a")
        ctx.board.write("k", "b")  # kept out: first_wins
        return {"counts": q.counts(), "results": q.results(),
                "snapshot": {k: [v.value, v.version] for k, v in ctx.board.snapshot().items()},
                "conflicts": [c.outcome for c in ctx.board.conflicts()],
                "history": [w.value for w in ctx.board.history("k")]}

    g.add("s", step)
    store = MemoryStore()
    result = await cp.run(g, store=store)
    assert result["s"] == {"counts": {"open": 0, "claimed": 0, "done": 1},
                           "results": {"1": "ONE"}, "snapshot": {"k": ["a", 1]},
                           "conflicts": ["kept"], "history": ["a"]}
    assert [d["claim"] for d in _data(store, result.run_id, EventKind.CLAIM_RELEASED)] == [1]
