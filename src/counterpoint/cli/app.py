"""The ``counterpoint`` command: run, resume, inspect, list and cancel runs.

Exit codes: 0 the run (or the command) succeeded; 1 the run failed, timed out or
was cancelled; 2 the command was misused: a bad option, a graph that cannot be
loaded, an unknown run, an unusable store. Misuse is reported as one
``error: ...`` line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .. import __version__
from ..errors import RunNotFound, StoreError
from ..garbage import tune_gc
from ..ids import RunId
from . import goals
from .console import make_console, reported
from .fork import FORK_HELP, fork_command
from .models import ASK_HELP, MODELS_HELP, ask_command, models_command

# Only what the commands' signatures name is imported here: `counterpoint --help` builds
# every command from its signature, so the library (scheduler, models, store, rich
# renderables) is imported inside the commands that use it. tests/cli/test_startup.py
# pins that.
if TYPE_CHECKING:
    from rich.console import Console

    from ..graph import Graph
    from ..options import RunOptions
    from ..results import RunResult
    from ..store import RunStore
    from .live import Display
    from .render import Report

app = typer.Typer(
    name="counterpoint",
    help="Run task graphs with a durable event log; inspect, resume and cancel runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    # plain help: typer's rich help imports rich.markdown and markdown-it, half of what
    # `counterpoint --help` cost (0.40 s -> 0.21 s); the commands' output stays rich
    rich_markup_mode=None,
)

CANCEL_POLL_SECONDS = 0.1

Db = Annotated[str | None, typer.Option(
    "--db", metavar="PATH",
    help="The run store (default: $COUNTERPOINT_DB or .counterpoint/runs.db).")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No live view or progress lines.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]


app.command("models", help=MODELS_HELP)(models_command)
app.command("ask", help=ASK_HELP)(ask_command)
app.command("plan")(goals.plan_command)
app.command("fork", help=FORK_HELP)(fork_command)


def main() -> None:
    """Entry point of the ``counterpoint`` console script."""
    tune_gc()  # this process is ours: see counterpoint.garbage
    app(prog_name="counterpoint")


# ------------------------------------------------------------------ plumbing
def parse_limits(values: list[str]) -> dict[str, int]:
    """``NAME=N`` options as a dict; a malformed one is a usage error."""
    limits: dict[str, int] = {}
    for value in values:
        name, sep, number = value.partition("=")
        try:
            limits[_key(name, sep, value, "--limit", "NAME=N, e.g. --limit openai=4")] = \
                int(number)
        except ValueError:
            raise typer.BadParameter(f"{value!r}: N must be a whole number, e.g. "
                                     "--limit openai=4", param_hint="'--limit'") from None
    return limits


def parse_inputs(values: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` options as a dict; a value is JSON if it parses as JSON, else text."""
    inputs: dict[str, Any] = {}
    for value in values:
        key, sep, text = value.partition("=")
        try:
            parsed: Any = json.loads(text)
        except ValueError:
            parsed = text
        inputs[_key(key, sep, value, "--input", "KEY=VALUE, e.g. --input city=Paris")] = parsed
    return inputs


def _key(key: str, sep: str, value: str, option: str, form: str) -> str:
    if not sep or not key.strip():
        raise typer.BadParameter(f"{value!r}: expected {form}", param_hint=f"'{option}'")
    return key.strip()


def graph_attr(target: str) -> str | None:
    """The ``:GRAPH`` part of a target, as :func:`~counterpoint.loader.load_target` reads it."""
    from ..loader import split_target
    return split_target(target)[1]


def open_existing(db: str | None, run_id: str | None = None) -> RunStore:
    """The store at ``db``, which must exist already (reading never creates one)."""
    from ..store import default_location, open_store
    location = db or default_location()
    if location not in ("memory", ":memory:") and not Path(location).exists():
        if run_id is not None:
            raise RunNotFound(f"run {run_id} not found: there is no store at {location}; "
                              "pass --db PATH or set COUNTERPOINT_DB")
        raise StoreError(f"store {location} does not exist; pass --db PATH or set "
                         "COUNTERPOINT_DB")
    return open_store(location)


def show_hint(run_id: str, db: str | None) -> str:
    return f"counterpoint show {run_id}" + (f" --db {shlex.quote(db)}" if db else "")


def exit_code(status: str) -> int:
    from ..state import RunStatus
    return 0 if status == RunStatus.SUCCEEDED else 1


def _importable_cwd() -> None:
    # `python -m` puts the working directory on sys.path, the console script does not;
    # `counterpoint run package.module` should find local modules either way.
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def _display(console: Console, *, quiet: bool) -> Display:
    from .live import Display, LineDisplay, LiveView
    if quiet:
        return Display()
    return LiveView(console) if console.is_terminal else LineDisplay(console)


def _finish(report: Report, *, db: str | None, as_json: bool, out: Console) -> int:
    from .render import dumps, payload, summary
    if as_json:
        typer.echo(dumps(payload(report)))
    else:
        out.print(summary(report, inspect=show_hint(report.run_id, db)), soft_wrap=True)
    return exit_code(report.status)


def _result_report(result: RunResult, note: str | None = None) -> Report:
    from .render import Report
    reason = result.state.stop_reason
    if note is None and reason is not None:
        note = {"deadline": "stopped: the run's deadline passed; finished nodes kept "
                            "their outputs",
                "fail_fast": "stopped after the first failure (--fail-fast)",
                "cancelled": "cancelled while running"}.get(reason, reason)
    return Report(run_id=result.run_id, graph=result.graph, status=result.status.value,
                  state=result.state, metrics=result.metrics, note=note, output=result.output)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"counterpoint {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="Print the version and exit.")] = False) -> None:
    """Run task graphs with a durable event log; inspect, resume and cancel runs."""


# ------------------------------------------------------------------ run
@app.command()
def run(
    target: Annotated[str, typer.Argument(
        metavar="TARGET", help="FILE.py[:GRAPH] or package.module[:GRAPH] (GRAPH names a Graph "
                               "or a function returning one), a workflow FILE.yaml, or a "
                               "goal in quotes.")],
    db: Db = None,
    max_concurrency: Annotated[int | None, typer.Option(
        "--max-concurrency", metavar="N", min=1, help="Most nodes running at once.")] = None,
    limit: Annotated[list[str] | None, typer.Option(
        "--limit", metavar="NAME=N", help="A resource limit (repeatable).")] = None,
    fail_fast: Annotated[bool, typer.Option(
        "--fail-fast", help="Cancel everything once a node fails.")] = False,
    deadline: Annotated[float | None, typer.Option(
        "--deadline", metavar="SECONDS", help="Stop the run after this long.")] = None,
    inputs: Annotated[list[str] | None, typer.Option(
        "--input", metavar="KEY=VALUE",
        help="A graph input (repeatable); VALUE is JSON if it parses, else text.")] = None,
    quiet: Quiet = False,
    as_json: AsJson = False,
    model: goals.ModelOption = None,
    planner_model: goals.PlannerModel = None,
    worker_model: goals.WorkerModel = None,
    verifier_model: goals.VerifierModel = None,
    synthesizer_model: goals.SynthesizerModel = None,
    rounds: goals.Rounds = 2,
    budget_tokens: goals.BudgetTokens = None,
    budget_usd: goals.BudgetUsd = None,
    max_subtasks: goals.MaxSubtasks = 6,
    check: goals.Check = None,
) -> None:
    """Run a graph, a workflow file or a goal, showing its progress, then summarize it.

    A goal is planned into subtasks that run in parallel, verified and re-planned
    (--rounds, --budget-tokens, --budget-usd, --deadline bound it); the model
    options choose each role's model. --model also sets a workflow's default model.
    """
    from ..loader import load_target
    from ..options import RunOptions
    from ..store import default_location, open_store
    limits = parse_limits(limit or [])
    out = make_console()
    kind = goals.target_kind(target)
    with reported():
        options = RunOptions(max_concurrency=max_concurrency, limits=limits,
                             fail_fast=fail_fast, deadline=deadline)
        attr = None
        if kind == "goal":
            graph = goals.goal_run_graph(
                target, goals.team(model, planner_model, worker_model, verifier_model,
                                   synthesizer_model),
                rounds=rounds, budget_tokens=budget_tokens, budget_usd=budget_usd,
                deadline=deadline, max_subtasks=max_subtasks, check=check)
            values: dict[str, Any] = {}
        elif kind == "workflow":
            graph, values = goals.workflow_graph(target, inputs or [], model)
        else:
            values = parse_inputs(inputs or [])
            _importable_cwd()
            graph = load_target(target)
            attr = graph_attr(target)
        store = open_store(db or default_location())
        try:
            code = _run(graph, options, values, store, attr, db=db, quiet=quiet,
                        as_json=as_json, out=out, goal=kind == "goal")
        finally:
            store.close()
    raise typer.Exit(code)


def _run(graph: Graph, options: RunOptions, inputs: dict[str, Any], store: RunStore,
         attr: str | None, *, db: str | None, quiet: bool, as_json: bool, out: Console,
         goal: bool = False) -> int:
    from .. import api, loop
    from .live import follow
    display = _display(make_console(stderr=True) if as_json else out, quiet=quiet)
    started: list[RunId] = []

    async def start_and_follow() -> RunResult:
        handle = await api.start(graph, inputs=inputs, options=options, store=store,
                                     source_attr=attr)
        started.append(handle.run_id)
        return await follow(handle, display)

    try:
        result = loop.run(start_and_follow())
    except KeyboardInterrupt:
        return _interrupted(started[0] if started else None, db)
    code = _finish(_result_report(result), db=db, as_json=as_json, out=out)
    if goal and not as_json:
        goals.print_answer(result.output, out)
    return code


def _interrupted(run_id: str | None, db: str | None) -> int:
    from rich.text import Text
    message = "interrupted"
    if run_id is not None:
        where = f" --db {shlex.quote(db)}" if db else ""
        message += (f": run {run_id} stopped; continue it with `counterpoint resume "
                    f"{run_id}{where}`")
    make_console(stderr=True).print(Text(message, style="yellow"), soft_wrap=True)
    return 130


# ------------------------------------------------------------------ resume
@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to continue.")],
    db: Db = None,
    quiet: Quiet = False,
    as_json: AsJson = False,
) -> None:
    """Continue a run whose process died; nodes that finished do not run again."""
    from ..state import RunStatus
    from .recorded import log_report
    out = make_console()
    progress = make_console(stderr=True) if as_json else out
    with reported():
        _importable_cwd()
        store = open_existing(db, run_id)
        try:
            record = store.run(RunId(run_id))
            if record.status != RunStatus.RUNNING:
                if not quiet:
                    progress.print(f"run {run_id} already finished ({record.status}); "
                                   "nothing to resume", soft_wrap=True)
                report = log_report(record, store.events(RunId(run_id)))
                code = _finish(report, db=db, as_json=as_json, out=out)
            else:
                code = _resume(run_id, store, db=db, quiet=quiet, as_json=as_json, out=out,
                               progress=progress)
        finally:
            store.close()
    raise typer.Exit(code)


def _resume(run_id: str, store: RunStore, *, db: str | None, quiet: bool, as_json: bool,
            out: Console, progress: Console) -> int:
    from .. import api, loop
    from .live import follow
    display = _display(progress, quiet=quiet)

    async def resume_and_follow() -> RunResult:
        handle = await api.start_resume(run_id, store=store)
        return await follow(handle, display)

    if not quiet:
        progress.print(f"resuming run {run_id}", soft_wrap=True)
    try:
        result = loop.run(resume_and_follow())
    except KeyboardInterrupt:
        return _interrupted(run_id, db)
    code = _finish(_result_report(result), db=db, as_json=as_json, out=out)
    if not as_json and store.run(RunId(run_id)).source.get("builder") == goals.GOAL_BUILDER:
        goals.print_answer(result.output, out)  # a goal run ends with its answer, as `run` does
    return code


# ------------------------------------------------------------------ inspect
@app.command()
def show(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to show.")],
    db: Db = None,
    as_json: AsJson = False,
    calls: Annotated[bool, typer.Option(
        "--calls", help="Also list every model call: node, model, tokens, cost, latency.")] = False,
) -> None:
    """Show a run from its log (nothing runs; the graph's code is not imported)."""
    from ..events import EventKind
    from .recorded import log_report
    from .render import calls_table, dumps, payload, summary
    with reported():
        store = open_existing(db, run_id)
        try:
            record = store.run(RunId(run_id))
            events = store.events(RunId(run_id))
            forks = store.forks(RunId(run_id))
        finally:
            store.close()
        report = log_report(record, events, forks)
    model_calls = [e for e in events if e.kind is EventKind.MODEL_CALL]
    if as_json:
        data = payload(report)
        if calls:
            data["calls"] = [{"seq": e.seq, "at": e.at, "node": e.node, **(e.data or {})}
                             for e in model_calls]
        typer.echo(dumps(data))
        return
    out = make_console()
    out.print(summary(report, inspect=None), soft_wrap=True)
    if calls:
        out.print()
        out.print(calls_table(model_calls), soft_wrap=True)


@app.command()
def runs(
    db: Db = None,
    limit: Annotated[int, typer.Option("--limit", metavar="N", min=1,
                                       help="Most runs to list.")] = 20,
) -> None:
    """List runs, newest first."""
    from ..store import default_location, open_store
    from .recorded import shown_status
    from .render import runs_table
    out = make_console()
    location = db or default_location()
    with reported():
        if location not in ("memory", ":memory:") and not Path(location).exists():
            out.print(f"no runs: there is no store at {location}", soft_wrap=True)
            return
        store = open_store(location)
        try:
            records = store.runs(limit)
        finally:
            store.close()
    if not records:
        out.print(f"no runs in {location}", soft_wrap=True)
        return
    out.print(runs_table(records, shown_status), soft_wrap=True)


# ------------------------------------------------------------------ cancel
@app.command()
def cancel(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to cancel.")],
    db: Db = None,
    wait: Annotated[float, typer.Option(
        "--wait", metavar="SECONDS", min=0,
        help="How long to wait for a running process to stop the run.")] = 10.0,
) -> None:
    """Cancel a run: ask its process to stop it, or end it for good if that process died."""
    out = make_console()
    with reported():
        store = open_existing(db, run_id)
        try:
            code = _cancel(store, RunId(run_id), wait, out)
        finally:
            store.close()
    raise typer.Exit(code)


def _cancel(store: RunStore, run_id: RunId, wait: float, out: Console) -> int:
    from ..state import RunStatus
    from ..store.owners import run_owner_alive as owner_alive
    from .recorded import mark_cancelled
    record = store.run(run_id)
    if record.status != RunStatus.RUNNING:
        out.print(f"run {run_id} already finished: {record.status}", soft_wrap=True)
        return 0
    if owner_alive(record):
        store.request_cancel(run_id)
        out.print(f"cancel of run {run_id} requested from process {record.owner_pid}; waiting "
                  f"up to {wait:g}s", soft_wrap=True)
        until = time.monotonic() + wait
        while True:
            record = store.run(run_id)
            if record.status != RunStatus.RUNNING or time.monotonic() >= until:
                break
            if not owner_alive(record):  # the process died while we waited
                return _cancel(store, run_id, 0, out)
            time.sleep(CANCEL_POLL_SECONDS)
        if record.status == RunStatus.CANCELLED:
            out.print(f"run {run_id} cancelled", soft_wrap=True)
            return 0
        if record.status != RunStatus.RUNNING:
            out.print(f"run {run_id} finished ({record.status}) before the cancel took effect",
                      soft_wrap=True)
            return 0
        out.print(f"run {run_id} is still running after {wait:g}s; its process "
                  f"({record.owner_pid}) will stop it when it sees the request",
                  soft_wrap=True)
        return 1
    mark_cancelled(store, run_id)
    out.print(f"run {run_id} cancelled: its process ({record.owner_pid}) was no longer "
              "running. It can no longer be resumed.", soft_wrap=True)
    return 0
