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

The package: :mod:`.ledger` (budgets, amounts, the ledger tree), :mod:`.context`
(the calling task's ledger), :mod:`.log` (the tally of a run's log), :mod:`.durations`
(deadlines as seconds).
"""

from __future__ import annotations

from .context import affordable, current_ledger, remaining, spending, use_ledger
from .durations import parse_seconds
from .ledger import ZERO, Amount, Budget, Ledger, Remaining, Reservation
from .log import Account, account, spent_in_log

__all__ = ["ZERO", "Account", "Amount", "Budget", "Ledger", "Remaining", "Reservation",
           "account", "affordable", "current_ledger", "parse_seconds", "remaining",
           "spending", "spent_in_log", "use_ledger"]
