"""Runs as a store records them: which run a name means, is its process alive, what its
log says, and closing for good a run whose process died (the last two live in
:mod:`counterpoint.history`, which the web view shares)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..budget import account
from ..errors import RunAmbiguous, RunNotFound
from ..events import Event, EventKind
from ..goal_story import goal_story
from ..history import mark_cancelled, project, shown_status
from ..ids import NodeId, RunId, parents
from ..metrics import compute
from ..store import RunRecord, RunStore
from ..store.owners import run_owner_alive as owner_alive
from ..texts import some
from .render import Report

__all__ = ["failed_attempts", "log_report", "mark_cancelled", "parent_deleted",
           "resolve_run", "shown_status", "sub_run_events"]

LAST = "last"
"""Names the newest run (not a sub-run) of the store."""
CANDIDATES = 5
"""Most runs an ambiguous prefix's error names."""


def resolve_run(store: RunStore, name: str) -> RunId:
    """The run ``name`` means: a whole run id, ``last``, or a unique start of an id
    (``r-20261202-0101``) or of its serial, the hex part after the last ``-``.

    Raises :class:`~counterpoint.errors.RunNotFound` when no run matches and
    :class:`~counterpoint.errors.RunAmbiguous` (naming some of them) when several do; a
    run's sub-runs (``RUN/node``) never make its own prefix ambiguous.
    """
    name = name.strip()
    if not name:
        raise RunNotFound("no run named: RUN_ID is empty; give a run's id, a unique start "
                          "of it, or `last` (list runs with `counterpoint runs`)")
    if name == LAST:
        newest = next(iter(store.top_runs(1)), None)
        if newest is None:
            raise RunNotFound("there is no last run: the store holds no runs yet; start one "
                              "with `counterpoint run FILE.py`")
        return newest.run_id
    try:
        return store.run(RunId(name)).run_id
    except RunNotFound as exc:
        missing = exc
    matches = [run_id for run_id in store.ids_containing(name)
               if run_id.startswith(name) or _serial(run_id).startswith(name)]
    found = set(matches)  # a match under another (its sub-run, RUN/node) is not a top one
    tops = [m for m in matches if not any(p in found for p in parents(m))]
    if len(tops) == 1:
        return tops[0]
    if not tops:
        raise missing
    raise RunAmbiguous(f"run {name!r} is ambiguous: it starts {len(tops)} runs "
                       f"({some(sorted(tops), CANDIDATES)}); "
                       "give more of the id")


def _serial(run_id: str) -> str:
    return run_id.partition("/")[0].rpartition("-")[2]


def failed_attempts(events: Sequence[Event]) -> dict[NodeId, list[dict[str, Any]]]:
    """Each node's failed attempts, in order: the ``node_failed`` data with its attempt."""
    failed: dict[NodeId, list[dict[str, Any]]] = {}
    for ev in events:
        if ev.kind is EventKind.NODE_FAILED and ev.node is not None:
            failed.setdefault(ev.node, []).append({**(ev.data or {}), "attempt": ev.attempt})
    return failed


def waiting_or(store: RunStore, record: RunRecord, shown: str) -> str:
    """``waiting`` for a run shown ``interrupted`` whose log has approvals pending (it
    ended its execution to wait for them), else ``shown``."""
    if shown == "interrupted" and _pending_approvals(record.run_id,
                                                     store.events(record.run_id), ()):
        return "waiting"
    return shown


def _pending_approvals(run_id: RunId, events: Sequence[Event],
                       sub_runs: Sequence[Sequence[Event]]) -> list[str]:
    """The ids of the approvals the run (or one of its sub-runs) waits for, per its logs."""
    from ..approval import PENDING
    from ..approval import project as approvals_of
    return [a.id for log in (events, *sub_runs)  # (only the ids are read: any run id does)
            for a in approvals_of(run_id, log).values() if a.status == PENDING]


def sub_run_events(store: RunStore, run_id: str) -> list[list[Event]]:
    """The logs of ``run_id``'s sub-runs (``RUN/node...``), which spend from its budget."""
    return [store.events(r.run_id) for r in store.sub_runs(RunId(run_id))]


def parent_deleted(store: RunStore, record: RunRecord) -> bool:
    """Whether ``record`` is a fork whose parent run is no longer in the store (deleted
    since: ``counterpoint delete``, ``prune``); the fork's own log is whole."""
    if record.forked_from is None:
        return False
    try:
        store.run(record.forked_from.run)
    except RunNotFound:
        return True
    return False


def log_report(record: RunRecord, events: Sequence[Event],
               forks: Sequence[RunRecord] = (),
               sub_runs: Sequence[Sequence[Event]] = ()) -> Report:
    """The summary of a recorded run, rebuilt from its log alone (``forks``: the runs
    forked from it, for its lineage; ``sub_runs``: its sub-runs' logs, for its budget)."""
    from ..models.sampling import sampling_by_node
    from ..routing.trail import routing_by_node  # the routing package loads the models
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
        waiting = _pending_approvals(record.run_id, events, sub_runs)
        if waiting:  # it ended its execution to wait (--detach-waiting), or died waiting
            status = "waiting"
            note = (f"waiting for {len(waiting)} approval(s) ({some(waiting, 3)}); its "
                    "process has ended: an answer (`counterpoint approve ID`, `counterpoint "
                    "reject ID --reason ...`) resumes it, or `counterpoint resume "
                    f"{record.run_id}`")
        else:
            status = "interrupted"
            note = (f"its process ({record.owner_pid}) is gone; continue it with "
                    f"`counterpoint resume {record.run_id}` or end it with `counterpoint "
                    f"cancel {record.run_id}`")
    return Report(run_id=record.run_id, graph=state.graph if state.graph != "?" else record.graph,
                  status=status, state=state, metrics=compute(state, now, projection.spawned),
                  deps_known=projection.deps_known, declared=projection.declared, note=note,
                  failed_attempts=failed_attempts(events),
                  forked_from=record.forked_from, forks=tuple(r.run_id for r in forks),
                  routing=routing_by_node(events), budget=account(events, sub_runs),
                  sampling=sampling_by_node(events), goal=goal_story(events))
