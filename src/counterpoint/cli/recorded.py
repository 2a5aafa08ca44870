"""Runs as a store records them: is their process alive, what their log says, and
closing for good a run whose process died."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..events import Event, EventKind
from ..ids import RunId
from ..metrics import compute
from ..state import RunStatus
from ..store import RunRecord, RunStore
from ..store.owners import run_owner_alive as owner_alive
from .projection import project
from .render import Report


def shown_status(record: RunRecord) -> str:
    """The run's status, with ``interrupted`` for a running run whose process is gone."""
    if record.status == RunStatus.RUNNING and not owner_alive(record):
        return "interrupted"
    return record.status


def log_report(record: RunRecord, events: Sequence[Event],
               forks: Sequence[RunRecord] = ()) -> Report:
    """The summary of a recorded run, rebuilt from its log alone (``forks``: the runs
    forked from it, for its lineage)."""
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
                  deps_known=projection.deps_known, declared=projection.declared, note=note,
                  forked_from=record.forked_from, forks=tuple(r.run_id for r in forks))


def mark_cancelled(store: RunStore, run_id: RunId,
                   reason: str = "cancelled while not running") -> None:
    """End a run whose process died: append a final ``run_finished`` (cancelled) event.

    A resume replays it and finds the run finished, so nothing of it runs again.
    """
    events = store.events(run_id)
    last = events[-1].seq if events else 0
    store.append(run_id, Event(EventKind.RUN_FINISHED, time.time(),
                               data={"status": RunStatus.CANCELLED.value, "reason": reason},
                               seq=last + 1))
    store.flush_sync()
