"""``counterpoint show``, ``runs`` and ``cancel``: reading a run from its log, and
stopping it."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Annotated

import typer

from ..ids import RunId
from .args import AsJson, Db, RunName
from .console import fail, make_console, reported
from .stores import check_writable, missing_file, open_existing

if TYPE_CHECKING:
    from rich.console import Console

    from ..store import RunStore

CANCEL_POLL_SECONDS = 0.1


# ------------------------------------------------------------------ inspect
def show(
    run_id: RunName,
    db: Db = None,
    as_json: AsJson = False,
    calls: Annotated[bool, typer.Option(
        "--calls", help="Also list every model call: node, model, tokens, cost, latency.")] = False,
    full: Annotated[bool, typer.Option(
        "--full", help="With --calls: each call's prompt and answer too.")] = False,
    call: Annotated[int | None, typer.Option(
        "--call", metavar="N", help="Show model call N (the call column of --calls) in "
                                    "full, prompt and answer.")] = None,
) -> None:
    """Show a run from its log (nothing runs; the graph's code is not imported)."""
    from ..approval import project
    from ..events import EventKind
    from .approvals_view import approval_dict, approvals_table
    from .calls import call_record, call_view, calls_table
    from .recorded import (
        log_report,
        parent_deleted,
        resolve_run,
        sub_run_events,
    )
    from .render import dumps, payload, summary
    with reported():
        if full and not calls and call is None:
            raise typer.BadParameter("--full goes with --calls (or use --call N)",
                                     param_hint="'--full'")
        store = open_existing(db, run_id)
        try:
            run = resolve_run(store, run_id)
            record = store.run(run)
            events = store.events(run)
            model_calls = [e for e in events if e.kind is EventKind.MODEL_CALL]
            if call is not None:
                model_calls = [e for e in model_calls if e.seq == call]
                if not model_calls:
                    fail(f"run {run} has no model call {call}; list them with `counterpoint "
                         f"show {run} --calls`")
            texts = {d: store.blob(d) for e in model_calls if full or call is not None
                     for d in ((e.data or {}).get("request"), (e.data or {}).get("response"))
                     if isinstance(d, str)}
            approvals = list(project(record.run_id, events,
                                     store.approval_answers(record.run_id)).values())
            forks = store.forks(record.run_id)
            orphan = parent_deleted(store, record)
            sub_runs = sub_run_events(store, record.run_id)
        finally:
            store.close()
        report = dataclasses.replace(log_report(record, events, forks, sub_runs),
                                     parent_deleted=orphan)
    out = make_console()
    if call is not None:
        if as_json:
            typer.echo(dumps(call_record(model_calls[0], texts.get)))
        else:
            out.print(call_view(model_calls[0], texts.get), soft_wrap=True)
        return
    if as_json:
        data = payload(report)
        if calls:
            data["calls"] = [call_record(e, texts.get) if full else
                             {"call": e.seq, "at": e.at, "node": e.node, **(e.data or {})}
                             for e in model_calls]
        if approvals:
            data["approvals"] = [approval_dict(a) for a in approvals]
        if orphan:
            data["forked_from"]["deleted"] = True
        typer.echo(dumps(data))
        return
    out.print(summary(report, inspect=None), soft_wrap=True)
    if approvals:
        out.print()
        out.print("approvals", style="bold")
        out.print(approvals_table(approvals, with_run=False), soft_wrap=True)
    if calls:
        out.print()
        out.print(calls_table(model_calls), soft_wrap=True)
        if full:
            for e in model_calls:
                out.print()
                out.print(call_view(e, texts.get), soft_wrap=True)


def runs(
    db: Db = None,
    limit: Annotated[int, typer.Option("--limit", metavar="N", min=1,
                                       help="Most runs to list.")] = 20,
    sub_runs: Annotated[bool, typer.Option(
        "--sub-runs", help="List sub-runs (RUN/node) too, each a row of its own.")] = False,
) -> None:
    """List runs, newest first (sub-runs with --sub-runs)."""
    from ..store import default_location, open_store
    from .recorded import shown_status, waiting_or
    from .render import runs_table
    out = make_console()
    location = db or default_location()
    with reported():
        if missing_file(location):
            out.print(f"no runs: there is no store at {location}", soft_wrap=True)
            return
        store = open_store(location)
        try:
            records = store.runs(limit) if sub_runs else store.top_runs(limit)
            if not records:
                out.print(f"no runs in {store.location}", soft_wrap=True)
                return
            table = runs_table(records, lambda record: waiting_or(store, record,
                                                                    shown_status(record)))
        finally:
            store.close()
    out.print(table, soft_wrap=True)


# ------------------------------------------------------------------ cancel
def cancel(
    run_id: RunName,
    db: Db = None,
    wait: Annotated[float, typer.Option(
        "--wait", metavar="SECONDS", min=0,
        help="How long to wait for a running process to stop the run.")] = 10.0,
) -> None:
    """Cancel a run: ask its process to stop it, or end it for good if that process died."""
    from .recorded import resolve_run
    out = make_console()
    with reported():
        store = open_existing(db, run_id)
        try:
            code = _cancel(store, resolve_run(store, run_id), wait, out, db)
        finally:
            store.close()
    raise typer.Exit(code)


def _cancel(store: RunStore, run_id: RunId, wait: float, out: Console,
            db: str | None) -> int:
    from ..state import RunStatus
    from ..store.owners import run_owner_alive as owner_alive
    from .recorded import mark_cancelled
    record = store.run(run_id)
    if record.status != RunStatus.RUNNING:
        out.print(f"run {run_id} already finished: {record.status}", soft_wrap=True)
        return 0
    check_writable(db)  # the request, or the end, is recorded: refused before either
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
                return _cancel(store, run_id, 0, out, db)
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
