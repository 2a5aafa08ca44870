"""Runs as a store records them: is their process alive, what their log says, and
closing for good a run whose process died (the last two live in
:mod:`counterpoint.history`, which the web view shares)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..events import Event, EventKind
from ..history import mark_cancelled, project, shown_status
from ..metrics import compute
from ..store import RunRecord
from ..store.owners import run_owner_alive as owner_alive
from .render import Report

__all__ = ["log_report", "mark_cancelled", "shown_status"]


def log_report(record: RunRecord, events: Sequence[Event]) -> Report:
    """The summary of a recorded run, rebuilt from its log alone."""
    projection = project(record.run_id, events)
    state = projection.state
    status = state.status.value
    note: str | None = None
    if state.status.terminal:
        now = state.finished_at or projection.last_at
        reason = next((ev.data or {} for ev in reversed(events)
                       if ev.kind is EventKind.RUN_FINISHED), {}).get("reason")
        if reason:
            note = str(reason)
    elif owner_alive(record):
        now = time.time()
        note = f"still running in process {record.owner_pid} on {record.owner_host}"
    else:
        now = projection.last_at
        status = "interrupted"
        note = (f"its process ({record.owner_pid}) is gone; continue it with `counterpoint "
                f"resume {record.run_id}` or end it with `counterpoint cancel {record.run_id}`")
    return Report(run_id=record.run_id, graph=state.graph if state.graph != "?" else record.graph,
                  status=status, state=state, metrics=compute(state, now),
                  deps_known=projection.deps_known, declared=projection.declared, note=note)
