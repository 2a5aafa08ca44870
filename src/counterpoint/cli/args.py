"""The options and arguments several commands share (typed, with their help)."""

from __future__ import annotations

from typing import Annotated

import typer


def _given_db(value: str | None) -> str | None:
    """Refuse a blank ``--db``: ``--db "$DB"`` with ``DB`` unset meant another store than
    the default, and ``--db " "`` made a store file named by a space."""
    if value is not None and not value.strip():
        raise typer.BadParameter(
            f"{value!r} is blank; give a store's path (e.g. ./runs.db) or a postgresql:// "
            "URL, or leave --db out for $COUNTERPOINT_DB or .counterpoint/runs.db")
    return value


Db = Annotated[str | None, typer.Option(
    "--db", metavar="PATH|URL", callback=_given_db,
    help="The run store: a SQLite file or a postgresql:// URL (default: "
         "$COUNTERPOINT_DB or .counterpoint/runs.db).")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No live view or progress lines.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]
RunName = Annotated[str, typer.Argument(
    metavar="RUN_ID", help="The run: its id, a unique start of it (or of its hex serial), "
                           "or last (the newest run).")]
