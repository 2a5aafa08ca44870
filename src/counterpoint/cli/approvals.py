"""``counterpoint approvals``, ``approve`` and ``reject``: answer what runs wait for.

``approve``/``reject`` record the answer in the store (the first answer to an approval
wins; a second one is an error). A run whose process is alive takes it from there; a run
whose process ended (it crashed, or detached while waiting) is resumed in the foreground
with the usual live view, unless ``--no-resume``. Exit codes: 0 answered (and the resumed
run succeeded), 1 the resumed run failed, 2 misuse (unknown id, answered already, bad
``--edit`` JSON), 3 the resumed run is waiting for other approvals again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..exits import WAITING
from ..texts import some
from .args import Db
from .console import fail, make_console, reported
from .stores import open_existing

if TYPE_CHECKING:
    from rich.console import Console

    from ..approval import Answer
    from ..results import RunResult
    from ..store import RunStore

WAITING_EXIT = WAITING
"""Exit code of a run that ended its process to wait for approvals
(:data:`counterpoint.exits.WAITING`)."""

APPROVALS_HELP = "List approvals: pending ones of every unfinished run, or all of RUN."
APPROVE_HELP = "Approve an approval (a tool call: --edit replaces its arguments)."
REJECT_HELP = "Reject an approval, saying why (--reason)."

By = Annotated[str | None, typer.Option("--by", metavar="NAME", help="Who answers.")]
NoResume = Annotated[bool, typer.Option(
    "--no-resume", help="Only record the answer; do not resume a run whose process ended.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No live view of a resumed run.")]
Id = Annotated[str, typer.Argument(metavar="ID", help="The approval (see `approvals`).")]


def approvals_command(
    run_id: Annotated[str | None, typer.Argument(
        metavar="[RUN]", help="Only this run's approvals (answered ones too).")] = None,
    db: Db = None,
    show_all: Annotated[bool, typer.Option(
        "--all", help="Answered and withdrawn approvals too.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print them as JSON.")] = False,
) -> None:
    from ..answering import approvals
    from ..store import default_location
    from .approvals_view import approval_dict, approvals_table
    from .stores import missing_file
    location = db or default_location()
    with reported():
        if run_id is None and missing_file(location):  # nothing ran yet: as `runs` says
            if as_json:
                typer.echo("[]")
            else:
                which = "approvals" if show_all else "pending approvals"
                make_console().print(f"no {which}: there is no store at {location}",
                                     soft_wrap=True)
            return
        store = open_existing(db, run_id)
        try:
            if run_id is not None:  # `last` or a start of an id, as `show` takes
                from .recorded import resolve_run
                run_id = resolve_run(store, run_id)  # an unknown run is an error
            found = approvals(store, run_id)
        finally:
            store.close()
    if not show_all and run_id is None:
        found = [a for a in found if a.status == "pending"]
    if as_json:
        from .jsontext import dumps  # strict JSON, secrets masked
        typer.echo(dumps([approval_dict(a) for a in found]))
        return
    out = make_console()
    if not found:
        out.print("no pending approvals" if run_id is None and not show_all
                  else "no approvals", soft_wrap=True)
        return
    out.print(approvals_table(found, with_run=run_id is None), soft_wrap=True)


def approve_command(
    approval_id: Id,
    db: Db = None,
    edit: Annotated[Path | None, typer.Option(
        "--edit", metavar="ARGS.json",
        help="A JSON file with the arguments to call the tool with instead.")] = None,
    by: By = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Why (optional).")] = None,
    no_resume: NoResume = False,
    quiet: Quiet = False,
) -> None:
    from ..approval import Answer
    with reported():
        edited = _read_edit(edit) if edit is not None else None
        code = _answer(db, approval_id, Answer(approved=True, by=by, reason=reason,
                                               edit=edited),
                       resume=not no_resume, quiet=quiet)
    raise typer.Exit(code)


def reject_command(
    approval_id: Id,
    reason: Annotated[str, typer.Option("--reason", help="Why: the step (or the model, for "
                                                         "a tool call) is told.")],
    db: Db = None,
    by: By = None,
    no_resume: NoResume = False,
    quiet: Quiet = False,
) -> None:
    from ..approval import Answer
    if not reason.strip():  # the step (or the model) would be told nothing
        fail(f"reject {approval_id}: --reason is empty; say why, e.g. --reason "
             "'wrong target' (the step, or the model for a tool call, is told it)")
    with reported():
        code = _answer(db, approval_id, Answer(approved=False, by=by, reason=reason.strip()),
                       resume=not no_resume, quiet=quiet)
    raise typer.Exit(code)


def _answer(db: str | None, approval_id: str, given: Answer, *, resume: bool,
            quiet: bool) -> int:
    from ..answering import answer
    from ..store.owners import run_owner_alive, tree_root
    from .stores import open_for_writing
    out = make_console()
    store = open_for_writing(db)  # the answer is recorded first: refused before it
    try:
        approval_id = _approval_id(store, approval_id)
        answered = answer(store, approval_id, given)
        verb = "approved" if given.approved else "rejected"
        record = tree_root(store, store.run(answered.run_id))  # (goes on with its tree)
        where = f"run {answered.run_id}, node {answered.node!r}"
        if run_owner_alive(record):
            out.print(f"{verb} {approval_id} ({where}); process {record.owner_pid} "
                      "continues the run", soft_wrap=True)
            return 0
        if not resume:
            out.print(f"{verb} {approval_id} ({where}); the run continues when it is resumed "
                      f"(`counterpoint resume {record.run_id}`)", soft_wrap=True)
            return 0
        out.print(f"{verb} {approval_id} ({where}); resuming run {record.run_id}",
                  soft_wrap=True)
        return _resume(store, record.run_id, out, quiet=quiet, db=db)
    finally:
        store.close()


def _resume(store: RunStore, run_id: str, out: Console, *, quiet: bool,
            db: str | None) -> int:
    import asyncio

    from .. import api, loop
    from ..errors import RunClaimed
    from .live import Display, LineDisplay, LiveView, follow
    from .signals import interrupted, stop_on_sigterm
    display = Display() if quiet else LiveView(out) if out.is_terminal else LineDisplay(out)
    stopped: list[int] = []

    async def resume_and_follow() -> RunResult:
        stop_on_sigterm(stopped)
        handle = await api.start_resume(run_id, store=store)
        return await follow(handle, display)

    try:
        result = loop.run(resume_and_follow())
    except KeyboardInterrupt:  # the answer is recorded: a resume goes on from it
        return interrupted(run_id, db)
    except asyncio.CancelledError:
        if not stopped:
            raise
        return interrupted(run_id, db, terminated=True)
    except RunClaimed:  # another process took it over meanwhile: it takes the answer too
        out.print(f"run {run_id} was resumed by another process, which continues it",
                  soft_wrap=True)
        return 0
    return finished(result, out, store)


def finished(result: RunResult, out: Console, store: RunStore) -> int:
    """Print how an execution ended; its exit code (:data:`WAITING_EXIT` while waiting)."""
    from ..state import RunStatus
    if result.status is RunStatus.RUNNING:
        return waiting(result.run_id, list(result.state.asking), out, store)
    out.print(f"run {result.run_id} {result.status.value}", soft_wrap=True)
    return 0 if result.status is RunStatus.SUCCEEDED else 1


def waiting(run_id: str, nodes: list[Any], out: Console, store: RunStore, *,
            as_json: bool = False) -> int:
    """Say that ``run_id`` waits for approvals of ``nodes`` (none: its sub-runs' nodes,
    found in ``store``); :data:`WAITING_EXIT`. With ``as_json``, stdout gets
    ``{"run_id", "status": "waiting", "approvals": [...]}`` (the pending ones, of the run
    and its sub-runs) and the sentence goes to stderr."""
    where = f"nodes {sorted(map(str, nodes))}" if nodes else _asked_below(store, run_id)
    said = make_console(stderr=True) if as_json else out
    said.print(f"run {run_id} is waiting for approvals ({where}); "
               f"list them with `counterpoint approvals {run_id}`, answer with "
               "`counterpoint approve ID` or `counterpoint reject ID --reason ...`",
               soft_wrap=True)
    if as_json:
        from ..answering import approvals
        from ..approval import PENDING
        from ..ids import RunId
        from .approvals_view import approval_dict
        from .render import dumps
        runs = [run_id, *(sub.run_id for sub in store.sub_runs(RunId(run_id)))]
        typer.echo(dumps({"run_id": run_id, "status": "waiting", "approvals": [
            approval_dict(a) for run in runs for a in approvals(store, run)
            if a.status == PENDING]}))
    return WAITING_EXIT


def _asked_below(store: RunStore, run_id: str) -> str:
    """Which nodes of ``run_id``'s sub-runs wait for approvals, per the store."""
    from ..answering import approvals
    from ..approval import PENDING
    from ..ids import RunId
    asked = sorted({f"{a.node!r} of sub-run {a.run_id}" for sub in store.sub_runs(RunId(run_id))
                    for a in approvals(store, sub.run_id) if a.status == PENDING})
    return f"node {some(asked)}" if len(asked) == 1 else \
        f"nodes {some(asked)}" if asked else "asked in its sub-runs"


def _approval_id(store: RunStore, given: str) -> str:
    """The approval ``given`` means: its whole id, or a unique start of the id of one of
    an unfinished run (as `approvals` lists them); else ``given`` (answering then says
    what is wrong with it)."""
    from ..answering import approvals
    given = given.strip()
    if len(given) <= len("ap-"):
        return given
    known = {a.id for a in approvals(store)}
    if given in known:
        return given
    starting = sorted(aid for aid in known if aid.startswith(given))
    if len(starting) == 1:
        return starting[0]
    if len(starting) > 1:
        fail(f"approval {given!r} is ambiguous: it starts {len(starting)} approvals "
             f"({some(starting)}); give more of the id")
    return given


def _read_edit(path: Path) -> Any:
    try:
        text = path.read_text()
    except OSError as exc:
        fail(f"--edit {path}: cannot be read ({exc.strerror or exc}); give a JSON file")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}; --edit takes a "
             "JSON object of the tool's arguments")
    if not isinstance(value, dict):
        fail(f"{path}:1: --edit takes a JSON object of the tool's arguments, not "
             f"{type(value).__name__}")
    return value


