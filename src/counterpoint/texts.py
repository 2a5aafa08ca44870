"""Wording that messages share: a few names out of many."""

from __future__ import annotations

from collections.abc import Sequence


def some(names: Sequence[str], limit: int = 5) -> str:
    """The first ``limit`` of ``names``, joined by commas, then ``and N more`` for the
    rest (``a, b, c and 4 more``)."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
