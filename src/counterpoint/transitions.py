"""How one event changes a run's state: :func:`evolve`, the only way the state changes.

Pure and deterministic: replaying a run's log through :func:`evolve` rebuilds its state
(:mod:`counterpoint.state` holds the data it changes).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .board.projection import apply_to
from .events import (
    APPROVAL_ANSWERED,
    APPROVAL_REQUESTED,
    APPROVAL_WITHDRAWN,
    BOARD_EVENTS,
    MAP_EXPANDED,
    MODEL_CALL,
    NODE_BLOCKED,
    NODE_CANCELLED,
    NODE_FAILED,
    NODE_READY,
    NODE_SKIPPED,
    NODE_STARTED,
    NODE_SUCCEEDED,
    PATCH_APPLIED,
    RUN_CREATED,
    RUN_FINISHED,
    RUN_RESUMED,
    RUN_STOPPING,
    Event,
)
from .graph import Graph, NodeKind, NodeRef, NodeSpec
from .ids import NodeId
from .patch import Patch, edit_made
from .state import (
    BLOCKED,
    CANCELLED,
    FAILED,
    PENDING,
    READY,
    RETRYING,
    RUNNING,
    SKIPPED,
    SUCCEEDED,
    TERMINAL,
    WAITING,
    ModelTally,
    NodeState,
    NodeStatus,
    RunState,
    RunStatus,
    add_specs,
    compute_ranks,
    estimate_of,
    spawns_of,
)

_RUN_RUNNING = RunStatus.RUNNING
_MAP = NodeKind.MAP


def evolve(state: RunState, event: Event) -> None:
    """Apply one event to the state. Deterministic; the only way the state changes."""
    kind = event.kind
    if kind is NODE_STARTED:
        start_node(state, state.nodes[event.node], event.at, event.attempt)  # type: ignore[index]
    elif kind is NODE_READY:
        ns = state.nodes[event.node]  # type: ignore[index]
        ns.status = READY
        ns.ready_at = event.at
        if ns.first_ready_at is None:
            ns.first_ready_at = event.at
        heapq.heappush(state.ready, (-ns.rank, ns.order, ns.spec.id))
    elif kind is NODE_SUCCEEDED:
        ns = state.nodes[event.node]  # type: ignore[index]
        data = event.data
        if data:
            if "chosen" in data:
                ns.chosen = frozenset(data["chosen"])
            if "waited" in data:
                _add_waits(ns, data["waited"])
            if "reused" in data:
                ns.reused = True
        succeed(state, ns, event.at, event.output, event.value)
    elif kind is NODE_FAILED:
        ns = state.nodes[event.node]  # type: ignore[index]
        if ns.status is RUNNING:
            _stop_running(state, ns, event.at)
        ns.failures += 1
        ns.error = event.data
        if event.data:
            if event.data.get("fallback"):
                ns.fell_back = True
            if "waited" in event.data:
                _add_waits(ns, event.data["waited"])
        if event.data and event.data.get("final"):
            _finish(state, ns, FAILED, event.at)
        else:
            ns.status = RETRYING
    elif kind in FINISHING:
        ns = state.nodes[event.node]  # type: ignore[index]
        if ns.status is RUNNING:
            _stop_running(state, ns, event.at)
        ns.error = event.data
        _finish(state, ns, FINISHING[kind], event.at)
    elif kind is MAP_EXPANDED:
        _expand_map(state, event)
    elif kind is PATCH_APPLIED:
        _apply_patch(state, event.output)
        if event.data and event.data.get("by"):  # made by a node's step (ctx.apply):
            state.spawned.update(spawns_of(event.data, event.at))  # its nodes follow it
            _remember_edit(state, event.data)  # and its re-runs make it again
    elif kind is RUN_CREATED:
        state.created_at = event.at
        state.status = RunStatus.RUNNING
    elif kind is RUN_RESUMED:
        _interrupt(state)
    elif kind is RUN_STOPPING:
        state.stop_reason = str((event.data or {}).get("reason", "cancelled"))
    elif kind is RUN_FINISHED:
        state.status = RunStatus((event.data or {}).get("status", RunStatus.FAILED))
        state.finished_at = event.at
    elif kind is APPROVAL_REQUESTED:
        _wait(state, event)
    elif kind is APPROVAL_ANSWERED or kind is APPROVAL_WITHDRAWN:
        _unwait(state, event)
    elif kind is MODEL_CALL and event.data is not None:
        if state.model_tally is None:
            state.model_tally = ModelTally()
        state.model_tally.add(event.data)
        if event.node is not None:
            tally = state.node_models.get(event.node)
            if tally is None:
                tally = state.node_models[event.node] = ModelTally()
            tally.add(event.data)
    elif kind in BOARD_EVENTS:
        apply_to(state, event)


def succeed(state: RunState, ns: NodeState, at: float, output: Any, value: str | None
            ) -> None:
    """Apply a ``node_succeeded`` event of ``ns`` (at ``at``) without the event, apart from
    its ``data``: what :func:`evolve` does with one, for the scheduler's fused success path
    (:mod:`counterpoint.scheduler.success`)."""
    if ns.status is RUNNING:
        _stop_running(state, ns, at)
    ns.output = output
    ns.value = value
    ns.error = None  # earlier attempts' failures stay in the log
    _finish(state, ns, SUCCEEDED, at)


def _wait(state: RunState, event: Event) -> None:
    """A running node asks a person: it is WAITING, and gives its slot and resources up."""
    ns = state.nodes.get(event.node)  # type: ignore[arg-type]
    if ns is None or ns.attempt != event.attempt or ns.status not in (RUNNING, WAITING):
        return  # asked by an attempt that has ended since (a late record)
    state.asking.setdefault(ns.spec.id, set()).add((event.data or {})["id"])
    if ns.status is RUNNING:
        ns.status = WAITING
        state.running -= 1
        for name, units in ns.spec.policy.resources.items():
            state.in_use[name] -= units


def _unwait(state: RunState, event: Event) -> None:
    """An approval a node waited for is settled: once it waits for none, it runs again."""
    node = event.node
    asking = state.asking.get(node)  # type: ignore[arg-type]
    if asking is None:
        return
    asking.discard((event.data or {})["id"])
    if asking:
        return
    del state.asking[node]  # type: ignore[arg-type]
    ns = state.nodes[node]  # type: ignore[index]
    if ns.status is WAITING:
        ns.status = RUNNING
        state.running += 1  # it may go over the limit for a moment: it is already started
        _acquire(state, ns.spec)


def _add_waits(ns: NodeState, waited: Mapping[str, float]) -> None:
    totals = ns.waited
    if totals is None:
        totals = ns.waited = {}
    for cause, seconds in waited.items():
        totals[cause] = totals.get(cause, 0.0) + float(seconds)


def start_node(state: RunState, ns: NodeState, at: float, attempt: int) -> None:
    """Apply a ``node_started`` event of ``ns`` (at ``at``, attempt ``attempt``) without
    the event: what :func:`evolve` does with one, for a dispatch that makes the event only
    when it logs it."""
    if ns.status is not READY:  # its node_ready was not logged: ready as it started
        ns.ready_at = at
        if ns.first_ready_at is None:
            ns.first_ready_at = at
    ns.status = RUNNING
    ns.attempt = attempt
    if ns.stopped_at is not None:
        _keep_attempt(ns)
    ns.started_at = at
    if ns.first_started_at is None:
        ns.first_started_at = at
    state.running += 1
    if ns.spec.policy.resources:
        _acquire(state, ns.spec)


FINISHING = {
    NODE_CANCELLED: CANCELLED,
    NODE_SKIPPED: SKIPPED,
    NODE_BLOCKED: BLOCKED,
}


def _stop_running(state: RunState, ns: NodeState, at: float) -> None:
    state.running -= 1
    if ns.started_at is not None:
        ns.run_time += at - ns.started_at
        ns.stopped_at = at
    resources = ns.spec.policy.resources
    if resources:
        for name, units in resources.items():
            state.in_use[name] -= units


def _acquire(state: RunState, spec: NodeSpec) -> None:
    resources = spec.policy.resources
    if resources:
        for name, units in resources.items():
            state.in_use[name] = state.in_use.get(name, 0) + units


def _finish(state: RunState, ns: NodeState, status: NodeStatus, at: float) -> None:
    if ns.status in TERMINAL:
        return
    if state.asking:  # a WAITING node that ends (cancelled) waits for nothing more
        state.asking.pop(ns.spec.id, None)
    ns.status = status
    ns.finished_at = at
    state.open -= 1
    # max: the sum of floats taken away one by one may end a hair below zero
    state.remaining = max(0.0, state.remaining - estimate_of(ns.spec, state.estimates))
    nodes = state.nodes
    for dep in ns.dependents:
        nodes[dep].unmet -= 1


def _keep_attempt(ns: NodeState) -> None:
    """Move the ended attempt ``(started_at, stopped_at)`` into ``earlier``."""
    interval = (ns.started_at, ns.stopped_at)
    if ns.earlier is None:
        ns.earlier = [interval]  # type: ignore[list-item]
    else:
        ns.earlier.append(interval)  # type: ignore[arg-type]
    ns.stopped_at = None


def _remember_edit(state: RunState, data: Mapping[str, Any]) -> None:
    """Keep the edit a node's step made (by its attempt now running): see ``EditMade``."""
    by = NodeId(str(data["by"]))
    editor = state.nodes.get(by)
    if state.edits is None:
        state.edits = {}
    state.edits.setdefault(by, []).append(
        edit_made(data, editor.attempt if editor is not None else 0))


def _interrupt(state: RunState) -> None:
    """A resumed run: whatever was in flight or queued starts over from PENDING. A node
    waiting out a retry's backoff stays RETRYING: the execution re-arms what is left of
    its delay (``Attempts.resume_backoffs``)."""
    in_use = state.in_use  # shared with the other runs of a run tree: release only ours
    for ns in state.nodes.values():
        if ns.status in (RUNNING, READY, WAITING):
            if ns.status is RUNNING:
                ns.interrupted += 1
                for name, units in ns.spec.policy.resources.items():
                    in_use[name] -= units
            ns.status = PENDING
            if ns.stopped_at is not None:
                _keep_attempt(ns)
            ns.started_at = None
    state.running = 0
    state.asking.clear()  # the asks are asked again by the nodes' next attempts
    state.ready.clear()
    state.status = RunStatus.RUNNING
    state.finished_at = None
    # a stop that was under way when the process died is finished by the resume


def _expand_map(state: RunState, event: Event) -> None:
    map_id: NodeId = event.node  # type: ignore[assignment]
    ns = state.nodes[map_id]
    spec = ns.spec
    count = int((event.data or {})["count"])
    assert spec.map_over is not None and spec.map_param is not None
    subgraph = isinstance(spec.fn, Graph)  # each item runs the sub-graph as a nested run
    kind = NodeKind.GRAPH if subgraph else NodeKind.TASK
    children: list[NodeSpec] = []
    inputs = spec.inputs  # a dict made on each access
    for i in range(count):
        item = NodeRef(spec.map_over.node, (*spec.map_over.path, i))
        children.append(NodeSpec(
            id=NodeId(f"{map_id}[{i}]"), fn=spec.fn,
            inputs={**inputs, spec.map_param: item}, after=spec.after,
            policy=spec.policy, kind=kind, context_param=spec.context_param,
            is_async=subgraph or spec.is_async, step_key=spec.step_key, where=spec.where,
            estimate=spec.estimate, spawned_by=map_id))
    add_specs(state, children)
    for dep in spec.deps:  # the join depends on the spawned nodes only
        _unlink(state.nodes[dep], map_id)
    join = NodeSpec(id=map_id, fn=spec.fn, inputs={}, after=tuple(c.id for c in children),
                    kind=NodeKind.JOIN, step_key="counterpoint:join", where=spec.where)
    ns.spec = join
    for child in children:
        state.nodes[child.id].dependents += (map_id,)
    ns.unmet = count
    compute_ranks(state)


def _unlink(ns: NodeState, dependent: NodeId) -> None:
    """``dependent`` no longer depends on ``ns`` (its first listing removed)."""
    deps = list(ns.dependents)
    deps.remove(dependent)
    ns.dependents = tuple(deps)


def _apply_patch(state: RunState, patch: Patch) -> None:
    nodes = state.nodes
    for node in patch.cancel:
        state.cancel_requested[node] = patch.reason or "cancelled by an edit"
    add_specs(state, patch.add)  # first: a replaced node may depend on a node added here
    for spec in patch.replace:
        ns = nodes[spec.id]
        for dep in ns.spec.deps:
            _unlink(nodes[dep], spec.id)
        ns.spec = spec
        ns.unmet = 0
        for dep in spec.deps:
            nodes[dep].dependents += (spec.id,)
            if nodes[dep].status not in TERMINAL:
                ns.unmet += 1
        if ns.status is READY:  # re-judged by react: its new dependencies may have failed
            ns.status = PENDING
    for before, after in patch.edges:
        target = nodes[after]
        target.spec = replace(target.spec, after=(*target.spec.after, before))
        if after not in nodes[before].dependents:
            nodes[before].dependents += (after,)
            if nodes[before].status not in TERMINAL:
                target.unmet += 1
        if target.status is READY:  # re-judged by react: ``before`` may have failed
            target.status = PENDING
    state.version += 1
    compute_ranks(state)
