"""A run's history as its log records it: the state rebuilt from the events alone,
without importing the graph's code, the status a run is shown with, and ending for good
a run whose process died.

``counterpoint show`` and the web view must work when the file that defined the graph is
gone, so they cannot use :func:`counterpoint.api.replay` (which re-imports the steps).
Instead every node gets a placeholder spec carrying only its dependencies, and the events
are folded in with the core's own :func:`~counterpoint.state.evolve`, so the state (and
the metrics computed from it) mean exactly what they mean for a live run. Map expansions
and live edits are re-applied structurally from their recorded data, since ``evolve``
needs the decoded specs for those.

:class:`Projector` folds events in as they arrive (the web view follows a live run with
one); :func:`project` folds a whole log at once.

Dependencies of the graph's static nodes are known only if ``run_created`` records them
(``data["deps"]``); without them the critical path cannot be computed and
:attr:`Projection.deps_known` is false.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .events import Event, EventKind
from .graph import NodeKind, NodeSpec
from .ids import NodeId, RunId
from .nodes import _new_spec
from .policy import DEFAULT_POLICY
from .state import NodeState, RunState, RunStatus, Spawn, add_specs, spawns_of
from .store import RunRecord, RunStore
from .store.owners import run_owner_alive
from .transitions import evolve


@dataclass(frozen=True, kw_only=True, slots=True)
class Projection:
    """A run's state as far as its log tells, plus what the log could not tell."""

    state: RunState
    deps_known: bool
    """Whether every node's dependencies were recorded (needed for the critical path)."""
    declared: int
    """Nodes the log says the graph has (static, spawned by maps and added by edits)."""
    last_at: float
    """Time of the last recorded event."""
    spawned: Mapping[NodeId, Spawn] = field(default_factory=dict)
    """The nodes live edits added, each with the node whose edit added it (for the
    critical path: :func:`counterpoint.metrics.compute`)."""


def _not_loaded(**_: Any) -> None:
    raise RuntimeError("a node projected from the log has no step; it cannot run")


class Projector:
    """A run's state, folded in from its events as they arrive (in log order).

    :attr:`touched` collects the nodes whose state events changed since the caller last
    cleared it, and :attr:`reshaped` whether the graph's shape changed (a map expanded,
    an edit applied, nodes declared), so a view can send only what changed.
    """

    def __init__(self, run_id: RunId) -> None:
        self.state = RunState(run_id=run_id, graph="?", nodes={})
        self.deps_known = False
        self.declared = 0
        self.last_at = 0.0
        self.seq = 0
        """The ``seq`` of the last event folded in."""
        self.touched: set[NodeId] = set()
        self.reshaped = False
        self.spawned: dict[NodeId, Spawn] = {}
        """The nodes live edits added, and by which node's edit."""

    def feed(self, events: Iterable[Event]) -> Projector:
        """Fold ``events`` (the ones after :attr:`seq`, in order) into the state."""
        state = self.state
        touched = self.touched
        for ev in events:
            kind = ev.kind
            data = ev.data or {}
            if kind is EventKind.RUN_CREATED:
                state.graph = str(data.get("graph", "?"))
                self.declared = int(data.get("nodes") or 0)
                deps = data.get("deps")
                if isinstance(deps, Mapping):
                    self.deps_known = True
                    _add(state, [(NodeId(str(k)), [NodeId(str(d)) for d in v])
                                 for k, v in deps.items()])
                evolve(state, ev)
                self.reshaped = True
            elif kind is EventKind.MAP_EXPANDED:
                self.declared += _expand(state, _node(state, ev.node), int(data.get("count", 0)))
                self.reshaped = True
            elif kind is EventKind.PATCH_APPLIED:
                self.declared += _patch(state, data)
                self.spawned.update(spawns_of(data, ev.at))
                self.reshaped = True
            else:
                if ev.node is not None:
                    if ev.node not in state.nodes:
                        self.reshaped = True
                    touched.add(_node(state, ev.node))
                evolve(state, ev)
            self.seq = ev.seq
            self.last_at = ev.at
        return self

    def projection(self) -> Projection:
        """The state as folded so far."""
        return Projection(state=self.state, deps_known=self.deps_known,
                          declared=max(self.declared, len(self.state.nodes)),
                          last_at=self.last_at, spawned=self.spawned)


def project(run_id: RunId, events: Sequence[Event]) -> Projection:
    """The state of run ``run_id`` after ``events`` (its whole log, in order)."""
    return Projector(run_id).feed(events).projection()


def spawned_by(events: Iterable[Event]) -> dict[NodeId, Spawn]:
    """The nodes live edits added, each with the node whose edit added it, from a log
    (:attr:`Projection.spawned`, for a caller that has the run's state already: pass it
    to :func:`counterpoint.metrics.compute`)."""
    spawned: dict[NodeId, Spawn] = {}
    for ev in events:
        if ev.kind is EventKind.PATCH_APPLIED and ev.data:
            spawned.update(spawns_of(ev.data, ev.at))
    return spawned


def shown_status(record: RunRecord) -> str:
    """The run's status, with ``interrupted`` for a running run whose process is gone."""
    if record.status == RunStatus.RUNNING and not run_owner_alive(record):
        return "interrupted"
    return record.status


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


def _spec(node: NodeId, deps: Iterable[NodeId] = (), kind: NodeKind = NodeKind.TASK) -> NodeSpec:
    """``NodeSpec(id=node, fn=_not_loaded, inputs={}, after=deps, kind=kind)``, made the
    graph builder's fast way: a log of 100,000 nodes makes 100,000 of them."""
    after = tuple(dict.fromkeys(deps))
    return _new_spec(node, _not_loaded, {}, after, DEFAULT_POLICY, kind, None, None, None,
                     False, "", "", None, ((), after))


def _node(state: RunState, node: NodeId | None) -> NodeId:
    """``node``, added without dependencies if the log mentions it before declaring it."""
    assert node is not None
    if node not in state.nodes:
        _add(state, [(node, ())])
    return node


def _add(state: RunState, items: Iterable[tuple[NodeId, Iterable[NodeId]]]) -> None:
    """Add the nodes ``(id, dependencies)`` to ``state``, wired as the run's own state
    is (:func:`~counterpoint.state.add_specs`), with a placeholder for each dependency the
    log has not declared (the graph stays closed even if the log is not)."""
    specs = [_spec(node, deps) for node, deps in items]
    known = set(state.nodes).union(spec.id for spec in specs)
    missing = dict.fromkeys(dep for spec in specs for dep in spec.deps if dep not in known)
    add_specs(state, [*specs, *(_spec(dep) for dep in missing)], count=False)


def _wire(state: RunState, ns: NodeState) -> None:
    ns.unmet = 0
    for dep in ns.spec.deps:
        source = state.nodes[dep]
        source.dependents += (ns.spec.id,)
        if not source.status.terminal:
            ns.unmet += 1


def _unwire(state: RunState, ns: NodeState) -> None:
    for dep in ns.spec.deps:
        source = state.nodes[dep]
        source.dependents = tuple(d for d in source.dependents if d != ns.spec.id)


def _expand(state: RunState, map_id: NodeId, count: int) -> int:
    """What ``map_expanded`` does: ``map[i]`` children take the map's dependencies and the
    map node becomes their join."""
    ns = state.nodes[map_id]
    deps = ns.spec.deps
    children = [NodeId(f"{map_id}[{i}]") for i in range(count)]
    _unwire(state, ns)
    _add(state, [(child, deps) for child in children])
    ns.spec = _spec(map_id, children, NodeKind.JOIN)
    _wire(state, ns)
    return count


def _patch(state: RunState, data: Mapping[str, Any]) -> int:
    """What ``patch_applied`` does to the structure; cancellations follow as their own
    events. Returns the number of nodes added."""
    added = [(NodeId(str(s["id"])), _recorded_deps(s)) for s in data.get("add", ())]
    _add(state, added)
    for s in data.get("replace", ()):
        node = _node(state, NodeId(str(s["id"])))
        ns = state.nodes[node]
        _unwire(state, ns)
        deps = _recorded_deps(s)
        for dep in deps:
            _node(state, dep)
        ns.spec = _spec(node, deps)
        _wire(state, ns)
    for before, after in data.get("edges", ()):
        source = state.nodes[_node(state, NodeId(str(before)))]
        target = state.nodes[_node(state, NodeId(str(after)))]
        if target.spec.id in source.dependents:
            continue
        target.spec = _spec(target.spec.id, (*target.spec.deps, source.spec.id),
                            target.spec.kind)
        source.dependents += (target.spec.id,)
        if not source.status.terminal:
            target.unmet += 1
    state.version += 1
    return len(added)


def _recorded_deps(spec: Mapping[str, Any]) -> list[NodeId]:
    """Dependencies of a spec recorded by :func:`counterpoint.patch.spec_to_data`."""
    seen: dict[NodeId, None] = {}
    for value in (*spec.get("inputs", {}).values(), spec.get("map_over")):
        if isinstance(value, Mapping) and "$ref" in value:
            seen[NodeId(str(value["$ref"]))] = None
    for dep in spec.get("after", ()):
        seen[NodeId(str(dep))] = None
    return list(seen)
