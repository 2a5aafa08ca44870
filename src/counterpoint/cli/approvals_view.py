"""How approvals are shown: the table of ``counterpoint approvals`` and ``show``, and
their JSON form."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from ..events import Event, EventKind

if TYPE_CHECKING:
    from ..approval import Approval

STYLES = {"pending": "yellow", "approved": "green", "rejected": "red", "withdrawn": "dim"}


def approval_dict(approval: Approval) -> dict[str, Any]:
    """The JSON form of one approval."""
    answer = approval.answer
    return {
        "id": approval.id, "run_id": approval.run_id, "node": approval.node,
        "attempt": approval.attempt, "kind": approval.kind, "question": approval.question,
        "payload": approval.payload, "digest": approval.digest, "status": approval.status,
        "requested_at": approval.requested_at, "deadline": approval.deadline,
        "assignee": approval.assignee, "delivered": approval.delivered,
        "answer": None if answer is None else {
            "approved": answer.approved, "by": answer.by, "reason": answer.reason,
            "edit": answer.edit, "timed_out": answer.timed_out,
            "at": approval.answered_at}}


def approvals_table(approvals: list[Approval], *, with_run: bool = True) -> Table:
    """One row per approval: id, (run,) node, status, question and payload, answer."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("approval")
    if with_run:
        table.add_column("run")
    table.add_column("node")
    table.add_column("status")
    table.add_column("asks")
    table.add_column("answer / due")
    now = time.time()
    for approval in approvals:
        asks = approval.question
        if approval.payload is not None:
            asks += " " + _clip(json.dumps(approval.payload, default=str, ensure_ascii=False))
        row: list[str | Text] = [approval.id, *([approval.run_id] if with_run else []),
                                 str(approval.node),
                                 Text(approval.status, style=STYLES.get(approval.status, "")),
                                 asks, _answer_text(approval, now)]
        table.add_row(*row)
    return table


def approval_line(event: Event) -> str:
    """One line of the live view for an approval event."""
    data = event.data or {}
    aid = data.get("id")
    if event.kind is EventKind.APPROVAL_REQUESTED:
        return (f"{event.node} waits for approval {aid}: {data.get('question')} (answer with "
                f"`counterpoint approve {aid}` or `counterpoint reject {aid} --reason ...`)")
    if event.kind is EventKind.APPROVAL_ANSWERED:
        verdict = "approved" if data.get("approved") else "rejected"
        by = f" by {data['by']}" if data.get("by") else ""
        why = f": {data['reason']}" if data.get("reason") else ""
        return f"{event.node}: approval {aid} {verdict}{by}{why}"
    if event.kind is EventKind.APPROVAL_ESCALATED:
        return f"{event.node}: approval {aid} escalated to {data.get('to')}"
    return f"{event.node}: approval {aid} withdrawn (the attempt ended)"


def _answer_text(approval: Approval, now: float) -> str:
    answer = approval.answer
    if answer is None:
        parts = []
        if approval.assignee:
            parts.append(f"escalated to {approval.assignee}")
        if approval.deadline is not None:
            left = approval.deadline - now
            parts.append(f"times out in {left:.0f}s" if left > 0 else "timed out, not applied")
        return ", ".join(parts)
    text = ("approved" if answer.approved else "rejected") + (f" by {answer.by}"
                                                               if answer.by else "")
    if answer.reason:
        text += f": {answer.reason}"
    if answer.edit is not None:
        text += " (edited)"
    if not approval.delivered:
        text += " (the run takes it when it resumes)"
    return text


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
