"""The ``counterpoint`` command: run, resume, inspect, list and cancel runs.

Exit codes: 0 the run (or the command) succeeded; 1 the run failed, timed out or
was cancelled; 2 the command was misused: a bad option, a graph that cannot be
loaded, an unknown run, an unusable store; 3 the run waits for approvals (``run
--detach-waiting``: see :mod:`.approvals`). Misuse is reported as one
``error: ...`` line on stderr, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .. import __version__
from ..errors import StoreError, StoreWriterLost
from ..exits import INTERRUPTED, TERMINATED
from ..garbage import tune_gc
from ..ids import RunId
from . import approvals as approvals_cli
from . import cluster as cluster_cli
from . import goals, inspect
from .args import AsJson, Db, Quiet, RunName
from .console import make_console, reported
from .fork import FORK_HELP, fork_command
from .limits import check_limits, parse_limits
from .mcp import MCP_HELP, mcp_command
from .models import ASK_HELP, MODELS_HELP, ask_command, models_command
from .pictures import GRAPH_HELP, TRACE_HELP, graph_command, trace_command
from .retention import DELETE_HELP, PRUNE_HELP, delete_command, prune_command
from .signals import interrupted as _interrupted
from .signals import quit_without_waiting, stop_on_sigterm
from .stores import check_writable, closing_quietly_on_error, db_flag
from .stores import importable_cwd as _importable_cwd
from .stores import open_existing as open_existing
from .ui import UI_HELP, ui_command

# Only what the commands' signatures name is imported here: `counterpoint --help` builds
# every command from its signature, so the library (scheduler, models, store, rich
# renderables) is imported inside the commands that use it. tests/cli/test_startup.py
# pins that.
if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

    from ..events import Event
    from ..graph import Graph
    from ..options import RunOptions
    from ..ray import RayBackend
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


app.command("models", help=MODELS_HELP)(models_command)
app.command("ask", help=ASK_HELP)(ask_command)
app.command("plan")(goals.plan_command)
app.command("graph", help=GRAPH_HELP)(graph_command)
app.command("trace", help=TRACE_HELP)(trace_command)
app.command("approvals", help=approvals_cli.APPROVALS_HELP)(approvals_cli.approvals_command)
app.command("approve", help=approvals_cli.APPROVE_HELP)(approvals_cli.approve_command)
app.command("reject", help=approvals_cli.REJECT_HELP)(approvals_cli.reject_command)
app.command("ui", help=UI_HELP)(ui_command)
app.command("show")(inspect.show)
app.command("runs")(inspect.runs)
app.command("cancel")(inspect.cancel)
app.command("delete", help=DELETE_HELP)(delete_command)
app.command("prune", help=PRUNE_HELP)(prune_command)
app.command("mcp", help=MCP_HELP)(mcp_command)
app.command("fork", help=FORK_HELP)(fork_command)


def main() -> None:
    """Entry point of the ``counterpoint`` console script."""
    tune_gc()  # this process is ours: see counterpoint.garbage
    try:
        app(prog_name="counterpoint")
    except SystemExit as exc:
        if exc.code in (INTERRUPTED, TERMINATED):  # a run stopped: its steps in threads may not
            quit_without_waiting(exc.code)
        raise


# ------------------------------------------------------------------ plumbing
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


def show_hint(run_id: str, db: str | None) -> str:
    return f"counterpoint show {run_id}{db_flag(db)}"


def exit_code(status: str) -> int:
    from ..state import RunStatus
    return 0 if status == RunStatus.SUCCEEDED else 1


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


def _result_report(result: RunResult, note: str | None = None, *,
                   events: Sequence[Event] = (),
                   sub_runs: Sequence[Sequence[Event]] = ()) -> Report:
    """The summary of a finished run; ``events`` (its log) and ``sub_runs`` (its sub-runs'
    logs) give its budget, ``events`` what the router chose and the samples sent. Its
    metrics are the result's: they know which node's live edit added which nodes (a goal
    run's critical path begins at ``plan``, as ``counterpoint show`` of it says)."""
    from ..budget import account
    from ..models.sampling import sampling_by_node
    from ..routing.trail import routing_by_node
    from .render import Report
    reason = result.state.stop_reason
    if note is None and reason is not None:
        note = {"deadline": "stopped: the run's deadline passed; finished nodes kept "
                            "their outputs",
                "fail_fast": "stopped after the first failure (--fail-fast)",
                "cancelled": "cancelled while running"}.get(reason, reason)
    return Report(run_id=result.run_id, graph=result.graph, status=result.status.value,
                  state=result.state, metrics=result.metrics,
                  note=note, output=result.output, budget=account(events, sub_runs),
                  routing=routing_by_node(events), sampling=sampling_by_node(events))


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
    ctx: typer.Context,
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
    deadline_text: Annotated[str | None, typer.Option(
        "--deadline", metavar="DURATION",
        help="Stop the run this long after it starts (30, 30s, 2m, 1h); a resume keeps "
             "the same deadline.")] = None,
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
    samples: goals.Samples = 1,
    budget_tokens: goals.BudgetTokens = None,
    budget_usd: goals.BudgetUsd = None,
    max_subtasks: goals.MaxSubtasks = 6,
    check: goals.Check = None,
    topology: goals.TopologyArg = "auto",
    detach_waiting: Annotated[bool, typer.Option(
        "--detach-waiting", help="Exit (code 3) once the run only waits for approvals; "
                                 "`counterpoint approve` resumes it.")] = False,
    role_tokens: goals.RoleTokens = None,
    no_cache: Annotated[bool, typer.Option(
        "--no-cache", help="Ask every model call afresh: no response cache (also "
                           "`cache = false` under [defaults] in counterpoint.toml).")] = False,
    no_preflight: Annotated[bool, typer.Option(
        "--no-preflight", help="Start without checking the models first (keys, server, "
                               "structured output).")] = False,
    backend: cluster_cli.BackendName = None,
    ray_address: cluster_cli.RayAddress = None,
    workers: cluster_cli.Workers = None,
    inputs_file: cluster_cli.InputsFile = None,
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
        check_writable(db)  # before the graph's code is imported, or a model is asked
        from ..budget import Budget, parse_seconds
        from ..errors import UserError
        from ..models import load_registry
        from . import preflight
        goals.refuse_goal_options(
            [name for name in ctx.params
             if getattr(ctx.get_parameter_source(name), "name", "") == "COMMANDLINE"],
            kind, target)
        deadline = None if deadline_text is None else parse_seconds(deadline_text,
                                                                    where="--deadline")
        if budget_usd is not None and not budget_usd > 0:  # typer's min= cannot exclude 0
            raise UserError(f"--budget-usd must be more than 0 US dollars, got {budget_usd:g}; "
                            "leave it out for no money budget")
        if budget_usd == float("inf"):  # nor inf: a budget that bounds nothing
            raise UserError("--budget-usd must be a finite number of US dollars, got inf; "
                            "leave it out for no money budget")
        budget = None if budget_usd is None and budget_tokens is None else Budget(
            usd=budget_usd, tokens=budget_tokens)
        options = RunOptions(max_concurrency=max_concurrency, limits=limits,
                             fail_fast=fail_fast, deadline=deadline, budget=budget,
                             detach_when_waiting=detach_waiting,
                             cache=not no_cache and load_registry().cache)
        if workers is not None or inputs_file is not None:
            code = _run_many(target, kind, options, inputs or [], inputs_file, workers,
                             backend, ray_address, db=db, quiet=quiet, as_json=as_json,
                             out=out, preflight_first=not no_preflight)
            raise typer.Exit(code)
        chosen = cluster_cli.choose_backend(backend, ray_address)
        if chosen is not None:
            from dataclasses import replace
            options = replace(options, backend=chosen)
        attr = None
        if kind == "goal":
            the_team = goals.team(model, planner_model, worker_model, verifier_model,
                                  synthesizer_model, goals.role_tokens(role_tokens or []),
                                  samples=samples)
            graph = goals.goal_run_graph(
                target, the_team, rounds=rounds, budget_tokens=budget_tokens,
                budget_usd=budget_usd, deadline=deadline, max_subtasks=max_subtasks,
                check=check, topology=topology)
            uses = preflight.goal_uses(the_team, goals.role_options(
                model, planner_model, worker_model, verifier_model, synthesizer_model))
            values: dict[str, Any] = {}
        elif kind == "workflow":
            graph, values = goals.workflow_graph(target, inputs or [], model)
            uses = preflight.graph_uses(graph, f"--model {model}" if model else None)
        else:
            values = parse_inputs(inputs or [])
            _importable_cwd()
            graph = load_target(target)
            attr = graph_attr(target)
            uses = preflight.graph_uses(graph)
        _warn(check_limits(limits, graph, kind=kind, target=target))
        if not no_preflight:
            preflight.check_run(uses)
        store = open_store(db or default_location())
        try:
            with closing_quietly_on_error(store):
                code = _run(graph, options, values, store, attr, db=db, quiet=quiet,
                            as_json=as_json, out=out, goal=kind == "goal")
        finally:
            if chosen is not None:
                chosen.close()
    raise typer.Exit(code)


def _run_many(target: str, kind: str, options: RunOptions, shared: list[str],
              inputs_file: str | None, workers: int | None, backend: str | None,
              address: str | None, *, db: str | None, quiet: bool, as_json: bool,
              out: Console, preflight_first: bool) -> int:
    """``run --workers N --inputs FILE.jsonl``: the graph once per line, over Ray shards."""
    from ..errors import UserError
    from ..loader import load_target
    from . import preflight
    if kind != "graph":
        raise UserError(f"--workers runs a Python graph (FILE.py[:GRAPH] or a module), "
                        f"not a {kind}")
    if inputs_file is None:
        raise UserError("--workers N needs --inputs FILE.jsonl: one JSON object of graph "
                        "inputs per line, one run per line")
    if backend not in (None, "ray"):
        raise UserError(f"--workers places whole runs on Ray shards; --backend {backend} "
                        "does not apply (leave it out)")
    _importable_cwd()
    graph = load_target(target)  # a graph that does not load fails here, not in a shard
    _warn(check_limits(options.limits, graph, kind=kind, target=target))
    if preflight_first:
        preflight.check_run(preflight.graph_uses(graph))
    runs, lines = cluster_cli.read_inputs(inputs_file, parse_inputs(shared), graph, options)
    return cluster_cli.run_many_command(
        target, runs, lines, workers=workers or 2, address=address, options=options, db=db,
        quiet=quiet, as_json=as_json, out=out,
        progress_out=make_console(stderr=True) if as_json else out)


def _warn(warnings: list[str]) -> None:
    from rich.text import Text
    for warning in warnings:
        make_console(stderr=True).print(Text(f"warning: {warning}", style="yellow"),
                                        soft_wrap=True)


def _run(graph: Graph, options: RunOptions, inputs: dict[str, Any], store: RunStore,
         attr: str | None, *, db: str | None, quiet: bool, as_json: bool, out: Console,
         goal: bool = False) -> int:
    from .. import api, loop
    from .live import follow
    from .recorded import sub_run_events
    display = _display(make_console(stderr=True) if as_json else out, quiet=quiet)
    started: list[RunId] = []
    stopped: list[int] = []
    logged: list[Sequence[Event]] = []

    async def start_and_follow() -> RunResult:
        stop_on_sigterm(stopped)
        handle = await api.start(graph, inputs=inputs, options=options, store=store,
                                     source_attr=attr)
        started.append(handle.run_id)
        result = await follow(handle, display)
        # the run's log as this process logged it: a 100,000-node run's read back from
        # the store took 0.66 s, for the summary's budget, routing and samples
        logged.append(handle.history())
        return result

    try:
        result = loop.run(start_and_follow())
    except KeyboardInterrupt:
        return _interrupted(started[0] if started else None, db)
    except asyncio.CancelledError:
        if not stopped:
            raise
        return _interrupted(started[0] if started else None, db, terminated=True)
    except StoreError as exc:
        if not started:
            raise
        raise _store_failed(exc, started[0], db) from exc
    if not result.status.terminal:  # it ended its execution to wait for people
        return approvals_cli.waiting(result.run_id, list(result.state.asking), out, store,
                                     as_json=as_json)
    code = _finish(_result_report(result, events=logged[0],
                                  sub_runs=sub_run_events(store, result.run_id)),
                   db=db, as_json=as_json, out=out)
    if goal and not as_json:
        goals.print_answer(result.output, out)
    return code


def _store_failed(exc: StoreError, run_id: str, db: str | None) -> StoreError:
    """A store that failed while a run wrote to it (a full disk, a lost server, its writer
    process killed): the run's log keeps everything recorded before the failure, and a
    resume goes on from there."""
    # a writer process that ended says nothing of the disk: there is no cause to fix
    fix = "" if isinstance(exc, StoreWriterLost) else "fix the cause (e.g. free disk space), then "
    return type(exc)(f"{exc}; run {run_id} stopped, its log whole up to the failure: "
                     f"{fix}continue it with `counterpoint resume {run_id}{db_flag(db)}`")


# ------------------------------------------------------------------ resume
@app.command()
def resume(
    run_id: RunName,
    db: Db = None,
    quiet: Quiet = False,
    as_json: AsJson = False,
    backend: cluster_cli.BackendName = None,
    ray_address: cluster_cli.RayAddress = None,
    graph: Annotated[str | None, typer.Option(
        "--graph", metavar="FILE[:GRAPH]",
        help="Load the run's graph from here, not from where the log says (a moved file), "
             "checked against the nodes the log recorded.")] = None,
) -> None:
    """Continue a run whose process died; nodes that finished do not run again.

    --backend ray runs the nodes left on Ray, whatever backend the run started on."""
    from ..loader import load_target
    from ..state import RunStatus
    from .recorded import log_report, resolve_run, sub_run_events
    out = make_console()
    progress = make_console(stderr=True) if as_json else out
    with reported():
        cluster_cli.check_backend_options(backend, ray_address)
        _importable_cwd()
        store = open_existing(db, run_id)
        with closing_quietly_on_error(store):
            run_id = resolve_run(store, run_id)
            record = store.run(RunId(run_id))
            if record.status != RunStatus.RUNNING:
                if not quiet:
                    progress.print(f"run {run_id} already finished ({record.status}); "
                                   "nothing to resume", soft_wrap=True)
                report = log_report(record, store.events(RunId(run_id)),
                                    sub_runs=sub_run_events(store, run_id))
                code = _finish(report, db=db, as_json=as_json, out=out)
            else:
                check_writable(db)  # before the graph's code is imported again
                given = load_target(graph, record.source.get("graph")) if graph else None
                chosen = cluster_cli.choose_backend(backend, ray_address)
                try:
                    code = _resume(run_id, store, db=db, quiet=quiet, as_json=as_json,
                                   out=out, progress=progress, backend=chosen, graph=given)
                finally:
                    if chosen is not None:
                        chosen.close()
    raise typer.Exit(code)


def _resume(run_id: str, store: RunStore, *, db: str | None, quiet: bool, as_json: bool,
            out: Console, progress: Console, backend: RayBackend | None = None,
            graph: Graph | None = None) -> int:
    from .. import api, loop
    from .live import follow
    from .recorded import sub_run_events
    display = _display(progress, quiet=quiet)
    stopped: list[int] = []

    async def resume_and_follow() -> RunResult:
        stop_on_sigterm(stopped)
        handle = await api.start_resume(run_id, store=store, backend=backend, graph=graph)
        return await follow(handle, display)

    if not quiet:
        progress.print(f"resuming run {run_id}", soft_wrap=True)
    try:
        result = loop.run(resume_and_follow())
    except KeyboardInterrupt:
        return _interrupted(run_id, db)
    except asyncio.CancelledError:
        if not stopped:
            raise
        return _interrupted(run_id, db, terminated=True)
    except StoreError as exc:
        raise _store_failed(exc, run_id, db) from exc
    if not result.status.terminal:  # it ended its execution to wait for people
        return approvals_cli.waiting(result.run_id, list(result.state.asking), out, store,
                                     as_json=as_json)
    code = _finish(_result_report(result, events=store.events(result.run_id),
                                  sub_runs=sub_run_events(store, result.run_id)),
                   db=db, as_json=as_json, out=out)
    if not as_json and store.run(RunId(run_id)).source.get("builder") == goals.GOAL_BUILDER:
        goals.print_answer(result.output, out)  # a goal run ends with its answer, as `run` does
    return code
