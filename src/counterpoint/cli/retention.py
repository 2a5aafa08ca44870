"""``counterpoint delete`` and ``counterpoint prune``: removing runs a store no longer needs
(:mod:`counterpoint.store.deletion` holds the rules)."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import UserError
from ..texts import some
from .args import Db
from .console import make_console, reported
from .stores import open_existing, open_for_writing

if TYPE_CHECKING:
    from ..store import Deletion, RunStore

DELETE_HELP = ("Delete runs (with their sub-runs) and the blobs nothing else refers to. "
               "A run still running in a live process is refused; cancel it first.")
PRUNE_HELP = ("Delete finished runs by age and count, e.g. `counterpoint prune --older-than "
              "30d --keep 100`. Nothing is deleted without --older-than or --keep; "
              "--dry-run lists what would go.")
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_STATUSES = ("succeeded", "failed", "cancelled", "timed_out", "interrupted")


def parse_age(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``12h``, ``7d`` or ``2w`` in seconds (0 or more)."""
    found = _AGE.match(text.lower())
    if found is None:
        raise typer.BadParameter(f"{text!r} is not an age; write a number of seconds or one "
                                 "with a unit: 90s, 30m, 12h, 7d, 2w",
                                 param_hint="'--older-than'")
    return float(found.group(1)) * _UNIT_SECONDS[found.group(2)]


Vacuum = Annotated[bool, typer.Option(
    "--vacuum", help="Then give the freed space back to the file system (SQLite: VACUUM; "
                     "waits for other writers, and rewrites the whole file).")]


def delete_command(
    run_ids: Annotated[list[str], typer.Argument(
        metavar="RUN_ID...", help="The runs: ids, unique starts of ids, or last.")],
    db: Db = None,
    vacuum: Vacuum = False,
) -> None:
    """Delete runs (see DELETE_HELP)."""
    from .recorded import resolve_run
    out = make_console()
    with reported():
        store = open_for_writing(db, run_ids[0])
        try:
            ids = [resolve_run(store, name) for name in run_ids]
            done = store.delete_runs(ids)
            size = _size_line(store, vacuum)
        finally:
            store.close()
    out.print(_deleted_line(done) + size, soft_wrap=True)


def prune_command(
    db: Db = None,
    older_than: Annotated[str | None, typer.Option(
        "--older-than", metavar="AGE",
        help="Delete runs that ended more than AGE ago: 90s, 30m, 12h, 7d, 2w.")] = None,
    keep: Annotated[int | None, typer.Option(
        "--keep", metavar="N", min=0,
        help="Spare the N newest of the runs that match (by when they started).")] = None,
    status: Annotated[list[str] | None, typer.Option(
        "--status", metavar="STATUS",
        help="Only runs with this status (repeatable): succeeded, failed, cancelled, "
             "timed_out, or interrupted (its process died). Default: the four that ended.")
    ] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List what would be deleted; delete nothing.")] = False,
    vacuum: Vacuum = False,
) -> None:
    """Delete finished runs by age and count (see PRUNE_HELP)."""
    from ..store import prune
    from ..store.deletion import FINISHED
    out = make_console()
    with reported():
        if older_than is None and keep is None:
            raise UserError("say which runs to delete: --older-than AGE (e.g. 30d), --keep N "
                            "(spare the N newest), or both; add --dry-run to see them first")
        age = None if older_than is None else parse_age(older_than)
        wanted = list(dict.fromkeys(status or FINISHED))
        unknown = [s for s in wanted if s not in _STATUSES]
        if unknown:
            raise typer.BadParameter(f"unknown status {', '.join(map(repr, unknown))}; use "
                                     f"{', '.join(_STATUSES)}", param_hint="'--status'")
        statuses = ["running" if s == "interrupted" else s for s in wanted]
        store = open_existing(db) if dry_run else open_for_writing(db)
        try:
            done = prune(store, older_than=age, keep=keep or 0, statuses=statuses,
                         dry_run=dry_run)
            size = "" if dry_run else _size_line(store, vacuum and bool(done.runs))
        finally:
            store.close()
    if dry_run:
        out.print(f"would delete {len(done.runs)} run(s)" + "".join(
            f"\n  {run}" for run in done.runs) + "\n(dry run: nothing was deleted)",
            soft_wrap=True)
        return
    out.print(_deleted_line(done) + size, soft_wrap=True)


def _deleted_line(done: Deletion) -> str:
    if not done.runs:
        return "no runs matched: nothing was deleted"
    return (f"deleted {len(done.runs)} run(s) ({some(done.runs)}): {done.events} event(s), "
            f"{done.blobs} blob(s) nothing else referred to")


def _size_line(store: RunStore, vacuum: bool) -> str:
    """For a SQLite file: its size now (after ``VACUUM`` if ``vacuum``), and what happens
    to the freed space."""
    path = Path(store.location)
    if not path.is_file():
        return ""
    before = path.stat().st_size
    if not vacuum:
        return (f"\n{path}: {before / 1e6:.1f} MB; new runs reuse the freed pages (--vacuum "
                "gives them back to the file system)")
    import sqlite3
    store.close()  # its reader would keep the old pages
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as conn:
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error as exc:
        raise UserError(f"store {path}: the runs were deleted, but VACUUM failed: {exc}; run "
                        "it again with --vacuum when no other process writes to the store"
                        ) from exc
    return f"\n{path}: {before / 1e6:.1f} MB -> {path.stat().st_size / 1e6:.1f} MB (vacuumed)"
