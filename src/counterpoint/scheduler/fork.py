"""Forks: a new run that starts from a prefix of another run's log and reuses its outputs.

:func:`prepare_fork` reads the parent run's log, decides which of its recorded node
successes still hold, and writes the new run's first events: its ``run_created`` (with
``forked_from``), a copy of every reused success with the events its node recorded on
the way (model calls, agent turns, tool calls; each marked ``reused`` with the parent's
run and event number), the live edits and map expansions that the reused part of the
graph depends on, and the replacements asked for. Then the run goes on like a resumed
one: whatever was not reused runs. The new log is self-contained (``counterpoint show``
and ``resume`` need nothing of the parent) and the parent's log is never touched.

Which outputs are reused:

* ``at=SEQ`` keeps the parent's events ``1..SEQ``: nodes whose success is among them
  are reused; nodes that were running at ``SEQ`` run again.
* ``at=NODE`` forks just before ``NODE`` started: ``NODE`` and everything downstream of
  it run again, every other recorded success is reused (independent branches keep
  their outputs even if they finished later). A map node runs again with its items.
* ``replace={node: step}`` gives a node a new step (a live edit in the new log), and
  ``replace={node: value}`` gives it an output without running it; ``inputs={...}``
  changes graph inputs. Either way the node (or every node reading a changed input)
  and everything downstream of it run again.
* A live edit of the parent is kept unless the node that made it (``ctx.apply``) runs
  again: that node makes it again. (In a log that does not record who made an edit, it
  is kept if no node that runs again was running when it was made.)

Failures, skips and cancellations are not copied: the graph's rules derive them again
from the reused outputs, and failed nodes run again.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .. import codec
from ..backend import DEFAULT_BACKEND, Backend
from ..errors import ForkError, PatchError, SourceError, UserError
from ..events import (
    INFORMATIONAL,
    MAP_EXPANDED,
    NODE_SUCCEEDED,
    PATCH_APPLIED,
    RUN_CREATED,
    RUN_RESUMED,
    Event,
)
from ..graph import Graph, InputRef, NodeKind
from ..ids import NodeId, RunId, new_run_id
from ..loader import load_recorded, make_resolver, source_record
from ..options import RunOptions
from ..patch import Edit, patch_to_data
from ..rules import check_patch
from ..state import RETRYING, RUNNING, SUCCEEDED, RunState
from ..store import RunStore
from ..transitions import evolve
from .execution import Execution, check_inputs
from .replay import decode

__all__ = ["prepare_fork"]


class _Parent:
    """The parent's log read up to the fork point, with what the fork needs to know."""

    def __init__(self, graph: Graph, run_id: RunId, events: list[Event]) -> None:
        self.state = RunState.new(run_id, graph.name, graph.nodes.values())
        self.events = events
        self.running_at: dict[int, frozenset[NodeId]] = {}
        """For each live edit (by seq): the nodes running when it was made."""
        self.map_source: dict[NodeId, NodeId] = {}
        resolver = make_resolver(graph, run_id)
        state = self.state
        for ev in events:
            kind = ev.kind
            if kind is PATCH_APPLIED:
                self.running_at[ev.seq] = frozenset(
                    n for n, ns in state.nodes.items() if ns.status in (RUNNING, RETRYING))
            elif kind is MAP_EXPANDED:
                over = state.nodes[ev.node].spec.map_over  # type: ignore[index]
                if over is not None:
                    self.map_source[ev.node] = over.node  # type: ignore[index]
            decode(state, ev, resolver)
            evolve(state, ev)

    def downstream(self, seeds: Iterable[NodeId]) -> set[NodeId]:
        """``seeds`` and every node that depends on one of them, transitively."""
        nodes = self.state.nodes
        stack = list(seeds)
        for node in seeds:
            spec = nodes[node].spec
            if spec.kind is NodeKind.JOIN:  # a map forked at runs again with its items
                stack.extend(c for c in spec.after if nodes[c].spec.spawned_by == node)
        out: set[NodeId] = set()
        while stack:
            node = stack.pop()
            if node not in out:
                out.add(node)
                stack.extend(nodes[node].dependents)
        return out


def prepare_fork(parent: RunId, store: RunStore, *, at: int | str | None = None,
                 replace: Mapping[str, Any] | None = None,
                 inputs: Mapping[str, Any] | None = None, graph: Graph | None = None,
                 options: RunOptions | None = None, backend: Backend | None = None,
                 run_id: str | None = None) -> tuple[Execution, Event]:
    """A fork of ``parent`` ready to execute (its first events already appended to
    ``store``) and the event that starts it. See the module docstring.

    Raises :class:`~counterpoint.errors.ForkError` (a :class:`UserError`) before anything
    is written if the fork point, a replaced node or an input is wrong.
    """
    where = f"fork of run {parent}"
    record = store.run(parent)  # RunNotFound names the store
    events = store.events(parent)
    try:
        the_graph = graph or load_recorded(record.source, parent,
                                           (events[0].data or {}).get("deps"))
    except SourceError as exc:
        hint = " (fork takes graph= as resume does)" if "graph=" in str(exc) else ""
        raise SourceError(f"cannot fork: {exc}{hint}") from None
    topology = the_graph.validate()
    recorded = record.source.get("fingerprint")
    if graph is not None and recorded and graph.fingerprint() != recorded:
        raise ForkError(f"{where}: graph {graph.name!r} differs from the one the run "
                        "recorded (other nodes, steps or edges); fork with the graph it "
                        "ran, and change a node's step with replace=")
    cut = _cut(events, at, where)
    created = events[0].data or {} if events else {}
    old_inputs = {k: codec.decode(v) for k, v in (created.get("inputs") or {}).items()}
    new_inputs = {**old_inputs, **(inputs or {})}
    opts = options or RunOptions.from_data(record.options)
    try:
        new_inputs = dict(check_inputs(the_graph, new_inputs, opts))
    except UserError as exc:
        raise ForkError(f"{where}: {exc}") from None
    seen = _Parent(the_graph, parent, events[:cut])
    nodes = seen.state.nodes
    seeds: set[NodeId] = set()
    at_node: NodeId | None = None
    if isinstance(at, str):
        at_node = _known(NodeId(at), nodes, where, "--at")
        seeds.add(at_node)
    changes = dict(replace or {})
    for name in changes:
        node = _known(NodeId(name), nodes, where, "--replace")
        if nodes[node].spec.kind in (NodeKind.MAP, NodeKind.JOIN):
            raise ForkError(f"{where}: node {node!r} is a map; replace the step of one of "
                            f"its items ({node}[0], ...) or fork at it instead")
        seeds.add(node)
    changed = {k for k in new_inputs if codec.encode(new_inputs[k]) !=
               codec.encode(old_inputs.get(k))}
    seeds.update(n for n, ns in nodes.items() if changed and any(  # (wires: InputRefs as given)
        isinstance(v, InputRef) and v.name in changed for v in ns.spec.wires.values()))
    invalid = seen.downstream(seeds)
    rid = RunId(run_id) if run_id else new_run_id()
    now = time.time()
    state = RunState.new(rid, the_graph.name, the_graph.nodes.values(),
                         estimates=store.estimates(), limits=opts.limits)
    deps = {n: list(the_graph.nodes[n].deps) for n in topology.order}
    data: dict[str, Any] = {
        "graph": the_graph.name,
        "source": source_record(the_graph) if graph is not None else dict(record.source),
        "options": opts.as_data(), "nodes": len(the_graph.nodes), "deps": deps,
        "forked_from": {"run": parent, "seq": cut, "node": at_node,
                        "replaced": sorted(changes), "inputs": sorted(changed)}}
    if new_inputs:
        data["inputs"] = {k: codec.encode(v) for k, v in new_inputs.items()}
    first = Event(RUN_CREATED, now, data=data)
    written = [first]
    evolve(state, first)
    _copy(seen, state, invalid, seeds, parent, now, written)
    for name, step in changes.items():
        written.append(_replacement(state, the_graph, NodeId(name), step, now, where))
        evolve(state, written[-1])
    for seq, ev in enumerate(written, 1):
        ev.seq = seq
    store.append_many(rid, written)  # one batch: the SQLite store commits it as a whole
    execution = Execution(the_graph, state, store, opts,
                          backend=backend or opts.backend or DEFAULT_BACKEND, inputs=new_inputs,
                          seq=len(written))
    return execution, Event(RUN_RESUMED, now, data={"pid": os.getpid(), "fork": True})


def _cut(events: list[Event], at: int | str | None, where: str) -> int:
    """How many of the parent's events the fork reads."""
    last = events[-1].seq if events else 0
    if isinstance(at, bool) or not isinstance(at, int):
        return last
    if not 1 <= at <= last:
        raise ForkError(f"{where}: --at {at} is out of range: the run has events 1..{last} "
                        "so far; pass an event number in that range or a node id")
    return at


def _known(node: NodeId, nodes: Mapping[NodeId, Any], where: str, option: str) -> NodeId:
    if node not in nodes:
        listed = ", ".join(list(nodes)[:12]) + (" ..." if len(nodes) > 12 else "")
        raise ForkError(f"{where}: {option} names node {node!r}, which the run does not have "
                        f"(at the fork point); its nodes: {listed}")
    return node


def _copy(seen: _Parent, state: RunState, invalid: set[NodeId], seeds: set[NodeId],
          parent: RunId, now: float, written: list[Event]) -> None:
    """Copy into ``written`` (and apply to ``state``) the parent's events that the fork
    keeps. A map's expansion is kept when the list it maps over is reused and the fork is
    not made at the map itself (its items then exist, and only the changed ones re-run)."""
    done: set[NodeId] = set()
    rerun = invalid | {n for n, ns in seen.state.nodes.items() if ns.status is not SUCCEEDED}
    told: dict[tuple[NodeId, int], list[Event]] = {}
    parent_nodes = seen.state.nodes
    for ev in seen.events:
        kind = ev.kind
        node = ev.node
        if kind in INFORMATIONAL:
            if node is not None:
                told.setdefault((node, ev.attempt), []).append(ev)
            continue
        if kind is PATCH_APPLIED:
            data = ev.data or {}
            if "by" in data:  # made by that node's step (None: from outside the run)
                keep = data["by"] is None or data["by"] not in rerun
            else:  # an older log: kept if no node that runs again was running then
                keep = seen.running_at[ev.seq].isdisjoint(rerun)
            if keep and _applies(state, ev):
                _keep(ev, state, parent, now, written)
        elif kind is MAP_EXPANDED:
            source = seen.map_source.get(node)  # type: ignore[arg-type]
            if node in state.nodes and node not in seeds and source in done:
                _keep(ev, state, parent, now, written)
        elif kind is NODE_SUCCEEDED and node not in invalid and node in state.nodes:
            assert node is not None
            ns = state.nodes[node]
            if any(d not in done and parent_nodes[d].status is SUCCEEDED
                   for d in ns.spec.deps if d in parent_nodes):
                invalid.add(node)  # an input it read is not reused here
                continue
            for said in told.pop((node, ev.attempt), ()):
                _keep(said, state, parent, now, written)
            _keep(ev, state, parent, now, written)
            done.add(node)


def _applies(state: RunState, ev: Event) -> bool:
    """Whether the parent's live edit ``ev`` applies to the fork as it stands (it may name
    nodes that an edit left out of the fork added)."""
    try:
        check_patch(state, ev.output)
    except PatchError:
        return False
    return True


def _keep(ev: Event, state: RunState, parent: RunId, now: float,
          written: list[Event]) -> None:
    copy = Event(ev.kind, now, ev.node, ev.attempt,
                 {**(ev.data or {}), "reused": {"run": parent, "seq": ev.seq}}, ev.value,
                 ev.output)
    evolve(state, copy)
    written.append(copy)


def _replacement(state: RunState, graph: Graph, node: NodeId, step: Any, now: float,
                 where: str) -> Event:
    """The event that replaces ``node``: a live edit giving it ``step``, or (for a value
    that is not callable) its success with that value as output."""
    if node not in state.nodes:
        raise ForkError(f"{where}: node {node!r} exists only once its map expands again in "
                        "the fork; replace it in a fork made after the map expanded")
    spec = state.nodes[node].spec
    if not callable(step) and not isinstance(step, Graph):
        try:
            value = codec.encode(step)
        except UserError as exc:
            raise ForkError(f"{where}: the value given for node {node!r}: {exc}") from None
        except Exception as exc:
            raise ForkError(f"{where}: the value given for node {node!r} cannot be stored "
                            f"as JSON ({exc})") from None
        return Event(NODE_SUCCEEDED, now, node, data={"given": True}, value=value,
                     output=step)
    fn: Callable[..., Any] | Graph = step
    edit = Edit(f"replaced when forked ({where})")
    edit.replace(node, fn, inputs=dict(spec.inputs), after=spec.after, policy=spec.policy)
    try:
        patch = edit.build(graph.name, state.specs(), graph.inputs)
        check_patch(state, patch)
    except PatchError as exc:  # the graph's own words, without the edit's location
        reason = re.sub(r"^\S+:\d+: ", "", str(exc.__cause__ or exc))
        raise ForkError(f"{where}: cannot replace node {node!r}: {reason}") from None
    patch = dataclasses.replace(patch, replace=tuple(  # it stands where the node was defined
        dataclasses.replace(s, where=spec.where) for s in patch.replace))
    return Event(PATCH_APPLIED, now, data={**patch_to_data(patch), "version": state.version + 1},
                 output=patch)
