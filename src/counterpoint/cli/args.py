"""The options and arguments several commands share (typed, with their help)."""

from __future__ import annotations

from typing import Annotated

import typer

Db = Annotated[str | None, typer.Option(
    "--db", metavar="PATH|URL",
    help="The run store: a SQLite file or a postgresql:// URL (default: "
         "$COUNTERPOINT_DB or .counterpoint/runs.db).")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No live view or progress lines.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]
RunName = Annotated[str, typer.Argument(
    metavar="RUN_ID", help="The run: its id, a unique start of it (or of its hex serial), "
                           "or last (the newest run).")]
