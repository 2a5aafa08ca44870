"""The budget as a run's log tells it: what was spent, what a crash left reserved,
the refusals (the ledger is a projection of the log)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..events import Event, EventKind
from .ledger import ZERO, Amount, Budget


@dataclass(kw_only=True, slots=True)
class _Tally:
    settled: Amount = ZERO
    """Settled calls' usage, and (from a ``run_resumed`` on) the reservations the dead
    process left unsettled, at their bound."""
    unsettled: Amount = ZERO
    """Reservations no call settled since the last start: calls in flight, or lost to a
    crash no resume has counted yet."""
    crashed: Amount = ZERO
    """The part of ``settled`` that is reservations a crash left unsettled."""
    nodes: dict[str, Amount] = field(default_factory=dict)
    refused: list[dict[str, Any]] = field(default_factory=list)
    budget: Budget | None = None

    def add(self, node: str | None, used: Amount) -> None:
        self.settled = self.settled + used
        if node is not None:
            self.nodes[node] = self.nodes.get(node, ZERO) + used


def _tally(events: Iterable[Event]) -> _Tally:
    """Spend, settled and not, per node, the refusals (``node_failed`` of a
    :class:`BudgetExceeded`, with their node) and the run's budget, from a run's log.

    At ``run_resumed``, a reservation still open was left by a process that died: no
    live process will settle it, and the call may have been sent and charged, so it
    counts as spent at its bound from then on (a resume never spends that money again).
    """
    tally = _Tally()
    open_: dict[str, tuple[str | None, Amount]] = {}
    for event in events:
        data = event.data or {}
        kind = event.kind
        if kind is EventKind.RUN_CREATED:
            tally.budget = Budget.from_data((data.get("options") or {}).get("budget"))
        elif kind is EventKind.RUN_RESUMED:
            for node, amount in open_.values():
                tally.add(node, amount)
                tally.crashed = tally.crashed + amount
            open_.clear()
        elif kind is EventKind.BUDGET_RESERVED:
            open_[data["id"]] = (event.node, Amount(data.get("usd", 0.0),
                                                    data.get("tokens", 0)))
        elif kind is EventKind.NODE_FAILED and isinstance(data.get("budget"), dict):
            tally.refused.append({**data["budget"], "node": event.node})
        elif kind is EventKind.MODEL_CALL:
            if "reservation" in data:
                open_.pop(data["reservation"], None)
            charged = data.get("charged")
            if isinstance(charged, dict):  # failed with no answer: kept at its bound
                tally.add(event.node, Amount(charged.get("usd", 0.0),
                                             charged.get("tokens", 0)))
                continue
            if "error" in data or data.get("cache_hit") or "reused" in data or \
                    "input_tokens" not in data:
                continue
            tally.add(event.node, Amount(data.get("cost") or 0.0,
                                         data["input_tokens"] + data["output_tokens"]))
    for node, amount in open_.values():
        tally.unsettled = tally.unsettled + amount
        if node is not None:
            tally.nodes[node] = tally.nodes.get(node, ZERO) + amount
    return tally


def spent_in_log(events: Iterable[Event]) -> tuple[Amount, dict[str, Amount]]:
    """What a run's log says was spent, in all and per node: every settled model call's
    usage, plus every reservation no ``model_call`` settled (the process died while the
    call was in flight: it may have been paid for) at its bound."""
    tally = _tally(events)
    return tally.settled + tally.unsettled, tally.nodes


@dataclass(frozen=True, kw_only=True, slots=True)
class Account:
    """A run's budget as its log tells it (for ``counterpoint show`` and the summary)."""

    budget: Budget | None
    spent: Amount
    """Settled calls' usage, and the reservations a crash left unsettled once the run
    resumed (``crashed``)."""
    reserved: Amount
    """Reservations no call settled: calls in flight, or lost to a crash the run has not
    been resumed from yet (the resume counts them as spent)."""
    crashed: Amount = ZERO
    """The part of ``spent`` that is reservations a crashed process left unsettled,
    counted at their bound when the run resumed (those calls may have been charged)."""
    refused: tuple[dict[str, Any], ...] = ()
    """Each refused call: ``node``, ``unit``, ``cap``, ``spent``, ``needed``, ``budget``."""

    def line(self) -> str:
        """``$0.4800 of $0.50 spent, $0.0000 reserved, $0.0200 left; 2 calls refused``."""
        cap = self.budget or Budget()
        parts = []
        if cap.usd is not None or self.spent.usd:
            parts.append(_unit_line(self.spent.usd, cap.usd, self.crashed.usd,
                                    self.reserved.usd, lambda v: f"${v:.4f}",
                                    f"${cap.usd:g}" if cap.usd is not None else "", ""))
        if cap.tokens is not None or self.spent.tokens:
            parts.append(_unit_line(self.spent.tokens, cap.tokens, self.crashed.tokens,
                                    self.reserved.tokens, lambda v: f"{v:,}",
                                    f"{cap.tokens:,}" if cap.tokens is not None else "",
                                    " tokens"))
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
    tally = _tally(events)
    settled, unsettled, crashed, refused = (tally.settled, tally.unsettled, tally.crashed,
                                            list(tally.refused))
    for sub in sub_runs:
        more = _tally(sub)
        settled, unsettled = settled + more.settled, unsettled + more.unsettled
        crashed, refused = crashed + more.crashed, refused + more.refused
    if tally.budget is None and not refused:
        return None
    return Account(budget=tally.budget, spent=settled, reserved=unsettled, crashed=crashed,
                   refused=tuple(refused))


def _unit_line(spent: float, cap: float | None, crashed: float, reserved: float,
               amount: Callable[[float], str], limit: str, noun: str) -> str:
    """One unit's part of :meth:`Account.line`: ``$0.4800 of $0.50 spent, ...`` (money)
    or ``220 of 1,000 tokens spent, ...``; ``amount`` writes a quantity, ``limit`` the cap."""
    text = amount(spent) + (f" of {limit}" if cap is not None else "") + f"{noun} spent"
    if crashed:
        text += f" (of which {amount(crashed)} unsettled at the crash, counted at their bound)"
    text += f", {amount(reserved)} reserved"
    if cap is not None:
        text += f", {amount(max(cap - spent - reserved, 0))} left"
    return text
