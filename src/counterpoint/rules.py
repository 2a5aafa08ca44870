"""The graph's rules over a run's state: what follows from an event, what starts next,
which edits are valid.

* :func:`react`: the events an applied event implies (successors ready, skipped,
  blocked or cancelled; a map expanding; the run finishing);
* :func:`pick`: the ready nodes to start now, highest upward rank first, within the
  free slots and resources;
* :func:`check_patch`: whether a live edit can be applied as a whole.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .errors import PatchError
from .events import (
    MAP_EXPANDED,
    NODE_BLOCKED,
    NODE_CANCELLED,
    NODE_FAILED,
    NODE_READY,
    NODE_SKIPPED,
    NODE_SUCCEEDED,
    PATCH_APPLIED,
    RUN_CREATED,
    RUN_FINISHED,
    RUN_RESUMED,
    Event,
)
from .graph import NodeKind, find_cycle
from .ids import NodeId
from .patch import Patch
from .state import (
    BLOCKED,
    CANCELLED,
    FAILED,
    PENDING,
    READY,
    RETRYING,
    SKIPPED,
    SUCCEEDED,
    TERMINAL,
    UNSTARTED,
    WAITING,
    NodeState,
    RunState,
    RunStatus,
)
from .transitions import FINISHING

if TYPE_CHECKING:
    from .nodes import NodeSpec

_RUN_RUNNING = RunStatus.RUNNING
_MAP = NodeKind.MAP
_TASK = NodeKind.TASK


def react(state: RunState, event: Event, now: float) -> list[Event]:
    """Events implied by ``event`` (already applied) under the graph's rules."""
    kind = event.kind
    out: list[Event] = []
    if kind is NODE_SUCCEEDED:
        ns = state.nodes[event.node]  # type: ignore[index]
        if ns.chosen is None:
            settle(state, ns.dependents, now, out)
        else:
            for dep in ns.dependents:
                if dep not in ns.chosen and state.nodes[dep].status in UNSTARTED:
                    out.append(Event(NODE_SKIPPED, now, dep,
                                     data={"reason": f"not chosen by {ns.spec.id!r}"}))
            settle(state, [d for d in ns.dependents if d in ns.chosen], now, out)
    elif kind is NODE_FAILED:
        if event.data and event.data.get("final"):
            _propagate(state, event.node, now, out)  # type: ignore[arg-type]
    elif kind in FINISHING:
        _propagate(state, event.node, now, out)  # type: ignore[arg-type]
    elif kind is MAP_EXPANDED:
        ns = state.nodes[event.node]  # type: ignore[index]
        settle(state, [*ns.spec.after, ns.spec.id], now, out)
    elif kind is PATCH_APPLIED:
        patch: Patch = event.output
        for node in patch.cancel:
            if state.nodes[node].status in (PENDING, READY,
                                            RETRYING, WAITING):
                out.append(Event(NODE_CANCELLED, now, node,
                                 data={"reason": patch.reason or "cancelled by an edit"}))
        settle(state, patch.touched, now, out)
    elif kind is RUN_CREATED:
        settle(state, list(state.nodes), now, out)
    elif kind is RUN_RESUMED:
        # an edit's cancels whose node_cancelled did not reach the log (the node was
        # running, and the process died before its task stopped) end now: never re-run
        doomed = {n for n in state.cancel_requested if state.nodes[n].status not in TERMINAL}
        for node in doomed:
            out.append(Event(NODE_CANCELLED, now, node,
                             data={"reason": state.cancel_requested[node]}))
        settle(state, [n for n in state.nodes if n not in doomed], now, out)
    if state.open == 0 and state.status is _RUN_RUNNING and not out \
            and kind is not RUN_FINISHED:
        out.append(Event(RUN_FINISHED, now, data={"status": final_status(state)}))
    return out


def final_status(state: RunState) -> RunStatus:
    """The status a run ends with, given its nodes and why it was stopped."""
    if state.stop_reason == "cancelled":
        return RunStatus.CANCELLED
    if state.stop_reason == "deadline":
        return RunStatus.TIMED_OUT
    for ns in state.nodes.values():
        if ns.status is FAILED or ns.status is BLOCKED:
            return RunStatus.FAILED
    return RunStatus.SUCCEEDED


def _propagate(state: RunState, node: NodeId, now: float, out: list[Event]) -> None:
    """Dependents of a node that ended without success end too (blocked, cancelled, skipped)."""
    ns = state.nodes[node]
    status = ns.status
    for dep_id in ns.dependents:
        dep = state.nodes[dep_id]
        if dep.status not in UNSTARTED:
            continue
        if status is FAILED or status is BLOCKED:
            cause = (ns.error or {}).get("cause", node) if status is BLOCKED else node
            message = (ns.error or {}).get("message", "")
            out.append(Event(NODE_BLOCKED, now, dep_id,
                             data={"cause": cause, "message": message}))
        elif status is CANCELLED:
            reason = (ns.error or {}).get("reason", "")
            text = f"upstream {node!r} cancelled: {reason}".rstrip(": ")
            out.append(Event(NODE_CANCELLED, now, dep_id, data={"reason": text}))
        elif node in dep.spec.data_deps():
            out.append(Event(NODE_SKIPPED, now, dep_id,
                             data={"reason": f"input {node!r} was skipped"}))
        elif dep.unmet == 0 and dep.status is PENDING:
            settle(state, [dep_id], now, out)


def settle(state: RunState, candidates: Iterable[NodeId], now: float,
            out: list[Event]) -> None:
    """Decide, for pending nodes whose dependencies are all terminal, what happens next."""
    nodes = state.nodes
    for node_id in candidates:
        ns = nodes[node_id]
        if ns.unmet or ns.status is not PENDING:
            continue
        verdict = _verdict(state, ns, now)
        if verdict is not None:
            out.append(verdict)
        elif ns.spec.kind is _MAP:
            out.append(_expansion(state, ns, now))
        else:
            out.append(Event(NODE_READY, now, node_id))


def ready_after(state: RunState, ns: NodeState, now: float, out: list[Event]
                ) -> list[NodeState]:
    """What :func:`react` does with ``ns``'s success (applied, with no choice), without
    the ``node_ready`` events: returns the dependents now ready (tasks whose inputs all
    succeeded without a choice), which the caller makes READY; the events for any other
    dependent whose inputs have all ended go to ``out``, as :func:`settle` gives them."""
    nodes = state.nodes
    ready: list[NodeState] = []
    for dep in ns.dependents:
        d = nodes[dep]
        if d.unmet or d.status is not PENDING:
            continue
        if d.spec.kind is _TASK:
            for source in d.spec.deps:
                s = nodes[source]
                if s.status is not SUCCEEDED or s.chosen is not None:
                    break
            else:
                ready.append(d)
                continue
        settle(state, (dep,), now, out)
    return ready


def _verdict(state: RunState, ns: NodeState, now: float) -> Event | None:
    """The non-success end a node must take given its (terminal) dependencies, if any."""
    nodes = state.nodes
    node_id = ns.spec.id
    chosen_as = ns.spec.spawned_by or node_id  # a map's items go where the map was sent
    data_deps: set[NodeId] | None = None
    for dep_id in ns.spec.deps:
        dep = nodes[dep_id]
        status = dep.status
        if status is SUCCEEDED:
            if dep.chosen is not None and chosen_as not in dep.chosen:
                return Event(NODE_SKIPPED, now, node_id,
                             data={"reason": f"not chosen by {dep_id!r}"})
            continue
        if status is FAILED or status is BLOCKED:
            cause = (dep.error or {}).get("cause", dep_id) if status is BLOCKED \
                else dep_id
            return Event(NODE_BLOCKED, now, node_id,
                         data={"cause": cause, "message": (dep.error or {}).get("message", "")})
        if status is CANCELLED:
            return Event(NODE_CANCELLED, now, node_id,
                         data={"reason": f"upstream {dep_id!r} cancelled"})
        if status is SKIPPED:
            if data_deps is None:
                data_deps = ns.spec.data_deps()
            if dep_id in data_deps:
                return Event(NODE_SKIPPED, now, node_id,
                             data={"reason": f"input {dep_id!r} was skipped"})
    return None


def _expansion(state: RunState, ns: NodeState, now: float) -> Event:
    spec = ns.spec
    over = spec.map_over
    assert over is not None
    source = state.nodes[over.node]
    try:
        items = over.resolve(source.output)
    except (KeyError, IndexError, TypeError) as exc:
        items = exc
    if not isinstance(items, list | tuple):
        return Event(NODE_FAILED, now, spec.id, data={
            "final": True, "type": "TypeError", "retryable": False,
            "message": _not_a_list(spec, items)})
    return Event(MAP_EXPANDED, now, spec.id, data={"count": len(items)})


def _not_a_list(spec: NodeSpec, items: object) -> str:
    """Why a map node cannot expand, in the words of the file it was written in: a
    workflow's ``map: ${steps.ID.output.KEY}`` (paths as ``.KEY``), a Python graph's
    ``over=ref['KEY']``."""
    over = spec.map_over
    assert over is not None
    yaml = spec.where.rpartition(":")[0].endswith((".yaml", ".yml"))
    source = f"step {over.node!r}" if yaml else repr(over.node)
    path = "".join(f".{key}" if yaml else f"[{key!r}]" for key in over.path)
    part = f"the output of {source}" + (f" at {path}" if path else "")
    if isinstance(items, Exception):
        got = f"{part}, which is not there ({type(items).__name__}: {items})"
    else:
        got = f"{part}, which is {_a(type(items).__name__)}, not a list"
    step = over.node if "." not in over.node else "ID"  # a.b: a node of the workflow's own
    fix = f"map: ${{steps.{step}.output.KEY}}" if yaml else "over=ref['key']"
    return (f"{spec.where + ': ' if spec.where else ''}{'step' if yaml else 'map node'} "
            f"{spec.id!r} maps over {got}; return a list from {source}, or map over a part "
            f"of its output that is a list ({fix})")


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def pick(state: RunState, slots: int) -> list[NodeId]:
    """Up to ``slots`` ready nodes to start now, highest upward rank first.

    A node whose resources are exhausted is passed over (it stays ready), so a
    busy resource never holds back nodes that do not need it.
    """
    heap = state.ready
    nodes = state.nodes
    limits = state.limits
    if len(heap) <= slots and not limits:  # every ready node starts: sort once, no pops
        entries = sorted(heap)  # the order successive pops would give (entries are unique)
        heap.clear()
        return [e[2] for e in entries if nodes[e[2]].status is READY]
    chosen: list[NodeId] = []
    deferred: list[tuple[float, int, NodeId]] = []
    in_use = dict(state.in_use) if limits else state.in_use
    while heap and len(chosen) < slots:
        entry = heapq.heappop(heap)
        ns = nodes[entry[2]]
        if ns.status is not READY:
            continue
        resources = ns.spec.policy.resources
        if resources and limits:
            if any(in_use.get(r, 0) + u > limits[r] for r, u in resources.items()
                   if r in limits):
                deferred.append(entry)
                continue
            for r, u in resources.items():
                in_use[r] = in_use.get(r, 0) + u
        chosen.append(entry[2])
    for entry in deferred:
        heapq.heappush(heap, entry)
    return chosen


def check_patch(state: RunState, patch: Patch) -> None:
    """Raise :class:`PatchError` unless ``patch`` can be applied to ``state`` as a whole."""
    where = f"run {state.run_id}"
    if state.status.terminal:
        raise PatchError(f"{where}: the run has finished ({state.status}); it cannot be edited")
    if patch.expected_version is not None and patch.expected_version != state.version:
        raise PatchError(f"{where}: edit was based on graph version {patch.expected_version}, "
                         f"but the graph is at version {state.version}; re-read and retry")
    nodes = state.nodes
    new_ids = {s.id for s in patch.add}
    if len(new_ids) != len(patch.add):
        raise PatchError(f"{where}: the edit adds the same node id twice")
    for spec in patch.add:
        if spec.id in nodes:
            raise PatchError(f"{where}: node {spec.id!r} already exists; use replace()")
    known = nodes.keys() | new_ids
    for spec in (*patch.add, *patch.replace):
        for dep in spec.deps:
            if dep not in known:
                raise PatchError(f"{where}: node {spec.id!r}" + (
                    f" (added at {spec.where})" if spec.where else "") +
                    f" depends on unknown node {dep!r}; add it in the same edit, or "
                    "name a node of the run")
    for spec in patch.replace:
        ns = nodes.get(spec.id)
        if ns is None:
            raise PatchError(f"{where}: cannot replace unknown node {spec.id!r}")
        if ns.status not in UNSTARTED or ns.attempt or ns.spec.kind is NodeKind.JOIN:
            raise PatchError(f"{where}: cannot replace node {spec.id!r}: it is {ns.status} "
                             "(only nodes that have not started can be replaced)")
    for before, after in patch.edges:
        for end in (before, after):
            if end not in known:
                raise PatchError(f"{where}: edge {before!r} -> {after!r} names unknown "
                                 f"node {end!r}")
        target = nodes.get(after)
        if target is not None and (target.status not in UNSTARTED or target.attempt):
            raise PatchError(f"{where}: cannot add edge {before!r} -> {after!r}: {after!r} "
                             f"is {target.status}; only nodes that have not started gain "
                             "dependencies")
    for node in patch.cancel:
        ns = nodes.get(node)
        if ns is None:
            raise PatchError(f"{where}: cannot cancel unknown node {node!r}")
        if ns.status in TERMINAL:
            raise PatchError(f"{where}: cannot cancel node {node!r}: it already "
                             f"{ns.status}; finished nodes are immutable")
    if patch.add or patch.edges or patch.replace:
        deps: dict[NodeId, tuple[NodeId, ...]] = {k: v.spec.deps for k, v in nodes.items()}
        for spec in (*patch.add, *patch.replace):
            deps[spec.id] = spec.deps
        for before, after in patch.edges:
            deps[after] = (*deps[after], before)
        cycle = find_cycle(deps)
        if cycle:
            raise PatchError(f"{where}: the edit would create a cycle: {' -> '.join(cycle)}")
