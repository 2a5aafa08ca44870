"""The calling task's ledger, and what is left of it for code running now."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..approval import clock
from .ledger import _EPSILON, Amount, Budget, Ledger, Remaining

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
