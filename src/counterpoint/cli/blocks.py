"""Blocks of a run's summary that tell what the run produced: its output, and a goal
run's story (goal, rounds) and answer, clipped to a screenful."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rich.text import Text

from ..secrets import redact

OUTPUT_LINES = 24
"""The summary shows at most this many lines of the graph's output."""
OUTPUT_CHARS = 4_000
"""... and at most this many characters of it (one long value is one JSON line)."""


def _clip(text: str) -> str:
    lines = text.splitlines()
    shown = "\n".join(lines[:OUTPUT_LINES])
    notes = []
    if len(shown) > OUTPUT_CHARS:
        notes.append(f"{len(shown) - OUTPUT_CHARS:,} more characters")
        shown = shown[:OUTPUT_CHARS]
    if len(lines) > OUTPUT_LINES:
        notes.append(f"{len(lines) - OUTPUT_LINES} more lines")
    return shown if not notes else f"{shown}\n... ({'; '.join(notes)}; see --json)"


def output_lines(output: Any) -> list[Text]:
    """The ``output`` block: the graph's output as JSON, clipped (nothing when empty)."""
    if output in (None, {}, []):
        return []
    return [Text(), Text("output", style="bold"), Text(_clip(redact(json.dumps(
        output, indent=2, ensure_ascii=False, default=str))))]


def answer_lines(story: Mapping[str, Any]) -> list[Text]:
    """The ``answer`` block of a goal run: the answer's text, clipped, and what it cites."""
    answer = story.get("answer")
    if not answer:
        return []
    lines = [Text(), Text("answer", style="bold"), Text(_clip(redact(answer["text"])))]
    if answer.get("cited"):
        lines.append(Text(f"cites {', '.join(answer['cited'])}", style="dim"))
    return lines


def goal_lines(story: Mapping[str, Any]) -> list[Text]:
    """A goal run's goal and its rounds, one line each (plan, verify, re-plan, check)."""
    lines = [Text.assemble(("goal      ", "bold"), redact(str(story.get("goal") or "?")))]
    rounds = story.get("rounds") or []
    plans = sum(r.get("phase") == "plan" for r in rounds)
    replans = story.get("replans", 0)
    lines.append(Text(f"rounds    {plans} plan, {story.get('verify_rounds', 0)} verify, "
                      f"{replans} re-plan{'s' if replans != 1 else ''}", style="dim"))
    for entry in rounds:
        style = {"complete": "green", "gaps": "yellow"}.get(entry.get("verdict", ""), "")
        lines.append(Text.assemble("  ", (redact(str(entry.get("summary", ""))), style),
                                   (f"  [{entry['node']}]" if entry.get("node") else "",
                                    "dim")))
    if not story.get("answer"):
        lines.append(Text("  no answer yet" if rounds else "  not planned yet", style="dim"))
    return lines
