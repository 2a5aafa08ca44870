"""Invariants of the ``program`` queue order (models/queueing.py), under Hypothesis.

Its decisions follow from its state alone (checked against a brute-force reading of the
definition), no waiter is starved by callers that never stop coming, and the slot queue
is work-conserving. No clock: held times are given, not measured.
"""

from __future__ import annotations

import asyncio
import heapq
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from counterpoint.context import CallOwner
from counterpoint.models.queueing import SLACK, ProgramOrder, SlotQueue, Waiting


@dataclass
class _Known:
    arrived: int
    start: float
    promised: float | None = None
    attained: float = 0.0
    remaining: float = 0.0
    waiting: list[tuple[float, int, int]] = field(default_factory=list)
    """(virtual time pushed - rank, seq, item) of live calls."""


class _Oracle:
    """The order as the module docstring defines it, recomputed from scratch per pick."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.served = 0.0
        self.known: dict[str, _Known] = {}
        self.seq = 0

    def _get(self, name: str) -> _Known:
        if name not in self.known:
            self.known[name] = _Known(len(self.known), self.served / self.slots)
        return self.known[name]

    def push(self, item: int, owner: CallOwner) -> None:
        known = self._get(owner.workflow)
        if known.promised is None:
            known.promised = owner.remaining
        known.remaining = owner.remaining
        known.waiting.append((self.served / self.slots - owner.rank, self.seq, item))
        self.seq += 1

    def charge(self, owner: CallOwner, held: float) -> None:
        known = self._get(owner.workflow)
        self.served += held
        known.attained += held

    def discard(self, item: int) -> None:
        for known in self.known.values():
            known.waiting = [w for w in known.waiting if w[2] != item]

    def pop(self) -> int | None:
        def tag(k: _Known) -> float:
            excess = k.attained - SLACK * (k.promised or 0.0)
            return k.start + k.remaining + (excess if excess > 0 else 0.0)

        pending = [k for k in self.known.values() if k.waiting]
        if not pending:
            return None
        best = min(pending, key=lambda k: (tag(k), k.arrived))
        call = min(best.waiting)
        best.waiting.remove(call)
        return call[2]


_workflows = st.sampled_from(["a", "b", "c", "d"])
_ops = st.lists(st.one_of(
    st.tuples(st.just("push"), _workflows, st.integers(0, 5), st.integers(0, 20)),
    st.tuples(st.just("charge"), _workflows, st.integers(0, 6)),
    st.tuples(st.just("discard"), st.integers(0, 40)),
    st.tuples(st.just("pop"))), max_size=60)


@settings(max_examples=200, deadline=None)
@given(slots=st.integers(1, 4), ops=_ops)
def test_each_decision_follows_from_the_state_as_defined(
        slots: int, ops: list[tuple[object, ...]]) -> None:
    order: ProgramOrder[int] = ProgramOrder(slots)
    oracle = _Oracle(slots)
    pushed: list[Waiting[int]] = []
    for op in ops:
        if op[0] == "push":
            _, name, rank, remaining = op
            owner = CallOwner(str(name), float(rank), float(remaining))  # type: ignore[arg-type]
            pushed.append(order.push(len(pushed), owner))
            oracle.push(len(pushed) - 1, owner)
        elif op[0] == "charge":
            owner = CallOwner(str(op[1]))
            order.charge(owner, float(op[2]))  # type: ignore[arg-type]
            oracle.charge(owner, float(op[2]))  # type: ignore[arg-type]
        elif op[0] == "discard" and pushed:
            entry = pushed[int(op[1]) % len(pushed)]  # type: ignore[call-overload]
            order.discard(entry)  # a served or withdrawn one: nothing happens
            oracle.discard(entry.item)
        elif op[0] == "pop":
            assert order.pop() == oracle.pop()
        assert len(order) == sum(len(k.waiting) for k in oracle.known.values())
    while (want := oracle.pop()) is not None:  # and the rest come out in the same order
        assert order.pop() == want
    assert order.pop() is None and len(order) == 0


@settings(max_examples=60, deadline=None)
@given(slots=st.integers(1, 4),
       streams=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(1, 8)),
                        min_size=1, max_size=4),
       victims=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 5),
                                  st.integers(-1, 3)), min_size=1, max_size=4),
       newcomer=st.integers(0, 5))
def test_no_waiter_starves_while_callers_keep_coming(
        slots: int, streams: list[tuple[int, int, int]], victims: list[tuple[int, int, int]],
        newcomer: int) -> None:
    """Overload: each finished call brings its stream's next call and a new small
    workflow, forever, and the victims ask for more work than anyone. Each victim is
    still served: newcomers queue behind it once the virtual time passes its tag (at
    most 50 + 5 virtual seconds, a few hundred calls here), and a stream loses its
    place once served beyond its promise."""
    # a call: (workflow, kind, index, seconds it holds a slot)
    order: ProgramOrder[tuple[str, str, int, float]] = ProgramOrder(slots)
    waiting_victims = set()
    for i, (remaining, rank, stream) in enumerate(victims):
        # a victim of its own workflow, or a low-priority call inside a stream's workflow
        name = f"stream{stream % len(streams)}" if stream >= 0 else f"victim{i}"
        order.push((name, "victim", i, 0.5), CallOwner(name, float(rank), float(remaining)))
        waiting_victims.add(i)
    for s, (remaining, rank, duration) in enumerate(streams):
        order.push((f"stream{s}", "stream", s, duration / 2),
                   CallOwner(f"stream{s}", float(rank), float(remaining)))
    running: list[tuple[float, int, tuple[str, str, int, float]]] = []
    now, ids, finished = 0.0, 0, 0
    while waiting_victims:
        while len(running) < slots and (call := order.pop()) is not None:
            if call[1] == "victim":
                waiting_victims.discard(call[2])
            ids += 1
            heapq.heappush(running, (now + call[3], ids, call))
        assert finished < 20_000, f"victims {sorted(waiting_victims)} still wait"
        if not running:
            break
        end, _, call = heapq.heappop(running)
        order.charge(CallOwner(call[0]), call[3])
        now, finished = end, finished + 1
        if call[1] == "stream":  # its next call comes
            remaining, rank, _ = streams[call[2]]
            order.push(call, CallOwner(call[0], float(rank), float(remaining)))
        fresh = f"new{finished}"
        order.push((fresh, "new", finished, 1.0),
                   CallOwner(fresh, 0.0, float(newcomer)))
    assert not waiting_victims


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)  # let the tasks just created or granted run to their await


@settings(max_examples=100, deadline=None)
@given(slots=st.integers(1, 3), ops=st.lists(st.one_of(
    st.tuples(st.just("acquire"), _workflows, st.integers(0, 5), st.integers(0, 20)),
    st.tuples(st.just("release"), st.integers(0, 20)),
    st.tuples(st.just("cancel"), st.integers(0, 20))), max_size=40))
def test_no_slot_is_free_while_a_call_waits(slots: int, ops: list[tuple[object, ...]]) -> None:
    async def scenario() -> None:
        clock = [0.0]
        queue = SlotQueue(slots, "program", clock=lambda: clock[0])
        tasks: list[tuple[asyncio.Task[float], CallOwner]] = []
        released: set[int] = set()

        def holding() -> list[int]:
            return [i for i, (t, _) in enumerate(tasks) if t.done() and not t.cancelled()
                    and i not in released]

        for op in ops:
            clock[0] += 1.0
            if op[0] == "acquire":
                owner = CallOwner(str(op[1]), float(op[2]), float(op[3]))  # type: ignore[arg-type]
                tasks.append((asyncio.create_task(queue.acquire(owner)), owner))
            elif op[0] == "release" and (held := holding()):
                i = held[int(op[1]) % len(held)]  # type: ignore[call-overload]
                released.add(i)
                queue.release(tasks[i][1], tasks[i][0].result())
            elif op[0] == "cancel":
                queued = [t for t, _ in tasks if not t.done()]
                if queued:
                    queued[int(op[1]) % len(queued)].cancel()  # type: ignore[call-overload]
            await _settle()
            waiting = sum(1 for t, _ in tasks if not t.done())
            assert queue.waiting == waiting
            assert queue.free == slots - len(holding())
            assert queue.free == 0 or queue.waiting == 0, "a free slot while a call waits"
        while held := holding():  # each release hands the slot to the next waiter
            released.add(held[0])
            queue.release(tasks[held[0]][1], tasks[held[0]][0].result())
            await _settle()
        for task, _ in tasks:
            assert task.done()
        assert queue.free == slots and queue.waiting == 0

    asyncio.run(scenario())
