"""The web view's model of a run: JSON-ready dictionaries projected from the run's log.

Everything here is a pure function of store records and events, folded with the same
:class:`~counterpoint.history.Projector` that ``counterpoint show`` uses, so the page
and the terminal never disagree about a run. :class:`RunView` follows one run as its
events arrive and says what changed since the last update, so a live page receives the
nodes that changed, not the whole run again.
"""

from __future__ import annotations

import difflib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from ..events import Event, EventKind
from ..goal_story import GoalStory
from ..history import Projector, shown_status
from ..ids import NodeId, RunId
from ..metrics import compute
from ..models.sampling import sampling_by_node, sampling_line
from ..plan_text import plan_tree, round_lines
from ..routing.trail import routing_by_node
from ..state import NodeState, RunState, RunStatus, Spawn
from ..store import RunRecord
from ..store.owners import run_owner_alive
from . import subset

PREVIEW_CHARS = 2000
"""Longest value sent inline; a longer one is sent clipped and fetched whole on demand."""
SMALL_RUN = 1000
"""A live run of fewer nodes has its metrics recomputed at every update."""
METRICS_SECONDS = 1.0
"""A larger live run's metrics (a pass over every node) are recomputed at most this
often; an update sent with older metrics is followed by one with fresh metrics at the
follower's next look, even if no event came in between."""

_ATTEMPT_EVENTS = frozenset({EventKind.NODE_READY, EventKind.NODE_STARTED,
                             EventKind.NODE_SUCCEEDED, EventKind.NODE_FAILED,
                             EventKind.NODE_CANCELLED, EventKind.NODE_SKIPPED,
                             EventKind.NODE_BLOCKED})


def run_row(record: RunRecord, events: Sequence[Event] | None = None) -> dict[str, Any]:
    """One line of the runs list, from the run's index record (a finished run's duration
    too); with the run's ``events``, also its nodes, tokens and cost (:func:`run_totals`)."""
    status = shown_status(record)
    row: dict[str, Any] = {
        "run_id": record.run_id, "graph": record.graph, "status": status,
        "created_at": record.created_at, "updated_at": record.updated_at,
        "parent": record.parent, "tokens": None, "cost": None, "nodes": None,
        # the index's updated_at is the time of the last status change: a finished
        # run's end
        "duration": record.updated_at - record.created_at
        if record.status != RunStatus.RUNNING else None}
    if events is not None:
        totals = run_totals(events)
        if totals.pop("asking") and status == "interrupted":
            row["status"] = "waiting"
        row.update(totals)
    return row


def run_totals(events: Iterable[Event]) -> dict[str, Any]:
    """A run's nodes, tokens and cost, from its log; and ``asking``, how many approvals
    it waits for (a run shown interrupted that asks is shown ``waiting``: its process
    ended to wait for a person, ``--detach-waiting``, and an answer resumes it)."""
    tokens = 0
    cost = 0.0
    nodes = 0
    asked: set[str] = set()
    for ev in events:
        if ev.kind in _WAIT_EVENTS:
            aid = str((ev.data or {}).get("id"))
            if ev.kind is EventKind.APPROVAL_REQUESTED:
                asked.add(aid)
            else:
                asked.discard(aid)
            continue
        if ev.kind is EventKind.MODEL_CALL and ev.data and "input_tokens" in ev.data:
            tokens += int(ev.data.get("input_tokens") or 0) + \
                int(ev.data.get("output_tokens") or 0)
            cost += float(ev.data.get("cost") or 0.0)
        elif ev.kind is EventKind.RUN_CREATED:
            nodes = int((ev.data or {}).get("nodes") or 0)
        elif ev.kind is EventKind.MAP_EXPANDED:
            nodes += int((ev.data or {}).get("count") or 0)
    return {"tokens": tokens, "cost": cost, "nodes": nodes, "asking": len(asked)}


def matches(row: Mapping[str, Any], query: str, status: str) -> bool:
    """Whether a runs-list row passes the page's filter (``status``) and search (``query``:
    words that must all appear in the run id, graph or status)."""
    if status and row["status"] != status:
        return False
    hay = f"{row['run_id']} {row['graph']} {row['status']}".lower()
    return all(word in hay for word in query.lower().split())


def node_view(ns: NodeState, state: RunState,
              asked: Sequence[list[float | None]] = ()) -> dict[str, Any]:
    """What the DAG and the timeline draw for one node; ``asked``: the stretches it
    waited for a person (:class:`ApprovalWaits`)."""
    spans: list[list[float | None]] = [[start, stop] for start, stop in ns.intervals]
    if ns.started_at is not None and ns.stopped_at is None:
        spans.append([ns.started_at, None])  # the attempt running now
    error = ns.error or {}
    tally = state.node_models.get(ns.spec.id)
    return {
        "id": ns.spec.id, "deps": list(ns.spec.deps), "kind": ns.spec.kind.value,
        "status": ns.status.value, "attempts": ns.attempt,
        "ready_at": ns.first_ready_at, "started_at": ns.first_started_at,
        "finished_at": ns.finished_at, "spans": spans, "waited": dict(ns.waited or {}),
        "error": f"{error.get('type', '')}: {error.get('message', '')}"
                 if error.get("type") else error.get("reason"),
        "calls": tally.calls + tally.cache_hits if tally else 0,
        "tokens": tally.tokens if tally else 0, "cost": tally.cost if tally else 0.0,
        # only where there were waits: a run of 100,000 nodes is sent whole with ?full=1
        **({"asked": [list(a) for a in asked]} if asked else {}),
    }


def run_header(record: RunRecord, state: RunState, last_at: float) -> dict[str, Any]:
    """The run's status line: what it is, where it runs, what can be done with it."""
    status = shown_status(record)
    note = None
    if state.status.terminal:
        status = state.status.value
        live = False
    else:
        live = run_owner_alive(record)
        asking = sorted({a for ids in state.asking.values() for a in ids})
        if status == "interrupted" and asking:  # as `counterpoint show` tells it
            status = "waiting"
            note = (f"waiting for {len(asking)} approval(s) ({', '.join(asking[:3])}"
                    f"{', ...' if len(asking) > 3 else ''}); its process has ended: an "
                    "answer (`counterpoint approve ID`, `counterpoint reject ID --reason "
                    "...`; the waiting node's detail says which) resumes it")
    end = state.finished_at or (time.time() if live else last_at)
    tally = state.models
    return {
        "run_id": record.run_id, "graph": state.graph if state.graph != "?" else record.graph,
        "status": status, "created_at": state.created_at or record.created_at,
        "finished_at": state.finished_at, "duration": max(0.0, end - state.created_at)
        if state.created_at else None,
        "owner": f"process {record.owner_pid} on {record.owner_host}"
                 if record.owner_pid else None,
        "parent": record.parent, "stop_reason": state.stop_reason,
        "forked_from": None if record.forked_from is None else {
            "run": record.forked_from.run, "seq": record.forked_from.seq,
            "node": record.forked_from.node},
        "tokens": tally.tokens, "cost": tally.cost, "calls": tally.calls,
        "note": note,
        "can_cancel": status in ("running", "interrupted", "waiting"),
        "can_resume": status in ("interrupted", "waiting"),
    }


def metrics_view(state: RunState, now: float,
                 spawned: Mapping[NodeId, Spawn] | None = None) -> dict[str, Any]:
    """The run's metrics (as ``counterpoint show`` computes them: ``spawned`` is what the
    log says live edits added), without the per-node table the timeline already draws."""
    metrics = compute(state, now, spawned)
    return {f.name: getattr(metrics, f.name) for f in fields(metrics) if f.name != "nodes"}


class ApprovalWaits:
    """The stretches each node waited for a person, ``[asked_at, settled_at]`` (``None``:
    still waiting), as the terminal's Gantt draws them (:mod:`counterpoint.pictures.gantt`):
    from the approval's request to its answer or withdrawal; a run resumed after its
    process died ends the waits it had open (they are asked again)."""

    def __init__(self) -> None:
        self.by_node: dict[str, list[list[float | None]]] = {}
        self._open: dict[tuple[str, str], list[float | None]] = {}

    def feed(self, events: Iterable[Event]) -> None:
        for ev in events:
            kind = ev.kind
            if kind is EventKind.RUN_RESUMED:
                for still in self._open.values():
                    still[1] = ev.at
                self._open.clear()
            elif kind not in _WAIT_EVENTS or ev.node is None:
                continue
            key = (str(ev.node), str((ev.data or {}).get("id")))
            if kind is EventKind.APPROVAL_REQUESTED:
                wait: list[float | None] = [ev.at, None]
                self._open[key] = wait
                self.by_node.setdefault(key[0], []).append(wait)
            else:
                settled = self._open.pop(key, None)
                if settled is not None:
                    settled[1] = ev.at


_WAIT_EVENTS = frozenset({EventKind.APPROVAL_REQUESTED, EventKind.APPROVAL_ANSWERED,
                          EventKind.APPROVAL_WITHDRAWN})


class RunView:
    """One run as a page shows it, kept up to date as its events arrive."""

    def __init__(self, record: RunRecord) -> None:
        self.record = record
        self.projector = Projector(RunId(record.run_id))
        self.asked = ApprovalWaits()
        self.story = GoalStory()
        """A goal run's goal, rounds and answer, as ``counterpoint show`` tells them."""
        self._changed = True
        self._shown = shown_status(record)
        self._metrics: dict[str, Any] | None = None
        self._metrics_at = 0.0
        self._metrics_seq = -1
        self._sent: set[NodeId] | None = None
        """The nodes of a large run's subset the page holds (``None``: it holds all)."""

    @property
    def seq(self) -> int:
        """The last event folded in."""
        return self.projector.seq

    def feed(self, events: Iterable[Event], record: RunRecord | None = None) -> None:
        """Fold in new events (and the run's newer index record, if there is one)."""
        before = self.projector.seq
        if record is not None:
            shown = shown_status(record)  # a run whose process died turns interrupted
            if record != self.record or shown != self._shown:
                self.record = record
                self._shown = shown
                self._changed = True
        events = events if isinstance(events, Sequence) else list(events)
        self.projector.feed(events)
        self.asked.feed(events)
        self.story.feed(events)
        self._changed = self._changed or self.projector.seq != before

    def snapshot(self, *, full: bool = False) -> dict[str, Any]:
        """The run: what a page draws when it opens. A large run
        (:func:`~counterpoint.ui.subset.is_large`) is sent as a bounded subset, with
        ``partial`` saying how many of how many nodes, unless ``full``."""
        self.projector.touched.clear()
        self.projector.reshaped = False
        self._changed = False
        self.story.changed = False
        state = self.projector.state
        common = {**self._common(), "goal": self.story.view()}
        if full or not subset.is_large(state):
            self._sent = None
            return {"seq": self.seq, **common,
                    "nodes": [self._node(ns) for ns in state.nodes.values()],
                    "reshaped": True}
        ids, partial = subset.pick(state, common["critical"])
        self._sent = set(ids)
        return {"seq": self.seq, **common,
                "nodes": [self._node(state.nodes[n]) for n in ids],
                "reshaped": True, "partial": partial}

    def update(self) -> dict[str, Any] | None:
        """What changed since the last :meth:`snapshot` or :meth:`update` (every node
        when the graph's shape changed), or ``None`` if nothing did. For a large run's
        subset: the changed nodes still in it, the nodes that joined it, and the ids of
        those that left it (``dropped``)."""
        projector = self.projector
        state = projector.state
        if projector.reshaped:
            return self.snapshot()
        if not self._changed and self._metrics_seq == self.seq:
            return None  # nothing new, and the metrics sent are those of the last event
        touched = projector.touched
        common = self._common()
        sent = self._sent
        if sent is None:
            nodes = [self._node(state.nodes[n]) for n in touched if n in state.nodes]
            extra: dict[str, Any] = {}
        else:
            ids, partial = subset.pick(state, common["critical"])
            now = set(ids)
            fresh = [n for n in ids if n not in sent or n in touched]
            nodes = [self._node(state.nodes[n]) for n in fresh]
            extra = {"dropped": sorted(sent - now), "partial": partial}
            self._sent = now
        touched.clear()
        self._changed = False
        if self.story.changed:  # (a snapshot sends it whole; an update, when it changed)
            extra["goal"] = self.story.view()
            self.story.changed = False
        return {"seq": self.seq, **common, "nodes": nodes, "reshaped": False, **extra}

    def _node(self, ns: NodeState) -> dict[str, Any]:
        return node_view(ns, self.projector.state, self.asked.by_node.get(ns.spec.id, ()))

    def _common(self) -> dict[str, Any]:
        state = self.projector.state
        last = self.projector.last_at
        live = run_owner_alive(self.record)
        now = state.finished_at or (time.time() if live else last)
        clock = time.monotonic()
        ended = not live and self._metrics_seq == self.seq  # nothing new: the same metrics
        if self._metrics is None or (not live and not ended) or \
                len(state.nodes) < SMALL_RUN or clock - self._metrics_at >= METRICS_SECONDS:
            self._metrics = metrics_view(state, now, self.projector.spawned)
            self._metrics_at = clock
            self._metrics_seq = self.seq
        metrics = self._metrics
        return {"run": run_header(self.record, state, last), "metrics": metrics,
                "critical": list(metrics["critical_path_nodes"]),
                "deps_known": self.projector.deps_known,
                "declared": max(self.projector.declared, len(state.nodes))}


_APPROVAL_EVENTS = frozenset({EventKind.APPROVAL_REQUESTED, EventKind.APPROVAL_ANSWERED,
                              EventKind.APPROVAL_ESCALATED, EventKind.APPROVAL_WITHDRAWN})


def _approval(approvals: dict[str, dict[str, Any]], ev: Event) -> None:
    """Fold one approval event of a node into ``approvals`` (by approval id): what was
    asked, its state, and the command that answers it while it is pending."""
    data = ev.data or {}
    aid = str(data.get("id"))
    if ev.kind is EventKind.APPROVAL_REQUESTED:
        approvals[aid] = {"id": aid, "at": ev.at, "attempt": ev.attempt,
                          "question": data.get("question"), "kind": data.get("kind"),
                          "payload": clip(json.dumps(data.get("payload"), ensure_ascii=False,
                                                     default=str)),
                          "status": "pending", "answer_with": f"counterpoint approve {aid}"}
        return
    asked = approvals.setdefault(aid, {"id": aid, "status": "pending"})
    if ev.kind is EventKind.APPROVAL_ANSWERED:
        asked.update(status="approved" if data.get("approved") else "rejected",
                     answered_at=ev.at, by=data.get("by"), reason=data.get("reason"),
                     answer_with=None)
    elif ev.kind is EventKind.APPROVAL_ESCALATED:
        asked.update(escalated_to=data.get("to"))
    else:
        asked.update(status="withdrawn", answer_with=None)


def clip(text: str | None) -> dict[str, Any] | None:
    """A value for the page: whole if short, else its first :data:`PREVIEW_CHARS`."""
    if text is None:
        return None
    return {"text": text[:PREVIEW_CHARS], "size": len(text),
            "clipped": len(text) > PREVIEW_CHARS}


def node_detail(state: RunState, node: NodeId, events: Sequence[Event], *,
                plan_events: Sequence[Event] | None = None) -> dict[str, Any]:
    """Everything recorded about one node: inputs and output (clipped), attempts with their
    errors and tracebacks, model calls, agent turns, tool calls and plan rounds.

    ``events`` is the run's log, or only the node's events if ``plan_events`` (the run's
    ``plan_round`` events) is given."""
    ns = state.nodes[node]
    mine = [ev for ev in events if ev.node == node]
    attempts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    rounds: list[dict[str, Any]] = []
    approvals: dict[str, dict[str, Any]] = {}
    for ev in mine:
        data = ev.data or {}
        if ev.kind in _APPROVAL_EVENTS:
            _approval(approvals, ev)
        elif ev.kind in _ATTEMPT_EVENTS:
            attempts.append({"seq": ev.seq, "at": ev.at, "kind": ev.kind.value,
                             "attempt": ev.attempt, "error": data.get("message"),
                             "type": data.get("type"), "traceback": data.get("traceback"),
                             "reason": data.get("reason"), "final": data.get("final"),
                             "waited": data.get("waited")})
        elif ev.kind is EventKind.MODEL_CALL:
            calls.append({"seq": ev.seq, "at": ev.at, **data})
        elif ev.kind is EventKind.AGENT_TURN:
            turns.append({"seq": ev.seq, "at": ev.at, **data})
        elif ev.kind in (EventKind.TOOL_CALL, EventKind.TOOL_RESULT):
            tools.append({"seq": ev.seq, "at": ev.at, "kind": ev.kind.value, **data})
        elif ev.kind is EventKind.PLAN_ROUND:
            rounds.append({"seq": ev.seq, "at": ev.at, "phase": data.get("phase"),
                           "lines": round_lines(data)})
    view = node_view(ns, state)
    routed = routing_by_node(mine).get(str(node))
    sampled = sampling_by_node(mine).get(str(node))
    return {**view, "output": clip(ns.value),
            "routing": None if routed is None else {**routed.as_dict(), "text": routed.text()},
            "samples": None if sampled is None else {**sampled,
                                                     "text": sampling_line(sampled)},
            "inputs": [{"node": dep, "status": state.nodes[dep].status.value,
                        "value": clip(state.nodes[dep].value)} for dep in ns.spec.deps],
            "history": attempts, "model_calls": calls, "agent_turns": turns,
            "tool_calls": tools, "plan_rounds": rounds, "approvals": list(approvals.values()),
            # the plan's history is the run's: its rounds are recorded by several nodes
            "plan_diffs": plan_diffs([ev.data or {} for ev in (
                events if plan_events is None else plan_events)
                if ev.kind is EventKind.PLAN_ROUND]) if rounds else []}


def plan_diffs(rounds: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The plan after each round that changed it, as lines
    (:func:`~counterpoint.plan_text.plan_tree`), and a unified diff from the plan before.

    A ``plan`` round records the whole plan; an applied ``replan`` records its edits
    (subtasks added, redone with a new task, cancelled), applied here to the plan before.
    """
    out: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for data in rounds:
        phase = data.get("phase")
        plan = data.get("plan")
        if phase == "plan" and isinstance(plan, Mapping) and not data.get("problems"):
            new = dict(plan)
        elif phase == "replan" and data.get("applied") and current is not None:
            edits = data.get("edits") or {}
            gone = set(data.get("cancelled") or edits.get("cancel") or ())
            redo = {r.get("id"): r.get("task") for r in edits.get("redo") or ()}
            subtasks = [{**s, "task": redo.get(s.get("id")) or s.get("task", "")}
                        for s in current.get("subtasks") or () if s.get("id") not in gone]
            new = {**current, "subtasks": [*subtasks, *(edits.get("add") or ())]}
        else:
            continue
        before = plan_tree(current) if current is not None else None
        lines = plan_tree(new)
        diff = [] if before is None else list(difflib.unified_diff(
            before, lines, "plan before", f"after {phase} round {data.get('round', 0)}",
            lineterm="", n=2))
        out.append({"phase": phase, "round": data.get("round"), "lines": lines, "diff": diff})
        current = new
    return out
