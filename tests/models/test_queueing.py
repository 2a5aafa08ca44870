"""Program-aware ordering of calls waiting for a model's slots (models/queueing.py)."""

from __future__ import annotations

import asyncio

import pytest

import counterpoint as cp
from counterpoint.context import CallOwner, call_owner
from counterpoint.models.limits import RateLimiter
from counterpoint.models.queueing import SLACK, SlotQueue


async def _served_order(queue: SlotQueue, owners: list[CallOwner]) -> list[CallOwner]:
    """Hold the only slot, queue one call per owner (in list order), then let them go."""
    held = await queue.acquire(None)
    order: list[CallOwner] = []

    async def call(owner: CallOwner) -> None:
        granted = await queue.acquire(owner)
        order.append(owner)
        queue.release(owner, granted)

    tasks = []
    for owner in owners:
        tasks.append(asyncio.create_task(call(owner)))
        await asyncio.sleep(0)  # let it reach the queue: arrival order is list order
    assert queue.waiting == len(owners)
    queue.release(None, held)
    await asyncio.gather(*tasks)
    return order


async def test_fifo_serves_in_arrival_order() -> None:
    owners = [CallOwner("a", 1), CallOwner("b", 9), CallOwner("a", 5)]
    assert await _served_order(SlotQueue(1, "fifo"), owners) == owners


async def test_program_serves_the_critical_path_first_within_a_workflow() -> None:
    owners = [CallOwner("a", 1.0), CallOwner("a", 9.0), CallOwner("a", 5.0)]
    order = await _served_order(SlotQueue(1, "program"), owners)
    assert [o.rank for o in order] == [9.0, 5.0, 1.0]


async def test_program_serves_the_workflow_with_the_least_work_left_first() -> None:
    owners = [CallOwner("big", 9.0, remaining=30.0), CallOwner("small", 0.0, remaining=2.0),
              CallOwner("mid", 5.0, remaining=10.0)]
    order = await _served_order(SlotQueue(1, "program"), owners)
    assert [o.workflow for o in order] == ["small", "mid", "big"]


async def test_program_finishes_equal_workflows_in_the_order_they_came() -> None:
    owners = [CallOwner("first", remaining=4.0), CallOwner("second", remaining=4.0),
              CallOwner("first", remaining=4.0), CallOwner("second", remaining=4.0)]
    order = await _served_order(SlotQueue(1, "program"), owners)
    assert [o.workflow for o in order] == ["first", "first", "second", "second"]


async def test_a_queue_times_calls_with_its_clock() -> None:
    now = [10.0]
    queue = SlotQueue(1, "program", clock=lambda: now[0])
    granted = await queue.acquire(CallOwner("a", remaining=1.0))
    assert granted == 10.0
    now[0] = 12.5
    queue.release(CallOwner("a"), granted)
    assert queue._program.tag("a") == pytest.approx(1.0)  # within SLACK times its estimate
    granted = await queue.acquire(CallOwner("a", remaining=1.0))
    now[0] = 14.5
    queue.release(CallOwner("a"), granted)
    # it said 1 s of work was left and has held the slot 4.5 s: 0.5 s more than it may
    assert queue._program.tag("a") == pytest.approx(1.0 + 4.5 - SLACK * 1.0)


async def test_a_call_that_did_not_wait_is_not_charged() -> None:
    now = [0.0]
    queue = SlotQueue(2, "program", clock=lambda: now[0])
    granted = await queue.acquire(CallOwner("a", remaining=1.0))
    now[0] = 30.0  # a slow cold start, while the other slot stayed free
    queue.release(CallOwner("a"), granted, waited=False)
    assert queue._program.tag("a") == pytest.approx(1.0)
    assert queue._program.virtual_time == 0.0


async def test_a_workflow_served_far_beyond_its_estimate_loses_its_place() -> None:
    queue = SlotQueue(1, "program", clock=lambda: 0.0)
    for owner in (CallOwner("loop", remaining=1.0), CallOwner("fresh", remaining=5.0)):
        queue._program.note(owner)  # both came at the start
    queue._program.charge(CallOwner("loop"), 10.0)  # said 1 s, held a slot 10 s
    order = await _served_order(queue, [CallOwner("loop", remaining=1.0),
                                        CallOwner("fresh", remaining=5.0)])
    assert [o.workflow for o in order] == ["fresh", "loop"]


@pytest.mark.parametrize("order", ["program", "fifo"])
async def test_a_cancelled_waiter_loses_no_slot(order: str) -> None:
    queue = SlotQueue(1, order)  # type: ignore[arg-type]
    held = await queue.acquire(None)
    gone = asyncio.create_task(queue.acquire(CallOwner("a")))
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert queue.waiting == 0
    queue.release(None, held)
    granted = await asyncio.wait_for(queue.acquire(CallOwner("b")), timeout=5)
    assert queue.busy()
    queue.release(CallOwner("b"), granted)
    assert not queue.busy()


async def test_a_slot_granted_to_a_cancelled_caller_passes_on() -> None:
    queue = SlotQueue(1, "program")
    held = await queue.acquire(None)
    first = asyncio.create_task(queue.acquire(CallOwner("a")))
    second = asyncio.create_task(queue.acquire(CallOwner("b")))
    await asyncio.sleep(0)
    queue.release(None, held)  # grants "a"'s future; cancel "a" before it resumes
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    granted = await asyncio.wait_for(second, timeout=5)
    queue.release(CallOwner("b"), granted)
    assert not queue.busy() and queue.waiting == 0


def test_an_unknown_order_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown queue order 'lifo'"):
        SlotQueue(1, "lifo")  # type: ignore[arg-type]


async def test_a_node_owns_its_calls_by_root_run_rank_and_work_left() -> None:
    seen: dict[str, CallOwner | None] = {}

    async def probe(tag: str) -> str:
        seen[tag] = call_owner()
        return f"after {tag}"

    inner = cp.Graph("inner")
    inner.add("deep", probe, tag="deep")
    g = cp.Graph("outer")
    head = g.add("head", probe, tag="head", estimate=3.0)
    g.add("tail", probe, tag=head, estimate=2.0)  # seen["after head"]
    g.add("sub", inner)
    result = await cp.run(g, store="memory")
    assert result.ok
    assert call_owner() is None  # outside any node
    head_owner, deep_owner = seen["head"], seen["deep"]
    assert head_owner is not None and deep_owner is not None
    assert head_owner.workflow == str(result.run_id) == deep_owner.workflow
    assert head_owner.rank == pytest.approx(5.0)  # its own 3 s plus the 2 s after it
    tail_owner = seen["after head"]
    assert tail_owner is not None and tail_owner.rank == pytest.approx(2.0)
    # the run's unfinished nodes: head 3 s, tail 2 s and sub (no estimate: the default 1 s)
    # while head runs; once head is done, tail's 2 s and whatever of sub is not done
    assert head_owner.remaining == pytest.approx(6.0)
    assert 2.0 <= tail_owner.remaining <= 3.0
    assert deep_owner.remaining == pytest.approx(1.0)  # the sub-run's own work: deep


async def test_the_limiter_hands_waiting_calls_to_its_queue_order() -> None:
    limiter = RateLimiter(max_concurrency=1, order="fifo")
    order: list[int] = []
    holding, gate = asyncio.Event(), asyncio.Event()

    async def call(i: int) -> None:
        async with limiter.slot():
            order.append(i)
            if i == 0:
                holding.set()
                await gate.wait()

    tasks = [asyncio.create_task(call(0))]
    await holding.wait()
    tasks += [asyncio.create_task(call(i)) for i in range(1, 4)]
    for _ in range(3):
        await asyncio.sleep(0)  # each reaches the queue, in creation order
    gate.set()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3]
    queue = limiter._queue()
    assert queue is not None and queue.order == "fifo" and not queue.busy()
