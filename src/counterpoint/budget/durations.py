"""Deadlines written ``30``, ``30s``, ``2.5m`` or ``1h``, in seconds."""

from __future__ import annotations

from ..errors import UserError

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_seconds(text: str | float | int, *, where: str) -> float:
    """``30``, ``30s``, ``2.5m`` or ``1h`` in seconds (> 0), else a UserError naming ``where``."""
    if isinstance(text, bool):
        raise UserError(f"{where}: a deadline must be seconds (30, 30s, 2m, 1h), got {text!r}")
    if isinstance(text, int | float):
        value = float(text)
    else:
        raw = text.strip().lower()
        unit = raw[-1:] if raw[-1:] in ("s", "m", "h") else ""
        try:
            value = float(raw[:-1] if unit else raw) * _UNITS[unit]
        except ValueError:
            raise UserError(f"{where}: a deadline must be seconds (30, 30s, 2m, 1h), got "
                            f"{text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise UserError(f"{where}: a deadline must be > 0 seconds, got {text!r}")
    return value
