"""The ledger tree (:mod:`counterpoint.budget`): reserve, settle, refuse, wait; and the
invariant ``spent + reserved <= budget`` in every ledger of random trees under random
interleavings of reserve / settle / cancel (Hypothesis)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from counterpoint.budget import (
    ZERO,
    Amount,
    Budget,
    Ledger,
    Reservation,
    affordable,
    remaining,
    spending,
    use_ledger,
)
from counterpoint.errors import BudgetExceeded, UserError


def test_a_budget_rejects_nonsense() -> None:
    for bad in ({"usd": 0}, {"usd": -1.0}, {"tokens": 0}, {"tokens": 1.5}, {"usd": True}):
        with pytest.raises(UserError, match="Budget"):
            Budget(**bad)
    assert str(Budget(usd=0.5, tokens=2000)) == "$0.5 and 2,000 tokens"
    assert Budget.from_data(Budget(usd=0.5).as_data()) == Budget(usd=0.5)


def test_reserve_then_settle_releases_the_difference() -> None:
    run = Ledger(Budget(usd=1.0, tokens=1000), where="run r")
    r = run.try_reserve(Amount(0.4, 400), what="call")
    assert r is not None and run.reserved == Amount(0.4, 400)
    assert run.remaining().usd == pytest.approx(0.6)
    run.settle(r, Amount(0.1, 100))
    assert run.reserved.usd == pytest.approx(0.0) and run.reserved.tokens == 0
    assert run.spent == Amount(0.1, 100)
    run.settle(r, Amount(0.3, 300))  # a second settle does nothing
    assert run.spent == Amount(0.1, 100)


def test_a_call_that_fits_only_after_calls_in_flight_waits_and_one_that_never_fits_is_refused(
        ) -> None:
    run = Ledger(Budget(usd=1.0), where="run r")
    held = run.try_reserve(Amount(0.8), what="first")
    assert held is not None
    assert run.try_reserve(Amount(0.5), what="second") is None  # would fit once settled
    with pytest.raises(BudgetExceeded) as info:
        run.try_reserve(Amount(1.5), what="run r, node 'n': model call to m")
    assert "run r, node 'n'" in str(info.value) and "$1" in str(info.value)
    assert info.value.budget == "run r: $1" and run.refused == 1


async def test_a_waiting_call_proceeds_when_room_is_made_and_is_refused_when_it_is_not() -> None:
    run = Ledger(Budget(usd=1.0), where="run r")
    a = run.try_reserve(Amount(0.6), what="a")
    b = run.try_reserve(Amount(0.4), what="b")
    assert a is not None and b is not None
    waiting = asyncio.ensure_future(run.reserve(Amount(0.5), what="c"))
    await asyncio.sleep(0)
    assert not waiting.done()
    run.settle(a, Amount(0.1))  # 0.1 spent + 0.4 reserved: 0.5 fits
    c = await waiting
    assert c.amount == Amount(0.5)
    refused = asyncio.ensure_future(run.reserve(Amount(0.45), what="d"))
    await asyncio.sleep(0)
    assert not refused.done()
    run.settle(b, Amount(0.4))  # 0.5 spent, c's 0.5 in flight: d waits on
    await asyncio.sleep(0)
    assert not refused.done()
    run.settle(c, Amount(0.45))  # 0.95 spent: 0.45 can never fit now
    with pytest.raises(BudgetExceeded):
        await refused


async def test_cancelling_a_waiting_call_holds_nothing() -> None:
    run = Ledger(Budget(tokens=100), where="run r")
    held = run.try_reserve(Amount(0, 80), what="a")
    assert held is not None
    waiting = asyncio.ensure_future(run.reserve(Amount(0, 50), what="b"))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert run.reserved == Amount(0, 80)
    run.settle(held, ZERO)
    assert run.reserved == ZERO and run.spent == ZERO


def test_a_child_never_gets_more_than_what_is_left_of_its_parent() -> None:
    run = Ledger(Budget(usd=1.0), where="run r")
    spent = run.try_reserve(Amount(0.7), what="x")
    assert spent is not None
    run.settle(spent, Amount(0.7))
    node = run.child(Budget(usd=5.0), where="run r, node 'n'")
    assert node.remaining().usd == pytest.approx(0.3)  # the parent's rest, not 5
    with pytest.raises(BudgetExceeded) as info:
        node.try_reserve(Amount(0.5), what="call")
    assert info.value.budget == "run r: $1"  # the ancestor that refused it
    small = node.child(Budget(usd=0.1), where="agent a")
    with pytest.raises(BudgetExceeded) as info:
        small.try_reserve(Amount(0.2), what="call")
    assert info.value.budget == "agent a: $0.1"


def test_remaining_reports_the_nearest_deadline_of_the_chain() -> None:
    run = Ledger(where="run r", deadline_at=1000.0)
    node = run.child(where="n", deadline_at=2000.0)
    assert node.remaining(now=900.0).seconds == pytest.approx(100.0)
    assert node.remaining(now=1500.0).seconds == 0.0
    assert Ledger(where="free").remaining().seconds is None


def test_affordable_counts_the_parallel_calls_that_fit() -> None:
    with spending(Budget(usd=1.0, tokens=1000), where="goal g") as ledger:
        assert affordable(8, Amount(0.3, 100)) == 3
        assert affordable(8, Amount(0.01, 400)) == 2
        held = ledger.try_reserve(Amount(0.5, 0), what="x")
        assert held is not None
        assert affordable(8, Amount(0.3, 100)) == 1
        assert remaining().usd == pytest.approx(0.5)
    use_ledger(None)
    assert affordable(8, Amount(100.0, 10**9)) == 8  # nothing caps the caller


# ----------------------------------------------------------------- properties
@dataclass
class _Tree:
    ledgers: list[Ledger]


@st.composite
def _trees(draw: st.DrawFn) -> _Tree:
    """A random tree of up to 7 ledgers, each with or without a money / token cap."""
    def cap() -> Budget:
        usd = draw(st.one_of(st.none(), st.floats(0.05, 2.0)))
        tokens = draw(st.one_of(st.none(), st.integers(10, 2000)))
        return Budget(usd=usd, tokens=tokens)
    ledgers = [Ledger(cap(), where="run r")]
    for i in range(draw(st.integers(0, 6))):
        parent = ledgers[draw(st.integers(0, len(ledgers) - 1))]
        ledgers.append(parent.child(cap(), where=f"child {i}"))
    return _Tree(ledgers)


def _within(ledger: Ledger) -> bool:
    used = ledger.spent + ledger.reserved
    cap = ledger.budget
    return (cap.usd is None or used.usd <= cap.usd + 1e-9) and (
        cap.tokens is None or used.tokens <= cap.tokens)


_STEPS = st.lists(st.tuples(
    st.sampled_from(["reserve", "settle", "cancel"]), st.integers(0, 50),
    st.floats(0.0, 0.6), st.integers(0, 600), st.floats(0.0, 1.0)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(tree=_trees(), steps=_STEPS)
def test_no_ledger_ever_has_more_spent_and_reserved_than_its_budget(
        tree: _Tree, steps: list[tuple[str, int, float, int, float]]) -> None:
    """Random reserve / settle (at a random share of the bound) / cancel (settled at the
    whole bound, as a call cancelled in flight is) in random ledgers of the tree."""
    open_: list[Reservation] = []
    for op, pick, usd, tokens, share in steps:
        if op == "reserve":
            ledger = tree.ledgers[pick % len(tree.ledgers)]
            try:
                held = ledger.try_reserve(Amount(usd, tokens), what="call")
            except BudgetExceeded as exc:
                assert exc.budget  # names the ledger that refused it
                continue
            if held is not None:
                open_.append(held)
        elif open_:
            held = open_.pop(pick % len(open_))
            actual = held.amount if op == "cancel" else Amount(
                held.amount.usd * share, int(held.amount.tokens * share))
            before = {id(lg): lg.spent for lg in held.ledger.chain()}
            held.ledger.settle(held, actual)
            for lg in held.ledger.chain():
                assert lg.spent.usd == pytest.approx(before[id(lg)].usd + actual.usd)
        for lg in tree.ledgers:
            assert _within(lg), lg
    for held in open_:  # every reservation settled: nothing is left reserved
        held.ledger.settle(held, ZERO)
    for lg in tree.ledgers:
        assert lg.reserved.usd == pytest.approx(0.0, abs=1e-9) and lg.reserved.tokens == 0
        # a parent's spend is at least the sum of its children's
        kids = [k for k in tree.ledgers if k.parent is lg]
        assert lg.spent.usd + 1e-9 >= sum(k.spent.usd for k in kids)


@settings(max_examples=40, deadline=None)
@given(tree=_trees(), calls=st.lists(st.tuples(st.integers(0, 50), st.floats(0.01, 0.5),
                                                st.integers(1, 400), st.floats(0.0, 1.0),
                                                st.booleans()), min_size=1, max_size=24))
def test_concurrent_calls_never_overspend(
        tree: _Tree, calls: list[tuple[int, float, int, float, bool]]) -> None:
    """Many calls in flight at once on one event loop, each reserving (waiting for room
    when it may come), yielding, then settling at a share of its bound or being
    cancelled (settled at the whole bound); the budget holds at every step."""
    seen: list[bool] = []

    async def call(ledger: Ledger, bound: Amount, share: float, cancel: bool) -> None:
        try:
            held = await ledger.reserve(bound, what="call")
        except BudgetExceeded:
            return
        seen.append(all(_within(lg) for lg in tree.ledgers))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        ledger.settle(held, bound if cancel else Amount(bound.usd * share,
                                                        int(bound.tokens * share)))
        seen.append(all(_within(lg) for lg in tree.ledgers))

    async def main() -> None:
        await asyncio.gather(*(call(tree.ledgers[p % len(tree.ledgers)], Amount(u, t), s, c)
                               for p, u, t, s, c in calls))

    asyncio.run(asyncio.wait_for(main(), 10))
    assert all(seen)
    for lg in tree.ledgers:
        assert lg.reserved.tokens == 0 and _within(lg)
