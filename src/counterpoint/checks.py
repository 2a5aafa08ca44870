"""Checks of the numbers users give in options (``RunOptions``, ``Policy``), each a
:class:`~counterpoint.errors.UserError` that names the option and what it got."""

from __future__ import annotations

from typing import Any

from .errors import UserError


def whole(value: Any, name: str, *, least: int) -> None:
    """Refuse ``value`` unless it is an ``int`` (not a ``bool``) of at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{name} must be a whole number >= {least}, got {value!r} "
                        f"({type(value).__name__})")
    if value < least:
        raise UserError(f"{name} must be >= {least}, got {value}")


def seconds(value: Any, name: str) -> None:
    """Refuse ``value`` unless it is a number of seconds above 0 (not a ``bool``)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise UserError(f"{name} must be > 0 seconds (a number), got {value!r}")
