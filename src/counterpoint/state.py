"""The pure scheduling core: run state as data, and plain functions over it.

* :func:`evolve` applies one event to the state (the projection of the log).
* :func:`react` returns the events that follow from an event by the graph's
  rules alone: successors becoming ready, skipped, blocked or cancelled, a map
  node expanding, the run finishing.
* :func:`pick` chooses which ready nodes to start, longest remaining path
  first, within the concurrency and resource limits.
* :func:`check_patch` validates a live edit against the state.

None of them awaits, sleeps, reads a clock or does I/O: time comes in as an
argument. The async executor only launches, awaits, applies and persists.
They mutate the state in place for speed; the state is owned by one run loop.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import PatchError
from .events import (
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
from .graph import Graph, NodeKind, NodeRef, NodeSpec, Topology, find_cycle
from .ids import NodeId, RunId
from .patch import Patch

DEFAULT_ESTIMATE = 1.0
"""Estimated duration of a step never seen before (the unit of upward rank)."""


class NodeStatus(enum.StrEnum):
    """Lifecycle of a node. Terminal statuses never change again."""

    PENDING = "pending"
    READY = "ready"
    RUNNING = "running"
    RETRYING = "retrying"
    """Waiting for its backoff delay before the next attempt."""
    WAITING = "waiting"
    """Waiting on something outside the run (reserved for approvals and external events)."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    BLOCKED = "blocked"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({NodeStatus.SUCCEEDED, NodeStatus.FAILED, NodeStatus.CANCELLED,
                       NodeStatus.SKIPPED, NodeStatus.BLOCKED})
_UNSTARTED = frozenset({NodeStatus.PENDING, NodeStatus.READY})

# Module-level aliases for the hot paths (Enum class attribute access is slow).
PENDING = NodeStatus.PENDING
READY = NodeStatus.READY
RUNNING = NodeStatus.RUNNING
RETRYING = NodeStatus.RETRYING
WAITING = NodeStatus.WAITING
SUCCEEDED = NodeStatus.SUCCEEDED
FAILED = NodeStatus.FAILED
CANCELLED = NodeStatus.CANCELLED
SKIPPED = NodeStatus.SKIPPED
BLOCKED = NodeStatus.BLOCKED


class RunStatus(enum.StrEnum):
    """Lifecycle of a run."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    """The run's deadline passed; finished nodes keep their outputs."""

    @property
    def terminal(self) -> bool:
        return self is not RunStatus.RUNNING


_RUN_RUNNING = RunStatus.RUNNING
_MAP = NodeKind.MAP


@dataclass(slots=True)
class NodeState:
    """Everything the scheduler knows about one node."""

    spec: NodeSpec
    order: int
    """Insertion index: breaks rank ties deterministically."""
    status: NodeStatus = NodeStatus.PENDING
    unmet: int = 0
    """Dependencies not yet in a terminal status."""
    rank: float = 0.0
    """Upward rank: estimated duration of the longest path from this node to a sink."""
    attempt: int = 0
    """Attempts started so far (including attempts interrupted by a crash)."""
    failures: int = 0
    """Attempts that failed; compared against the policy's retries."""
    ready_at: float | None = None
    started_at: float | None = None
    first_started_at: float | None = None
    finished_at: float | None = None
    run_time: float = 0.0
    """Seconds spent running, summed over attempts."""
    first_ready_at: float | None = None
    stopped_at: float | None = None
    """When the attempt that began at ``started_at`` ended (``None``: running or never ran)."""
    earlier: list[tuple[float, float]] | None = None
    """``(start, end)`` of attempts before that one (``None`` while there were none: a
    node that runs once allocates nothing for its history)."""
    output: Any = None
    value: str | None = None
    error: dict[str, Any] | None = None
    chosen: frozenset[str] | None = None
    dependents: tuple[NodeId, ...] = ()
    """Nodes that depend on this one. A tuple, replaced (never mutated) on change, so
    every run of a graph shares the wiring computed for its first run."""
    fell_back: bool = False
    """Whether the node's fallback was called (that attempt is not a retry)."""
    waited: dict[str, float] | None = None
    """Seconds its attempts spent waiting inside their run time, by cause (``thread``:
    for a worker thread; ``model``: for a model's concurrency slot or rate limit), summed
    over attempts; ``None`` while they waited for nothing."""

    @property
    def intervals(self) -> list[tuple[float, float]]:
        """``(start, end)`` of every attempt that ended while this process watched it."""
        out = list(self.earlier) if self.earlier else []
        if self.started_at is not None and self.stopped_at is not None:
            out.append((self.started_at, self.stopped_at))
        return out


@dataclass(slots=True)
class ModelTally:
    """Model calls and their usage, summed: the projection of ``model_call`` events."""

    calls: int = 0
    """Calls the provider answered (cache hits not included)."""
    cache_hits: int = 0
    failed: int = 0
    """Attempts that failed (each retried, fallen back or raised)."""
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0
    """US dollars over the calls whose model has a configured price."""
    unpriced: int = 0
    """Calls to models without a configured price: ``cost`` leaves them out."""

    def add(self, data: dict[str, Any]) -> None:
        if "error" in data:
            self.failed += 1
        elif data.get("cache_hit"):
            self.cache_hits += 1
        elif "input_tokens" in data:
            self.calls += 1
            self.input_tokens += data["input_tokens"]
            self.output_tokens += data["output_tokens"]
            self.cached_tokens += data.get("cached_tokens", 0)
            if data.get("cost") is None:
                self.unpriced += 1
            else:
                self.cost += data["cost"]

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(slots=True)
class RunState:
    """The projection of a run's events."""

    run_id: RunId
    graph: str
    nodes: dict[NodeId, NodeState]
    estimates: Mapping[str, float] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    status: RunStatus = RunStatus.RUNNING
    version: int = 0
    """Number of patches applied."""
    open: int = 0
    """Nodes not yet terminal."""
    running: int = 0
    in_use: dict[str, int] = field(default_factory=dict)
    ready: list[tuple[float, int, NodeId]] = field(default_factory=list)
    created_at: float = 0.0
    finished_at: float | None = None
    stop_reason: str | None = None
    """Why the run is being stopped early: ``cancelled``, ``deadline`` or ``fail_fast``."""
    model_tally: ModelTally | None = None
    """The run's model calls and usage; ``None`` until the first (see :attr:`models`)."""
    node_models: dict[NodeId, ModelTally] = field(default_factory=dict)
    """Model calls and usage per node (only nodes that called a model)."""
    cancel_requested: dict[NodeId, str] = field(default_factory=dict)
    """Nodes an applied edit cancelled -> its reason. A running one ends cancelled when its
    task stops; if the process died first, the resume ends it cancelled (it never re-runs)."""

    @classmethod
    def new(cls, run_id: RunId, graph: str, specs: Iterable[NodeSpec], *,
            estimates: Mapping[str, float] | None = None,
            limits: Mapping[str, int] | None = None) -> RunState:
        """A fresh state holding ``specs`` (all PENDING), with ranks computed."""
        state = cls(run_id=run_id, graph=graph, nodes={}, estimates=estimates or {},
                    limits=limits or {})
        _add_specs(state, specs)
        compute_ranks(state)
        return state

    @classmethod
    def fresh(cls, run_id: RunId, graph: str, topology: Topology, specs: Mapping[NodeId, NodeSpec],
              *, estimates: Mapping[str, float], limits: Mapping[str, int]) -> RunState:
        """Like :meth:`new` for a validated graph, reusing the ranks and wiring computed
        for an earlier run of the same graph while the estimates its ranks used are unchanged
        (nodes with an explicit ``estimate`` use none)."""
        cache = topology.cache
        keys = cache.get("estimated_steps")
        if keys is None:  # the steps whose learned estimates the ranks depend on
            keys = cache["estimated_steps"] = tuple(sorted(
                {specs[n].step_key for n in topology.order if specs[n].estimate is None}))
        used = tuple([estimates.get(k) for k in keys]) if keys else ()
        wiring = cache.get("wiring")
        if wiring is None:  # (spec, unmet, dependents) in topological order: never changes
            model = cls.new(run_id, graph, [specs[n] for n in topology.order],
                            estimates=estimates, limits=limits)
            wiring = cache["wiring"] = [(ns.spec, ns.unmet, ns.dependents)
                                        for ns in model.nodes.values()]
            cache["ranks"] = (used, [ns.rank for ns in model.nodes.values()])
        ranked = cache["ranks"]
        if ranked[0] != used:  # the estimates moved: new ranks over the same wiring
            ranked = cache["ranks"] = (used, _ranks([(spec, dependents) for spec, _, dependents
                                                     in wiring], estimates))
        placed = cache.get("placed")
        if placed is None:  # wiring rows in the order the nodes were added, with that index
            position = {node: i for i, node in enumerate(specs)}
            placed = cache["placed"] = sorted(
                ((position[row[0].id], w) for w, row in enumerate(wiring)))
        ranks = ranked[1]
        nodes = {}
        for i, w in placed:  # ties in rank go in the order the nodes were added
            spec, unmet, dependents = wiring[w]
            nodes[spec.id] = NodeState(spec, i, PENDING, unmet, ranks[w], dependents=dependents)
        return cls(run_id=run_id, graph=graph, nodes=nodes, estimates=estimates,
                   limits=limits, open=len(nodes))

    @property
    def models(self) -> ModelTally:
        """The run's model calls and usage (all zero for a run that called no model)."""
        return self.model_tally or ModelTally()

    def node(self, node: NodeId) -> NodeState:
        return self.nodes[node]

    def specs(self) -> dict[NodeId, NodeSpec]:
        return {k: v.spec for k, v in self.nodes.items()}


def _add_specs(state: RunState, specs: Iterable[NodeSpec]) -> list[NodeId]:
    added: list[NodeId] = []
    nodes = state.nodes
    for spec in specs:
        nodes[spec.id] = NodeState(spec=spec, order=len(nodes))
        added.append(spec.id)
    for node_id in added:
        ns = nodes[node_id]
        unmet = 0
        for dep in ns.spec.deps:
            dep_state = nodes[dep]
            dep_state.dependents += (node_id,)
            if dep_state.status not in TERMINAL:
                unmet += 1
        ns.unmet = unmet
    state.open += len(added)
    return added


def _ranks(rows: list[tuple[NodeSpec, tuple[NodeId, ...]]],
           estimates: Mapping[str, float]) -> list[float]:
    """Upward ranks (HEFT) of nodes given as (spec, dependents) in topological order: a
    node's estimated duration plus the highest rank among its dependents."""
    index = {row[0].id: i for i, row in enumerate(rows)}
    ranks = [0.0] * len(rows)
    for i in range(len(rows) - 1, -1, -1):  # every dependent comes later in the list
        spec, dependents = rows[i]
        best = 0.0
        for nxt in dependents:
            rank = ranks[index[nxt]]
            if rank > best:
                best = rank
        own = spec.estimate
        ranks[i] = (own if own is not None else estimates.get(spec.step_key,
                                                               DEFAULT_ESTIMATE)) + best
    return ranks


def compute_ranks(state: RunState) -> None:
    """Upward rank of every node over estimated durations (HEFT), then rebuild the ready heap."""
    nodes = state.nodes
    listed = list(nodes.values())
    seen: set[NodeId] = set()
    for ns in listed:  # a new run lists its nodes in topological order: one pass tells
        if not seen.issuperset(ns.spec.deps):
            order = [nodes[node_id] for node_id in _topological(state)]
            break
        seen.add(ns.spec.id)
    else:
        order = listed
    ranks = _ranks([(ns.spec, ns.dependents) for ns in order], state.estimates)
    for ns, rank in zip(order, ranks, strict=True):
        ns.rank = rank
    state.ready = [(-ns.rank, ns.order, ns.spec.id) for ns in nodes.values()
                   if ns.status is READY]
    heapq.heapify(state.ready)


def _topological(state: RunState) -> list[NodeId]:
    # Hand-written rather than graphlib.TopologicalSorter: on the run state of the
    # 100,000-node L1 graph this took 0.28 s and graphlib's static_order 1.56 s (best of
    # five, 2026-12-01), and it runs again whenever a map expands or an edit lands.
    nodes = state.nodes
    indegree = {k: len(v.spec.deps) for k, v in nodes.items()}
    stack = [k for k, d in indegree.items() if d == 0]
    order: list[NodeId] = []
    while stack:
        node = stack.pop()
        order.append(node)
        for nxt in nodes[node].dependents:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                stack.append(nxt)
    return order


# --------------------------------------------------------------------------- evolve
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
        if ns.status is RUNNING:
            _stop_running(state, ns, event.at)
        ns.output = event.output
        ns.value = event.value
        ns.error = None  # earlier attempts' failures stay in the log
        data = event.data
        if data:
            if "chosen" in data:
                ns.chosen = frozenset(data["chosen"])
            if "waited" in data:
                _add_waits(ns, data["waited"])
        _finish(state, ns, SUCCEEDED, event.at)
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
    elif kind in _FINISHING:
        ns = state.nodes[event.node]  # type: ignore[index]
        if ns.status is RUNNING:
            _stop_running(state, ns, event.at)
        ns.error = event.data
        _finish(state, ns, _FINISHING[kind], event.at)
    elif kind is MAP_EXPANDED:
        _expand_map(state, event)
    elif kind is PATCH_APPLIED:
        _apply_patch(state, event.output)
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
    elif kind is MODEL_CALL and event.data is not None:
        if state.model_tally is None:
            state.model_tally = ModelTally()
        state.model_tally.add(event.data)
        if event.node is not None:
            tally = state.node_models.get(event.node)
            if tally is None:
                tally = state.node_models[event.node] = ModelTally()
            tally.add(event.data)


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


_FINISHING = {
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
    ns.status = status
    ns.finished_at = at
    state.open -= 1
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


def _interrupt(state: RunState) -> None:
    """A resumed run: whatever was in flight or queued starts over from PENDING."""
    in_use = state.in_use  # shared with the other runs of a run tree: release only ours
    for ns in state.nodes.values():
        if ns.status in (RUNNING, READY, RETRYING):
            if ns.status is RUNNING:
                for name, units in ns.spec.policy.resources.items():
                    in_use[name] -= units
            ns.status = PENDING
            if ns.stopped_at is not None:
                _keep_attempt(ns)
            ns.started_at = None
    state.running = 0
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
    for i in range(count):
        item = NodeRef(spec.map_over.node, (*spec.map_over.path, i))
        children.append(NodeSpec(
            id=NodeId(f"{map_id}[{i}]"), fn=spec.fn,
            inputs={**spec.inputs, spec.map_param: item}, after=spec.after,
            policy=spec.policy, kind=kind, context_param=spec.context_param,
            is_async=subgraph or spec.is_async, step_key=spec.step_key, where=spec.where,
            estimate=spec.estimate, spawned_by=map_id))
    _add_specs(state, children)
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
    _add_specs(state, patch.add)  # first: a replaced node may depend on a node added here
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


# --------------------------------------------------------------------------- react
def react(state: RunState, event: Event, now: float) -> list[Event]:
    """Events implied by ``event`` (already applied) under the graph's rules."""
    kind = event.kind
    out: list[Event] = []
    if kind is NODE_SUCCEEDED:
        ns = state.nodes[event.node]  # type: ignore[index]
        if ns.chosen is None:
            _settle(state, ns.dependents, now, out)
        else:
            for dep in ns.dependents:
                if dep not in ns.chosen and state.nodes[dep].status in _UNSTARTED:
                    out.append(Event(NODE_SKIPPED, now, dep,
                                     data={"reason": f"not chosen by {ns.spec.id!r}"}))
            _settle(state, [d for d in ns.dependents if d in ns.chosen], now, out)
    elif kind is NODE_FAILED:
        if event.data and event.data.get("final"):
            _propagate(state, event.node, now, out)  # type: ignore[arg-type]
    elif kind in _FINISHING:
        _propagate(state, event.node, now, out)  # type: ignore[arg-type]
    elif kind is MAP_EXPANDED:
        ns = state.nodes[event.node]  # type: ignore[index]
        _settle(state, [*ns.spec.after, ns.spec.id], now, out)
    elif kind is PATCH_APPLIED:
        patch: Patch = event.output
        for node in patch.cancel:
            if state.nodes[node].status in (PENDING, READY,
                                            RETRYING, WAITING):
                out.append(Event(NODE_CANCELLED, now, node,
                                 data={"reason": patch.reason or "cancelled by an edit"}))
        _settle(state, patch.touched, now, out)
    elif kind is RUN_CREATED:
        _settle(state, list(state.nodes), now, out)
    elif kind is RUN_RESUMED:
        # an edit's cancels whose node_cancelled did not reach the log (the node was
        # running, and the process died before its task stopped) end now: never re-run
        doomed = {n for n in state.cancel_requested if state.nodes[n].status not in TERMINAL}
        for node in doomed:
            out.append(Event(NODE_CANCELLED, now, node,
                             data={"reason": state.cancel_requested[node]}))
        _settle(state, [n for n in state.nodes if n not in doomed], now, out)
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
        if dep.status not in _UNSTARTED:
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
            _settle(state, [dep_id], now, out)


def _settle(state: RunState, candidates: Iterable[NodeId], now: float,
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
    assert spec.map_over is not None
    source = state.nodes[spec.map_over.node]
    try:
        items = spec.map_over.resolve(source.output)
    except (KeyError, IndexError, TypeError) as exc:
        items = exc
    if not isinstance(items, list | tuple):
        got = type(items).__name__
        return Event(NODE_FAILED, now, spec.id, data={
            "final": True, "type": "TypeError", "retryable": False,
            "message": f"map node {spec.id!r} needs a list from {spec.map_over.node!r}, "
                       f"got {got}; return a list from that step or map over a part of "
                       "its output (over=ref['key'])"})
    return Event(MAP_EXPANDED, now, spec.id, data={"count": len(items)})


# --------------------------------------------------------------------------- pick
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


# --------------------------------------------------------------------------- patches
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
                raise PatchError(f"{where}: node {spec.id!r} depends on unknown node {dep!r}")
    for spec in patch.replace:
        ns = nodes.get(spec.id)
        if ns is None:
            raise PatchError(f"{where}: cannot replace unknown node {spec.id!r}")
        if ns.status not in _UNSTARTED or ns.attempt or ns.spec.kind is NodeKind.JOIN:
            raise PatchError(f"{where}: cannot replace node {spec.id!r}: it is {ns.status} "
                             "(only nodes that have not started can be replaced)")
    for before, after in patch.edges:
        for end in (before, after):
            if end not in known:
                raise PatchError(f"{where}: edge {before!r} -> {after!r} names unknown "
                                 f"node {end!r}")
        target = nodes.get(after)
        if target is not None and (target.status not in _UNSTARTED or target.attempt):
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
