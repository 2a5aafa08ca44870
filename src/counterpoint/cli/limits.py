"""``run --limit NAME=N``: reading the flags, each mistake named as the user typed it."""

from __future__ import annotations

import typer

FORM = "NAME=N, e.g. --limit openai=4"


def parse_limits(values: list[str]) -> dict[str, int]:
    """``NAME=N`` options as a dict; a malformed one, or N below 1, is a usage error
    naming the flag as written."""
    limits: dict[str, int] = {}
    for value in values:
        name, sep, number = value.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"{value!r}: expected {FORM}", param_hint="'--limit'")
        name = name.strip()
        try:
            units = int(number)
        except ValueError:
            raise typer.BadParameter(f"{value!r}: N must be a whole number, e.g. "
                                     f"--limit {name}=4", param_hint="'--limit'") from None
        if units < 1:
            raise typer.BadParameter(
                f"{value!r}: N must be a whole number >= 1, got {units} (a node holding "
                f"{name!r} could never start); e.g. --limit {name}=1, or leave the flag "
                "out for no limit", param_hint="'--limit'")
        limits[name] = units
    return limits
