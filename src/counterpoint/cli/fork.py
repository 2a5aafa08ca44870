"""``counterpoint fork``: a new run from a prefix of a recorded run's log.

The new run reuses every output recorded before the fork point, runs what the fork
changed and what depends on it, and prints the usual summary plus how many model calls
came from the log instead of a provider. Misuse (an unknown run, an event number out of
range, an unknown node, a replacement that cannot be imported) is one ``error:`` line
and exit code 2, before anything is written.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import ForkError
from .args import Db
from .console import make_console, reported
from .stores import db_flag

if TYPE_CHECKING:

    from rich.console import Console

    from ..results import RunResult
    from ..state import ModelTally
    from ..store import RunStore

VALUE_PREFIX = "value:"
"""``--replace NODE=value:JSON`` gives the node that output instead of a step."""

FORK_HELP = ("Start a new run from a prefix of RUN_ID's log: outputs recorded before the "
             "fork point are reused, the rest runs.")


def fork_command(
    run_id: Annotated[str, typer.Argument(
        metavar="RUN_ID", help="The run to fork: its id, a unique start of it, or last.")],
    at: Annotated[str | None, typer.Option(
        "--at", metavar="SEQ|NODE",
        help="Keep events 1..SEQ, or fork just before NODE started (it and what depends "
             "on it run again). Default: the whole log.")] = None,
    replace: Annotated[list[str] | None, typer.Option(
        "--replace", metavar="NODE=TARGET",
        help="Give NODE a new step, module:function or FILE.py:function, or an output, "
             "value:JSON (repeatable).")] = None,
    inputs: Annotated[list[str] | None, typer.Option(
        "--input", metavar="KEY=VALUE",
        help="Change a graph input (repeatable); VALUE is JSON if it parses, else text.")]
        = None,
    db: Db = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q",
                                        help="No live view or progress lines.")] = False,
    as_json: Annotated[bool, typer.Option("--json",
                                          help="Print the result as JSON on stdout.")] = False,
) -> None:
    """Fork a recorded run: reuse what it recorded before the fork point, run the rest."""
    from .recorded import resolve_run
    from .stores import importable_cwd, open_for_writing
    out = make_console()
    with reported():
        importable_cwd()
        point: int | str | None = int(at) if at is not None and at.isdigit() else at
        changes = {node: _target(node, text) for node, text in _pairs(replace or [],
                                                                       "--replace")}
        raw = _pairs(inputs or [], "--input")
        store = open_for_writing(db, run_id)
        try:
            run_id = resolve_run(store, run_id)
            values = _typed(store, run_id, raw) if raw else {}
            code = _fork(run_id, store, point, changes, values, db=db, quiet=quiet,
                         as_json=as_json, out=out)
        finally:
            store.close()
    raise typer.Exit(code)


def _fork(run_id: str, store: RunStore, at: int | str | None, replace: dict[str, Any],
          inputs: dict[str, Any], *, db: str | None, quiet: bool, as_json: bool,
          out: Console) -> int:
    from .. import api, loop
    from ..ids import RunId
    from .live import Display, LineDisplay, LiveView, follow
    from .render import Report, dumps, payload, summary
    from .signals import interrupted, stop_on_sigterm
    progress = make_console(stderr=True) if as_json else out
    display: Display = Display() if quiet else (
        LiveView(progress) if progress.is_terminal else LineDisplay(progress))
    started: list[str] = []
    stopped: list[int] = []

    async def fork_and_follow() -> RunResult:
        stop_on_sigterm(stopped)
        handle = await api.start_fork(run_id, at=at, replace=replace, inputs=inputs,
                                      store=store)
        started.append(handle.run_id)
        if not quiet:
            reused = sum(1 for ns in handle.state.nodes.values() if ns.reused)
            progress.print(f"run {handle.run_id} forked from {run_id}"
                           + (f" at {at}" if at is not None else "")
                           + f": {reused} node output(s) reused", soft_wrap=True)
        result = await follow(handle, display)
        return result

    try:
        result = loop.run(fork_and_follow())
    except KeyboardInterrupt:
        return interrupted(started[0] if started else None, db)
    except asyncio.CancelledError:
        if not stopped:
            raise
        return interrupted(started[0] if started else None, db, terminated=True)
    if not result.status.terminal:  # it waits for approvals the fork asks again
        from .approvals import waiting
        return waiting(result.run_id, list(result.state.asking), out, store,
                       as_json=as_json)
    record = store.run(RunId(result.run_id))
    report = Report(run_id=result.run_id, graph=result.graph, status=result.status.value,
                    state=result.state, output=result.output,
                    metrics=result.metrics,
                    forked_from=record.forked_from)
    if as_json:
        typer.echo(dumps(payload(report)))
    else:
        hint = f"counterpoint show {result.run_id}{db_flag(db)}"
        out.print(summary(report, inspect=hint), soft_wrap=True)
        if result.usage.from_log or result.usage.calls:
            out.print(reuse_line(result.usage), soft_wrap=True)
    return 0 if result.ok else 1


def reuse_line(tally: ModelTally) -> str:
    """``model calls: 9 of 10 from the log (90%: ...), 1 sent to a provider``."""
    total = tally.from_log + tally.calls
    share = tally.reuse_share or 0.0
    return (f"model calls: {tally.from_log} of {total} from the log ({share:.0%}: "
            f"{tally.reused} reused, {tally.cache_hits} from the cache), {tally.calls} sent "
            "to a provider")


def _pairs(values: list[str], option: str) -> list[tuple[str, str]]:
    form = "NODE=TARGET" if option == "--replace" else "KEY=VALUE"
    pairs = []
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"{value!r}: expected {form}", param_hint=f"'{option}'")
        pairs.append((key.strip(), text))
    return pairs


def _typed(store: RunStore, run_id: str, raw: list[tuple[str, str]]) -> dict[str, Any]:
    """``--input`` values: converted to a workflow's declared types, as ``counterpoint
    run`` does (the run's other inputs stay as it recorded them), else JSON if they
    parse as JSON, else text."""
    from ..ids import RunId
    record = store.run(RunId(run_id))
    if record.source.get("kind") != "workflow" or not record.source.get("file"):
        return {key: _json_or_text(text) for key, text in raw}
    from .. import codec
    from ..workflow import load_workflow
    created = store.events(RunId(run_id))[0].data or {}
    recorded = {k: codec.decode(v) for k, v in (created.get("inputs") or {}).items()}
    bound = load_workflow(str(record.source["file"])).bind_inputs({**recorded, **dict(raw)})
    return {key: bound[key] for key, _ in raw}


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _target(node: str, text: str) -> Any:
    """What ``--replace NODE=TEXT`` gives the node: a JSON value, or a callable found by
    ``module:function`` or ``FILE.py:function``."""
    where = f"--replace {node}={text}"
    if text.startswith(VALUE_PREFIX):
        try:
            return json.loads(text[len(VALUE_PREFIX):])
        except ValueError as exc:
            raise ForkError(f"{where}: not JSON after {VALUE_PREFIX!r} ({exc}); e.g. "
                            f"--replace {node}='value:{{\"a\": 1}}'") from None
    module_name, sep, name = text.rpartition(":")
    if not sep or not module_name or not name:
        raise ForkError(f"{where}: expected module:function, FILE.py:function or "
                        "value:JSON")
    from ..loader import load_file
    try:
        module = load_file(module_name) if module_name.endswith(".py") else \
            importlib.import_module(module_name)
    except ImportError as exc:
        raise ForkError(f"{where}: cannot import {module_name} ({exc})") from None
    found = getattr(module, name, None)
    if found is None or not callable(found):
        raise ForkError(f"{where}: {module_name} has no function {name!r}")
    return found
