"""Money and token budgets, and the ledger tree that keeps runs within them.

A :class:`Budget` caps US dollars, tokens or both. A :class:`Ledger` holds one budget's
account: what was **spent** (settled calls) and what is **reserved** (calls in flight,
at their bound). Ledgers form a tree: a run's ledger, a node's (``Policy(budget=...)``),
a sub-run's, an agent's (``Agent(budget=...)``); reserving in a ledger reserves in
every ancestor, so a child never gets more than what is left of its parent.

A model call reserves its bound before it is sent and settles with its real usage
after (:mod:`counterpoint.models.budgeting`). A reservation that does not fit now but
would once the calls in flight settle waits for them; one that cannot fit even then is
refused with :class:`~counterpoint.errors.BudgetExceeded`. So at every moment, in every
ledger, ``spent + reserved <= budget`` (the provider honouring ``max_tokens``).

:func:`remaining` tells code running now (a router, a fan-out helper) what is left of
the innermost ledger and its ancestors, reservations deducted, and the seconds left
before the deadline; :func:`affordable` how many of ``n`` parallel calls that covers.

The ledger is a projection of the run log: :func:`spent_in_log` rebuilds what was
spent (calls settled, and calls reserved that a crash left unsettled, at their bound)
when a run resumes.

Thread-safe: one lock per tree; waiters are woken on their own event loops.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .approval import clock
from .errors import BudgetExceeded, UserError
from .events import Event, EventKind

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
        if self.usd is not None and (isinstance(self.usd, bool) or
                                     not isinstance(self.usd, int | float) or not self.usd > 0):
            raise UserError(f"Budget: usd must be a number > 0, got {self.usd!r}")
        if self.tokens is not None and (isinstance(self.tokens, bool) or
                                        not isinstance(self.tokens, int) or self.tokens < 1):
            raise UserError(f"Budget: tokens must be a whole number >= 1, got {self.tokens!r}")

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


_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_seconds(text: str | float | int, *, where: str) -> float:
    """``30``, ``30s``, ``2.5m`` or ``1h`` in seconds (> 0), else a UserError naming ``where``."""
    if isinstance(text, bool):
        raise UserError(f"{where}: a deadline must be seconds (30, 30s, 2m, 1h), got {text!r}")
    if isinstance(text, int | float):
        value = float(text)
    else:
        raw = text.strip().lower()
        unit = raw[-1:] if raw[-1:] in ("s", "m", "h") else ""
        try:
            value = float(raw[:-1] if unit else raw) * _UNITS[unit]
        except ValueError:
            raise UserError(f"{where}: a deadline must be seconds (30, 30s, 2m, 1h), got "
                            f"{text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise UserError(f"{where}: a deadline must be > 0 seconds, got {text!r}")
    return value


# ------------------------------------------------------------------ context
_LEDGER: ContextVar[Ledger | None] = ContextVar("counterpoint_ledger", default=None)
"""The innermost ledger of the calling task: set by the scheduler for every node's task
(the node's ledger, or its run's), and by :func:`spending`."""


def current_ledger() -> Ledger | None:
    """The ledger model calls made now reserve in (``None``: no budget applies)."""
    return _LEDGER.get()


def remaining() -> Remaining:
    """What is left for a model call made now: money and tokens (reservations of calls
    in flight deducted) and seconds before the deadline, the least over the innermost
    ledger and its ancestors. All ``None`` when nothing caps the caller. A router or a
    fan-out helper reads it to pick a cheaper model or fewer samples."""
    ledger = _LEDGER.get()
    return Remaining() if ledger is None else ledger.remaining()


def affordable(count: int, each: Amount) -> int:
    """How many of ``count`` parallel calls, each bounded by ``each``, what is left now
    covers (``count`` when nothing caps the caller; at least 0)."""
    left = remaining()
    fits = count
    if left.usd is not None and each.usd > 0:
        fits = min(fits, int((left.usd + _EPSILON) // each.usd))
    if left.tokens is not None and each.tokens > 0:
        fits = min(fits, left.tokens // each.tokens)
    return max(0, fits)


@contextmanager
def spending(budget: Budget | None = None, *, where: str,
             deadline: float | None = None) -> Iterator[Ledger]:
    """Run the body under a child of the current ledger capped by ``budget`` (and a
    ``deadline`` in seconds from now, on the approvals' clock, which :func:`remaining`
    reports; it cancels nothing). Without a current ledger, the child is the root of a new tree."""
    Budget.checked(budget, where=f"spending(where={where!r})")
    parent = _LEDGER.get()
    at = None if deadline is None else clock().now() + deadline
    ledger = parent.child(budget, where=where, deadline_at=at) if parent is not None else \
        Ledger(budget, where=where, deadline_at=at)
    token = _LEDGER.set(ledger)
    try:
        yield ledger
    finally:
        _LEDGER.reset(token)


def use_ledger(ledger: Ledger | None) -> None:
    """Make ``ledger`` the calling task's (the scheduler does it for each node's task)."""
    _LEDGER.set(ledger)


# ---------------------------------------------------------------------- log
def _tally(events: Iterable[Event]) -> tuple[Amount, Amount, dict[str, Amount],
                                             list[dict[str, Any]], Budget | None]:
    """Settled spend, reservations no call settled, spend per node (both), the refusals
    (``node_failed`` of a :class:`BudgetExceeded`, with their node) and the run's budget."""
    settled = ZERO
    nodes: dict[str, Amount] = {}
    open_: dict[str, tuple[str | None, Amount]] = {}
    refused: list[dict[str, Any]] = []
    budget: Budget | None = None
    for event in events:
        data = event.data or {}
        kind = event.kind
        if kind is EventKind.RUN_CREATED:
            budget = Budget.from_data((data.get("options") or {}).get("budget"))
        elif kind is EventKind.BUDGET_RESERVED:
            open_[data["id"]] = (event.node, Amount(data.get("usd", 0.0),
                                                    data.get("tokens", 0)))
        elif kind is EventKind.NODE_FAILED and isinstance(data.get("budget"), dict):
            refused.append({**data["budget"], "node": event.node})
        elif kind is EventKind.MODEL_CALL:
            if "reservation" in data:
                open_.pop(data["reservation"], None)
            charged = data.get("charged")
            if isinstance(charged, dict):  # failed with no answer: kept at its bound
                used = Amount(charged.get("usd", 0.0), charged.get("tokens", 0))
                settled = settled + used
                if event.node is not None:
                    nodes[event.node] = nodes.get(event.node, ZERO) + used
                continue
            if "error" in data or data.get("cache_hit") or "reused" in data or \
                    "input_tokens" not in data:
                continue
            used = Amount(data.get("cost") or 0.0,
                          data["input_tokens"] + data["output_tokens"])
            settled = settled + used
            if event.node is not None:
                nodes[event.node] = nodes.get(event.node, ZERO) + used
    unsettled = ZERO
    for node, amount in open_.values():
        unsettled = unsettled + amount
        if node is not None:
            nodes[node] = nodes.get(node, ZERO) + amount
    return settled, unsettled, nodes, refused, budget


def spent_in_log(events: Iterable[Event]) -> tuple[Amount, dict[str, Amount]]:
    """What a run's log says was spent, in all and per node: every settled model call's
    usage, plus every reservation no ``model_call`` settled (the process died while the
    call was in flight: it may have been paid for) at its bound."""
    settled, unsettled, nodes, _, _ = _tally(events)
    return settled + unsettled, nodes


@dataclass(frozen=True, kw_only=True, slots=True)
class Account:
    """A run's budget as its log tells it (for ``counterpoint show`` and the summary)."""

    budget: Budget | None
    spent: Amount
    """Settled calls' usage."""
    reserved: Amount
    """Reservations no call settled: calls in flight, or lost to a crash (a resume counts
    them as spent)."""
    refused: tuple[dict[str, Any], ...] = ()
    """Each refused call: ``node``, ``unit``, ``cap``, ``spent``, ``needed``, ``budget``."""

    def line(self) -> str:
        """``$0.4800 of $0.50 spent, $0.0000 reserved, $0.0200 left; 2 calls refused``."""
        cap = self.budget or Budget()
        parts = []
        if cap.usd is not None or self.spent.usd:
            used = self.spent.usd
            text = f"${used:.4f}" + (f" of ${cap.usd:g}" if cap.usd is not None else "")
            text += f" spent, ${self.reserved.usd:.4f} reserved"
            if cap.usd is not None:
                text += f", ${max(0.0, cap.usd - used - self.reserved.usd):.4f} left"
            parts.append(text)
        if cap.tokens is not None or self.spent.tokens:
            text = f"{self.spent.tokens:,}" + (
                f" of {cap.tokens:,}" if cap.tokens is not None else "")
            text += f" tokens spent, {self.reserved.tokens:,} reserved"
            if cap.tokens is not None:
                text += f", {max(0, cap.tokens - self.spent.tokens - self.reserved.tokens):,}" \
                        " left"
            parts.append(text)
        line = "; ".join(parts) or "nothing spent"
        if self.refused:
            line += f"; {len(self.refused)} call(s) refused"
        return line

    def exhausted(self) -> str | None:
        """Why the run ended short of its budget, if calls were refused: ``budget
        exhausted: $0.48 of $0.50 spent, node 'n' needs >= $0.03`` (the last refusal)."""
        if not self.refused:
            return None
        last = self.refused[-1]
        node = f"node {last['node']!r}" if last.get("node") else "a call"
        if last.get("unit") == "tokens":
            return (f"budget exhausted: {int(last['spent']):,} of {int(last['cap']):,} tokens "
                    f"spent ({last['budget']}), {node} needs >= {int(last['needed']):,}")
        return (f"budget exhausted: ${last['spent']:.2f} of ${last['cap']:g} spent "
                f"({last['budget']}), {node} needs >= ${last['needed']:.2f}")


def account(events: Iterable[Event],
            sub_runs: Iterable[Iterable[Event]] = ()) -> Account | None:
    """The run's budget from its log and its sub-runs' (``sub_runs``: their logs, which
    spend from it); ``None`` when it had none and no call was refused."""
    settled, unsettled, _, refused, budget = _tally(events)
    for sub in sub_runs:
        more = _tally(sub)
        settled, unsettled, refused = settled + more[0], unsettled + more[1], refused + more[3]
    if budget is None and not refused:
        return None
    return Account(budget=budget, spent=settled, reserved=unsettled, refused=tuple(refused))
