"""Planning rounds (``plan_round`` events) as lines of text: the terminal prints them and
the web view shows them, with a plan's re-plans as a diff of these lines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["plan_tree", "round_lines"]


def round_lines(data: Mapping[str, Any]) -> list[str]:
    """A planning round (a ``plan_round`` event) as lines for the terminal."""
    phase = data.get("phase")
    if phase == "plan":
        problems = data.get("problems") or []
        if problems:
            return [f"plan attempt {data.get('attempt')}: {len(problems)} problem(s), asking "
                    f"again: {'; '.join(problems)[:200]}"]
        head = "plan (repaired: " + "; ".join(data.get("repairs") or []) + ")" \
            if data.get("repairs") else "plan"
        return [head + ":", *plan_tree(data.get("plan") or {})]
    if phase == "verify":
        gaps = data.get("gaps") or []
        head = f"verify round {data.get('round')}: " + (
            "complete" if data.get("complete") and not gaps else
            f"{len(gaps)} gap(s)" if gaps else "incomplete, no gap named")
        lines = [head] + [f"  - {g.get('problem', '')}"[:160] for g in gaps]
        if data.get("stop"):
            lines.append(f"  stopping: {data['stop']}")
        return lines
    if phase in ("check", "recheck"):
        subject = f"check {data.get('subtask')}" + (" again" if phase == "recheck" else "")
        if phase == "check" and data.get("redone"):
            return [f"{subject}: redone with the verifier's feedback"]
        gaps = data.get("gaps") or []
        if not gaps:
            return [f"{subject}: passed"]
        return [f"{subject}: " + "; ".join(gaps)[:160]
                + (" (re-planning now)" if phase == "recheck" else "")]
    if phase == "replan":
        midrun = data.get("midrun")
        head = (f"re-plan after the check of {data.get('after')} (round {data.get('round')})"
                if midrun else f"re-plan round {data.get('round')}")
        if midrun and data.get("stop"):
            return [f"{head}: not asked, stopping: {data['stop']}"]
        if not data.get("applied"):
            return [f"{head}: no valid edit (" + "; ".join(data.get("problems") or [])[:160]
                    + ("); the plan runs on" if midrun else "); answering now")]
        line = f"{head}: added {data.get('added') or []}, redoing {data.get('redone') or []}"
        if data.get("cancelled"):
            line += f", cancelled {data['cancelled']} (left out of the answer"
            line += (f"; stopped {data['interrupted']} before they finished)"
                     if data.get("interrupted") else ")")
        return [line]
    return []


def plan_tree(plan: Mapping[str, Any]) -> list[str]:
    """A plan's subtasks as an indented tree (a subtask sits under what it needs)."""
    subtasks = list(plan.get("subtasks") or [])
    depth: dict[str, int] = {}
    lines: list[str] = []
    pending = subtasks
    while pending:
        placed = [s for s in pending if all(d in depth for d in s.get("needs", []))]
        if not placed:
            placed = pending
        for s in placed:
            depth[s["id"]] = 1 + max((depth.get(d, 0) for d in s.get("needs", [])), default=0)
            needs = f"  (needs {', '.join(s['needs'])})" if s.get("needs") else ""
            lines.append(f"{'  ' * depth[s['id']]}{s['id']} [{s.get('worker', '?')}] "
                         f"{s.get('task', '')}{needs}")
        ids = {s["id"] for s in placed}
        pending = [s for s in pending if s["id"] not in ids]
    return lines
