"""Budgets, amounts and the ledger tree that keeps runs within them (see
:mod:`counterpoint.budget`): reserving a call's bound, settling it, what is left."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..approval import clock
from ..checks import number, whole
from ..errors import BudgetExceeded, UserError

_EPSILON = 1e-12
"""Slack in dollar comparisons, for float sums of many small prices."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Budget:
    """A cap on money and/or tokens (``None``: no cap on that one)."""

    usd: float | None = None
    """US dollars; calls to a model with no configured price are refused under it."""
    tokens: int | None = None
    """Input plus output tokens of all calls."""

    def __post_init__(self) -> None:
        if self.usd is not None:
            number(self.usd, "Budget: usd", above=True,
                   fix="leave usd unset for no limit on money, e.g. Budget(tokens=20_000)")
        if self.tokens is not None:
            whole(self.tokens, "Budget: tokens", least=1,
                  fix="leave tokens unset for no limit on tokens, e.g. Budget(usd=0.5)")

    def __str__(self) -> str:
        parts = ([f"${self.usd:g}"] if self.usd is not None else []) + (
            [f"{self.tokens:,} tokens"] if self.tokens is not None else [])
        return " and ".join(parts) or "unlimited"

    def as_data(self) -> dict[str, Any]:
        return {k: v for k, v in (("usd", self.usd), ("tokens", self.tokens)) if v is not None}

    @staticmethod
    def checked(value: object, *, where: str) -> Budget | None:
        """``value`` if it is a :class:`Budget` or ``None``, else a UserError naming ``where``."""
        if value is None or isinstance(value, Budget):
            return value
        raise UserError(f"{where}: budget must be a counterpoint.budget.Budget, got "
                        f"{value!r}; write Budget(usd=0.5) and/or Budget(tokens=20_000)")

    @classmethod
    def from_data(cls, data: Mapping[str, Any] | None) -> Budget | None:
        if not data:
            return None
        return cls(usd=data.get("usd"), tokens=data.get("tokens"))


@dataclass(frozen=True, slots=True)
class Amount:
    """Dollars and tokens: a call's bound, a reservation, what was spent."""

    usd: float = 0.0
    tokens: int = 0

    def __add__(self, other: Amount) -> Amount:
        return Amount(self.usd + other.usd, self.tokens + other.tokens)

    def __sub__(self, other: Amount) -> Amount:
        return Amount(self.usd - other.usd, self.tokens - other.tokens)


ZERO = Amount()


@dataclass(frozen=True, kw_only=True, slots=True)
class Remaining:
    """What is left now, reservations of calls in flight deducted (``None``: no cap)."""

    usd: float | None = None
    tokens: int | None = None
    seconds: float | None = None
    """Seconds before the innermost deadline (``None``: no deadline)."""

    def covers(self, amount: Amount) -> bool:
        """Whether ``amount`` fits in what is left."""
        return (self.usd is None or amount.usd <= self.usd + _EPSILON) and (
            self.tokens is None or amount.tokens <= self.tokens)


@dataclass(slots=True)
class Reservation:
    """A call's bound, held in a ledger and its ancestors until settled."""

    id: str
    amount: Amount
    ledger: Ledger
    settled: bool = False


_IDS = itertools.count(1)
_PROCESS = f"{os.getpid():x}-{time.time_ns() & 0xFFFFFF:x}"
"""Reservation ids are unique across the processes that resume one run."""


@dataclass(slots=True)
class _Tree:
    """What the ledgers of one tree share: the lock, and the calls waiting for room."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = field(
        default_factory=list)

    def wake(self) -> None:
        """Wake every waiter (called with the lock held): each checks again."""
        waiters, self.waiters = self.waiters, []
        for loop, future in waiters:
            loop.call_soon_threadsafe(_done, future)


def _done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Ledger:
    """One budget's account, in a tree of them. See the module docstring.

    ``spent`` starts at what the log says was spent already (on resume); it is this
    ledger's own, its ancestors having counted it in theirs.
    """

    def __init__(self, budget: Budget | None = None, *, where: str,
                 parent: Ledger | None = None, deadline_at: float | None = None,
                 spent: Amount = ZERO) -> None:
        self.budget = budget or Budget()
        self.where = where
        """Whose budget, for messages: ``run R``, ``run R, node n``, ``agent a in ...``."""
        self.parent = parent
        self.deadline_at = deadline_at
        """When the deadline passes (seconds since the epoch), if there is one."""
        self.spent = spent
        self.reserved = ZERO
        self._tree: _Tree = parent._tree if parent is not None else _Tree()
        self.refused = 0
        """Calls this ledger refused."""

    def __repr__(self) -> str:
        return f"Ledger({self.where!r}, {self.budget}, spent={self.spent}, " \
               f"reserved={self.reserved})"

    def child(self, budget: Budget | None = None, *, where: str,
              deadline_at: float | None = None, spent: Amount = ZERO) -> Ledger:
        """A ledger under this one (a node's, a sub-run's, an agent's)."""
        return Ledger(budget, where=where, parent=self, deadline_at=deadline_at, spent=spent)

    def chain(self) -> Iterator[Ledger]:
        """This ledger and its ancestors, innermost first."""
        ledger: Ledger | None = self
        while ledger is not None:
            yield ledger
            ledger = ledger.parent

    @property
    def limited(self) -> bool:
        """Whether any ledger of the chain caps money or tokens."""
        return any(lg.budget.usd is not None or lg.budget.tokens is not None
                   for lg in self.chain())

    @property
    def needs_price(self) -> bool:
        """Whether a money cap applies (a call must have a price to be bounded)."""
        return any(lg.budget.usd is not None for lg in self.chain())

    # ---------------------------------------------------------------- reserving
    def _blocking(self, amount: Amount, *, held: bool) -> Ledger | None:
        """The first ledger of the chain ``amount`` does not fit in: counting what is
        reserved (``held``), or only what was spent (then it never will)."""
        for lg in self.chain():
            used = lg.spent + lg.reserved if held else lg.spent
            cap = lg.budget
            if cap.usd is not None and used.usd + amount.usd > cap.usd + _EPSILON:
                return lg
            if cap.tokens is not None and used.tokens + amount.tokens > cap.tokens:
                return lg
        return None

    def try_reserve(self, amount: Amount, *, what: str) -> Reservation | None:
        """Reserve ``amount`` now if it fits; ``None`` if it would once calls in flight
        settle. Raises :class:`BudgetExceeded` if it never can. Never blocks long."""
        with self._tree.lock:
            never = self._blocking(amount, held=False)
            if never is not None:
                never.refused += 1
                raise _refusal(never, amount, what)
            if self._blocking(amount, held=True) is not None:
                return None
            for lg in self.chain():
                lg.reserved = lg.reserved + amount
            return Reservation(f"{_PROCESS}-{next(_IDS)}", amount, self)

    async def reserve(self, amount: Amount, *, what: str) -> Reservation:
        """Reserve ``amount``, waiting for calls in flight to settle while that could make
        room; raises :class:`BudgetExceeded` once it cannot. Cancellable while waiting."""
        loop = asyncio.get_running_loop()
        while True:
            with self._tree.lock:
                reservation = self.try_reserve(amount, what=what)  # the lock is re-entrant
                if reservation is not None:
                    return reservation
                future: asyncio.Future[None] = loop.create_future()
                self._tree.waiters.append((loop, future))
            await future

    def settle(self, reservation: Reservation, actual: Amount) -> None:
        """Replace ``reservation`` by what the call really used (idempotent: a second
        settle does nothing), and wake the calls waiting for room."""
        with self._tree.lock:
            if reservation.settled:
                return
            reservation.settled = True
            for lg in reservation.ledger.chain():
                lg.reserved = lg.reserved - reservation.amount
                lg.spent = lg.spent + actual
            self._tree.wake()

    def add_spent(self, amount: Amount) -> None:
        """Count ``amount`` as spent outside any reservation (a call made with no cap in
        force, e.g. a model call recorded by a fork)."""
        with self._tree.lock:
            for lg in self.chain():
                lg.spent = lg.spent + amount

    # ---------------------------------------------------------------- reporting
    def remaining(self, now: float | None = None) -> Remaining:
        """What is left: the least over the chain, reservations deducted."""
        usd: float | None = None
        tokens: int | None = None
        deadline: float | None = None
        with self._tree.lock:
            for lg in self.chain():
                used = lg.spent + lg.reserved
                if lg.budget.usd is not None:
                    left = max(0.0, lg.budget.usd - used.usd)
                    usd = left if usd is None else min(usd, left)
                if lg.budget.tokens is not None:
                    left_t = max(0, lg.budget.tokens - used.tokens)
                    tokens = left_t if tokens is None else min(tokens, left_t)
                if lg.deadline_at is not None:
                    deadline = lg.deadline_at if deadline is None else \
                        min(deadline, lg.deadline_at)
        seconds = None if deadline is None else max(
            0.0, deadline - (clock().now() if now is None else now))
        return Remaining(usd=usd, tokens=tokens, seconds=seconds)


def _refusal(ledger: Ledger, amount: Amount, what: str) -> BudgetExceeded:
    cap, spent, reserved = ledger.budget, ledger.spent, ledger.reserved
    money = cap.usd is not None and spent.usd + amount.usd > cap.usd + _EPSILON
    if money:
        assert cap.usd is not None
        detail = (f"it needs up to ${amount.usd:.6f} but the budget of ${cap.usd:g} of "
                  f"{ledger.where} has ${spent.usd:.6f} spent and ${reserved.usd:.6f} "
                  "reserved by calls in flight")
        numbers = (spent.usd, reserved.usd, amount.usd, cap.usd)
    else:
        detail = (f"it needs up to {amount.tokens:,} tokens but the budget of "
                  f"{cap.tokens or 0:,} tokens of {ledger.where} has {spent.tokens:,} spent "
                  f"and {reserved.tokens:,} reserved by calls in flight")
        numbers = (float(spent.tokens), float(reserved.tokens), float(amount.tokens),
                   float(cap.tokens or 0))
    return BudgetExceeded(
        f"{what}: refused before it was sent: {detail}. Raise the budget "
        "(RunOptions(budget=Budget(...)), `budget:` in a workflow, --budget-usd / "
        "--budget-tokens) or ask for less (a smaller max_tokens, a cheaper model)",
        budget=f"{ledger.where}: {cap}", spent=numbers[0], reserved=numbers[1],
        needed=numbers[2], cap=numbers[3], unit="usd" if money else "tokens")
