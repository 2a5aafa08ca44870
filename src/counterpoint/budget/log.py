"""The budget as a run's log tells it: what was spent, what a crash left reserved,
the refusals (the ledger is a projection of the log)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..events import Event, EventKind
from .ledger import ZERO, Amount, Budget


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
