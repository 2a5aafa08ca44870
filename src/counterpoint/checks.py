"""Checks of the numbers users give in options (``RunOptions``, ``Policy``, an ``Agent``,
breaker settings, a model's configuration), each a
:class:`~counterpoint.errors.UserError` that names the option and what it got.

Every one refuses a ``bool`` (``True`` is an ``int`` to Python, never a count or a
number of seconds to a user), NaN and infinity the same way, with the same wording.
``fix``, where given, ends the message with what to write instead (``leave usd unset
for no limit``): an option whose ``None`` means "no limit" says so, since infinity is
the first thing a user tries for it.
"""

from __future__ import annotations

import math
from typing import Any

from .errors import UserError


def _then(fix: str | None) -> str:
    return f"; {fix}" if fix else ""


def whole(value: Any, name: str, *, least: int, fix: str | None = None) -> None:
    """Refuse ``value`` unless it is an ``int`` (not a ``bool``) of at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{name} must be a whole number >= {least}, got {value!r} "
                        f"({type(value).__name__}){_then(fix)}")
    if value < least:
        raise UserError(f"{name} must be >= {least}, got {value}{_then(fix)}")


def seconds(value: Any, name: str, *, fix: str | None = None) -> None:
    """Refuse ``value`` unless it is a finite number of seconds above 0 (not a ``bool``)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or \
            value == math.inf:
        raise UserError(f"{name} must be > 0 seconds (a number), got {value!r}{_then(fix)}")


def number(value: Any, name: str, *, least: float = 0.0, above: bool = False,
           most: float | None = None, fix: str | None = None) -> None:
    """Refuse ``value`` unless it is a finite ``int`` or ``float`` (not a ``bool``) of at
    least ``least`` (more than it, with ``above``) and at most ``most``."""
    low = f"> {least:g}" if above else f">= {least:g}"
    bound = low if most is None else \
        f"in {'(' if above else '['}{least:g}, {most:g}]"
    fits = not isinstance(value, bool) and isinstance(value, int | float) and \
        math.isfinite(value) and (value > least if above else value >= least) and \
        (most is None or value <= most)
    if not fits:
        raise UserError(f"{name} must be a finite number {bound}, got {value!r}{_then(fix)}")


def flag(value: Any, name: str) -> None:
    """Refuse ``value`` unless it is ``True`` or ``False`` (``1``, ``"yes"`` and ``None``
    are not read as either)."""
    if not isinstance(value, bool):
        raise UserError(f"{name} must be True or False, got {value!r} "
                        f"({type(value).__name__})")
