"""Fitting dependency results into a model's context window, visibly.

A subtask sees the results of the subtasks it needs. When they do not fit the
budget, the longest ones are shortened at a paragraph or sentence boundary and
each cut is marked with what was left out, so neither the model nor the person
reading the log is misled by text that silently stops mid-way.
"""

from __future__ import annotations

from collections.abc import Mapping

MARK = "[... {n} more characters of {name} left out to fit the context window ...]"


def fit(parts: Mapping[str, str], budget: int) -> dict[str, str]:
    """``parts`` shortened so their total length is at most about ``budget`` characters.

    Short parts are kept whole; the budget left is shared among the long ones.
    Every shortened part ends with a marker saying how much was left out.
    """
    total = sum(len(v) for v in parts.values())
    if total <= budget or not parts:
        return dict(parts)
    out: dict[str, str] = {}
    remaining = budget
    ordered = sorted(parts.items(), key=lambda kv: len(kv[1]))
    for index, (name, text) in enumerate(ordered):
        share = remaining // (len(ordered) - index)
        if len(text) <= share:
            out[name] = text
            remaining -= len(text)
            continue
        cut = _boundary(text, max(0, share - 90))
        shortened = text[:cut].rstrip() + "\n" + MARK.format(n=len(text) - cut, name=name)
        out[name] = shortened if len(shortened) < len(text) else text  # the mark is longer
        remaining -= len(out[name])
    return {name: out[name] for name in parts}


def _boundary(text: str, limit: int) -> int:
    """The last paragraph, else sentence, else word boundary at or before ``limit``.

    Only a single word longer than ``limit`` is cut inside itself.
    """
    if limit <= 0:
        return 0
    window = text[:limit + 1]  # a space just after the limit ends the window's last word
    for sep in ("\n\n", "\n", ". ", "; ", " "):
        at = window.rfind(sep, 0, limit + (sep == " "))
        if at > limit // 2:
            return at + len(sep.rstrip(" ")) if sep.strip() else at
    # no boundary in the second half: any earlier word end beats cutting a word
    at = max(window.rfind(" "), window.rfind("\n"))
    return at if at > 0 else limit
