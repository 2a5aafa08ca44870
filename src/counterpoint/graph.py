"""The task-graph model: nodes, data and ordering edges, and the builder API.

A :class:`Graph` is a plain description. Nothing runs when it is built; every
structural mistake (duplicate or missing ids, unknown inputs, annotated type
mismatches, cycles) is reported as a :class:`~counterpoint.errors.GraphError`
that names the graph, the node and the line where it was added.
"""

from __future__ import annotations

import enum
import hashlib
import inspect
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, overload

from .annotations import is_assignable, item_type, resolved_hints, return_type, type_name
from .errors import GraphError
from .ids import NodeId
from .policy import DEFAULT_POLICY, Backoff, Policy

F = TypeVar("F", bound=Callable[..., Any])

_POLICY_ATTR = "__counterpoint_policy__"
_RESERVED_ID_CHARS = "[]/"


class NodeKind(enum.StrEnum):
    """What executing a node means."""

    TASK = "task"
    """Call the node's step function with its inputs."""
    MAP = "map"
    """Spawn one task per item of a list input at run time, then join their outputs."""
    JOIN = "join"
    """Collect the outputs of a map's spawned tasks into a list (created at run time)."""
    GRAPH = "graph"
    """Run a sub-graph as a nested run; its output is the sub-graph's output."""


@dataclass(frozen=True, slots=True)
class NodeRef:
    """The (future) output of a node, usable as another node's input.

    Index it to pass part of an output: ``ref["key"]`` or ``ref[0]``. Use
    :meth:`or_none` for an input that may be skipped by a branch.
    """

    node: NodeId
    path: tuple[str | int, ...] = ()
    optional: bool = False
    owner: int | None = field(default=None, compare=False)

    def __getitem__(self, key: str | int) -> NodeRef:
        return replace(self, path=(*self.path, key))

    def or_none(self) -> NodeRef:
        """This input receives ``None`` instead of being skipped when the source is skipped."""
        return replace(self, optional=True)

    def resolve(self, value: Any) -> Any:
        """Apply this reference's index path to the source node's output."""
        for key in self.path:
            value = value[key]
        return value


@dataclass(frozen=True, slots=True)
class InputRef:
    """A named input of a graph, supplied by ``run(graph, inputs=...)`` or a parent graph."""

    name: str


def ref(node: str, *path: str | int) -> NodeRef:
    """A reference to a node by id, for builders that add nodes in any order."""
    return NodeRef(NodeId(node), tuple(path))


@dataclass(frozen=True, slots=True)
class Choose:
    """Return this from a node to run only the named successors; the others are skipped."""

    successors: tuple[str, ...]
    value: Any = None

    def __init__(self, *successors: str, value: Any = None) -> None:
        object.__setattr__(self, "successors", successors)
        object.__setattr__(self, "value", value)


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeSpec:
    """One node of a graph: what to run, with which inputs, after what, under which policy."""

    id: NodeId
    fn: Callable[..., Any] | Graph
    inputs: Mapping[str, Any]
    """Parameter name -> literal value, :class:`NodeRef` or :class:`InputRef`."""
    after: tuple[NodeId, ...] = ()
    """Ordering-only dependencies (no data flows)."""
    policy: Policy = DEFAULT_POLICY
    kind: NodeKind = NodeKind.TASK
    map_over: NodeRef | None = None
    map_param: str | None = None
    context_param: str | None = None
    is_async: bool = False
    step_key: str = ""
    """``module:qualname`` of the step, used for duration estimates and to re-import on resume."""
    where: str = ""
    """``file:line`` where the node was added, for error messages."""
    estimate: float | None = None
    """Expected duration in seconds; overrides the estimate learned for the step."""
    spawned_by: NodeId | None = None
    """For an item spawned by a map at run time: the map's id (branch choices name it)."""
    deps: tuple[NodeId, ...] = ()
    """All dependencies, data and ordering, in a stable order (derived)."""
    refs: tuple[tuple[str, NodeRef | InputRef], ...] = field(default=(), init=False,
                                                             repr=False, compare=False)
    """The inputs that are not literals, as (parameter, reference), in order (derived)."""

    def __post_init__(self) -> None:
        seen: dict[NodeId, None] = {}
        refs: list[tuple[str, NodeRef | InputRef]] = []
        for name, value in self.inputs.items():
            if isinstance(value, NodeRef):
                seen[value.node] = None
                refs.append((name, value))
            elif isinstance(value, InputRef):
                refs.append((name, value))
        object.__setattr__(self, "refs", tuple(refs))
        if self.map_over is not None:
            seen[self.map_over.node] = None
        for dep in self.after:
            seen[dep] = None
        object.__setattr__(self, "deps", tuple(seen))

    def data_deps(self) -> set[NodeId]:
        """Dependencies whose output this node consumes and that skip it when skipped."""
        deps = {v.node for v in self.inputs.values() if isinstance(v, NodeRef) and not v.optional}
        if self.map_over is not None:
            deps.add(self.map_over.node)
        return deps


def step_key(fn: Callable[..., Any] | Graph) -> str:
    """``module:qualname`` naming a callable (or ``graph:name`` for a sub-graph)."""
    if isinstance(fn, Graph):
        return f"graph:{fn.name}"
    module = getattr(fn, "__module__", None) or type(fn).__module__
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{qualname}"


def step(
    fn: F | None = None,
    *,
    retries: int | None = None,
    timeout: float | None = None,
    backoff: Backoff | None = None,
    fallback: Callable[..., Any] | None = None,
    resources: Mapping[str, int] | None = None,
) -> Any:
    """Attach a default :class:`Policy` to a step function: ``@step(retries=3, timeout=10)``."""

    def attach(target: F) -> F:
        base: Policy = getattr(target, _POLICY_ATTR, DEFAULT_POLICY)
        setattr(target, _POLICY_ATTR, _merge_policy(base, retries, timeout, backoff, fallback,
                                                     resources))
        return target

    return attach(fn) if fn is not None else attach


def _merge_policy(
    base: Policy,
    retries: int | None,
    timeout: float | None,
    backoff: Backoff | None,
    fallback: Callable[..., Any] | None,
    resources: Mapping[str, int] | None,
) -> Policy:
    changes: dict[str, Any] = {}
    if retries is not None:
        changes["retries"] = retries
    if timeout is not None:
        changes["timeout"] = timeout
    if backoff is not None:
        changes["backoff"] = backoff
    if fallback is not None:
        changes["fallback"] = fallback
    if resources is not None:
        changes["resources"] = dict(resources)
    return replace(base, **changes) if changes else base


def _caller_location(depth: int) -> str:
    frame = sys._getframe(depth + 1)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


@dataclass(frozen=True, slots=True)
class GraphSource:
    """Where a graph was defined, so that a resumed run can rebuild it."""

    module: str
    file: str | None
    name: str


class Graph:
    """A task graph under construction.

    >>> g = Graph("trip")
    >>> a = g.add("fetch", fetch, city="Paris")       # doctest: +SKIP
    >>> c = g.add("compare", compare, a=a, b=b)       # doctest: +SKIP

    Nodes are identified by stable string ids. Inputs are literals or other
    nodes' outputs (:class:`NodeRef`); ``after=`` adds ordering-only edges.
    """

    def __init__(self, name: str) -> None:
        if not name or not isinstance(name, str):
            raise GraphError("Graph name must be a non-empty string")
        self.name = name
        self.nodes: dict[NodeId, NodeSpec] = {}
        self.inputs: dict[str, Any] = {}
        self.output_ref: NodeRef | None = None
        caller = sys._getframe(1).f_globals
        self.source = GraphSource(module=str(caller.get("__name__", "__main__")),
                                  file=caller.get("__file__"), name=name)
        self._compiled: tuple[int, Topology] | None = None
        self._version = 0
        self._any_owner = False  # set on the scratch graph that builds live edits
        self._fingerprint: tuple[int, str] | None = None

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, nodes={len(self.nodes)})"

    # ----------------------------------------------------------------- building
    def input(self, name: str, annotation: Any = Any) -> InputRef:
        """Declare a named input of this graph, supplied at run time."""
        self.inputs[name] = annotation
        return InputRef(name)

    def output(self, node: NodeRef) -> None:
        """Make ``node``'s output the graph's output (default: the sink nodes' outputs)."""
        self._check_ref_owner(node, "output", "the graph output")
        self.output_ref = node

    def add(
        self,
        id: str,
        fn: Callable[..., Any] | Graph,
        /,
        *,
        after: Iterable[NodeRef | str] = (),
        policy: Policy | None = None,
        retries: int | None = None,
        timeout: float | None = None,
        fallback: Callable[..., Any] | None = None,
        resources: Mapping[str, int] | None = None,
        estimate: float | None = None,
        inputs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> NodeRef:
        """Add a node that calls ``fn`` (a function or a sub-:class:`Graph`) with ``inputs``.

        Inputs may be given as keyword arguments or, when a parameter name
        collides with an option here, through ``inputs={...}``. ``estimate``
        (seconds) tells the scheduler how long the node should take, where the
        duration learned for its step would be wrong. Returns a reference to
        the node's output.
        """
        where = _caller_location(1)
        merged = {**(inputs or {}), **kwargs}
        spec = self._build_spec(id, fn, merged, after, policy,
                                (retries, timeout, fallback, resources), where,
                                estimate=estimate)
        self._insert(spec)
        return NodeRef(spec.id, owner=id_of(self))

    def map(
        self,
        id: str,
        fn: Callable[..., Any],
        /,
        *,
        over: NodeRef,
        item: str | None = None,
        after: Iterable[NodeRef | str] = (),
        policy: Policy | None = None,
        retries: int | None = None,
        timeout: float | None = None,
        fallback: Callable[..., Any] | None = None,
        resources: Mapping[str, int] | None = None,
        estimate: float | None = None,
        inputs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> NodeRef:
        """Run ``fn`` once per item of ``over``'s list output, spawning the nodes at run time.

        The spawned nodes are ``id[0]``, ``id[1]``, ...; node ``id`` itself joins
        them and outputs the list of their outputs, in order. ``item`` names the
        parameter that receives the item (default: the first parameter not
        given in ``inputs``).
        """
        where = _caller_location(1)
        if not isinstance(over, NodeRef):
            raise GraphError(f"{where}: graph {self.name!r}, node {id!r}: map(over=...) takes a "
                             f"node reference (the value returned by Graph.add), got "
                             f"{type(over).__name__}")
        merged = {**(inputs or {}), **kwargs}
        params = _parameters(fn)
        param = item
        if param is None:
            free = [p for p in params if p not in merged and p != _context_param(fn)]
            if not free:
                raise GraphError(f"{where}: graph {self.name!r}, node {id!r}: {step_key(fn)} has "
                                 "no parameter left to receive the mapped item; name one with "
                                 "item=")
            param = free[0]
        spec = self._build_spec(id, fn, merged, after, policy,
                                (retries, timeout, fallback, resources), where,
                                map_over=over, map_param=param, estimate=estimate)
        self._insert(spec)
        return NodeRef(spec.id, owner=id_of(self))

    @overload
    def step(self, fn: F, /) -> F: ...
    @overload
    def step(self, fn: None = None, /, *, id: str | None = None, retries: int | None = None,
             timeout: float | None = None, fallback: Callable[..., Any] | None = None,
             resources: Mapping[str, int] | None = None,
             after: Iterable[NodeRef | str] = ()) -> Callable[[F], F]: ...

    def step(self, fn: Any = None, /, *, id: str | None = None, retries: int | None = None,
             timeout: float | None = None, fallback: Callable[..., Any] | None = None,
             resources: Mapping[str, int] | None = None,
             after: Iterable[NodeRef | str] = ()) -> Any:
        """Decorator sugar: add the function as a node named after it.

        Each parameter is wired to the node of the same name if one exists, else
        to the graph input of that name, else to its default value.
        """
        where = _caller_location(1)

        def register(target: F) -> F:
            node_id = id or target.__name__
            wired: dict[str, Any] = {}
            ctx = _context_param(target)
            for name, param in inspect.signature(target).parameters.items():
                if name == ctx or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                    continue
                if name in self.nodes:
                    wired[name] = NodeRef(NodeId(name), owner=id_of(self))
                elif name in self.inputs:
                    wired[name] = InputRef(name)
                elif param.default is param.empty:
                    raise GraphError(
                        f"{where}: graph {self.name!r}, step {node_id!r}: parameter {name!r} "
                        f"matches no node or graph input; add node {name!r} first, declare "
                        f"g.input({name!r}), or give the parameter a default")
            spec = self._build_spec(node_id, target, wired, after, None,
                                    (retries, timeout, fallback, resources), where)
            self._insert(spec)
            return target

        return register(fn) if fn is not None else register

    # --------------------------------------------------------------- internals
    def _build_spec(
        self,
        id: str,
        fn: Callable[..., Any] | Graph,
        inputs: dict[str, Any],
        after: Iterable[NodeRef | str],
        policy: Policy | None,
        overrides: tuple[int | None, float | None, Callable[..., Any] | None,
                         Mapping[str, int] | None],
        where: str,
        map_over: NodeRef | None = None,
        map_param: str | None = None,
        estimate: float | None = None,
    ) -> NodeSpec:
        spec = self._check_spec(id, fn, inputs, after, policy, overrides, where, map_over,
                                map_param)
        if estimate is None:
            return spec
        return replace(spec, estimate=_check_estimate(estimate, where, self.name, id))

    def _check_spec(
        self,
        id: str,
        fn: Callable[..., Any] | Graph,
        inputs: dict[str, Any],
        after: Iterable[NodeRef | str],
        policy: Policy | None,
        overrides: tuple[int | None, float | None, Callable[..., Any] | None,
                         Mapping[str, int] | None],
        where: str,
        map_over: NodeRef | None,
        map_param: str | None,
    ) -> NodeSpec:
        label = f"{where}: graph {self.name!r}, node {id!r}"
        if not isinstance(id, str) or not id or any(c in id for c in _RESERVED_ID_CHARS):
            raise GraphError(f"{label}: node ids must be non-empty strings without "
                             f"{_RESERVED_ID_CHARS!r}")
        if id in self.nodes:
            raise GraphError(f"{label}: duplicate node id (first added at "
                             f"{self.nodes[NodeId(id)].where}); choose another id")
        if not (callable(fn) or isinstance(fn, Graph)):
            raise GraphError(f"{label}: expected a function or a Graph, got {type(fn).__name__}")
        ordering: list[NodeId] = []
        for item in after:
            if isinstance(item, NodeRef):
                self._check_ref_owner(item, id, "after=")
                ordering.append(item.node)
            else:
                ordering.append(NodeId(str(item)))
        for name, value in inputs.items():
            if isinstance(value, NodeRef):
                self._check_ref_owner(value, id, f"input {name!r}")
            elif isinstance(value, InputRef) and value.name not in self.inputs:
                raise GraphError(f"{label}: input {name!r} refers to graph input "
                                 f"{value.name!r}, which is not declared; call "
                                 f"g.input({value.name!r}) first")
        if isinstance(fn, Graph):
            return self._subgraph_spec(NodeId(id), fn, inputs, tuple(ordering), policy,
                                       overrides, where)
        base: Policy = policy if policy is not None else getattr(fn, _POLICY_ATTR,
                                                                 DEFAULT_POLICY)
        retries, timeout, fallback, resources = overrides
        ctx = _context_param(fn)
        self._check_signature(label, fn, inputs, map_param, ctx)
        self._check_types(label, fn, inputs, map_over, map_param)
        return NodeSpec(
            id=NodeId(id), fn=fn, inputs=dict(inputs), after=tuple(ordering),
            policy=_merge_policy(base, retries, timeout, None, fallback, resources),
            kind=NodeKind.MAP if map_over is not None else NodeKind.TASK,
            map_over=map_over, map_param=map_param, context_param=ctx,
            is_async=inspect.iscoroutinefunction(fn)
            or inspect.iscoroutinefunction(getattr(fn, "__call__", None)),  # noqa: B004
            step_key=step_key(fn), where=where)

    def _subgraph_spec(self, id: NodeId, sub: Graph, inputs: dict[str, Any],
                       after: tuple[NodeId, ...], policy: Policy | None,
                       overrides: tuple[int | None, float | None, Callable[..., Any] | None,
                                        Mapping[str, int] | None], where: str) -> NodeSpec:
        label = f"{where}: graph {self.name!r}, node {id!r}"
        if sub is self:
            raise GraphError(f"{label}: a graph cannot contain itself")
        unknown = sorted(set(inputs) - set(sub.inputs))
        if unknown:
            raise GraphError(f"{label}: sub-graph {sub.name!r} has no input(s) {unknown}; "
                             f"declared inputs: {sorted(sub.inputs) or 'none'}")
        missing = sorted(set(sub.inputs) - set(inputs))
        if missing:
            raise GraphError(f"{label}: sub-graph {sub.name!r} needs input(s) {missing}")
        retries, timeout, fallback, resources = overrides
        return NodeSpec(id=id, fn=sub, inputs=dict(inputs), after=after,
                        policy=_merge_policy(policy or DEFAULT_POLICY, retries, timeout, None,
                                             fallback, resources),
                        kind=NodeKind.GRAPH, is_async=True, step_key=step_key(sub), where=where)

    def _check_ref_owner(self, value: NodeRef, node: str, what: str) -> None:
        if value.owner is not None and value.owner != id_of(self) and not self._any_owner:
            raise GraphError(f"graph {self.name!r}, node {node!r}: {what} refers to node "
                             f"{value.node!r} of another graph; pass a node of this graph, "
                             "or wrap the other graph as a sub-graph node")

    def _check_signature(self, label: str, fn: Callable[..., Any], inputs: Mapping[str, Any],
                         map_param: str | None, ctx: str | None) -> None:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return
        params = sig.parameters
        takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
        for name in inputs:
            if name not in params and not takes_kwargs:
                raise GraphError(f"{label}: {step_key(fn)} has no parameter {name!r}; its "
                                 f"parameters are {list(params)}")
            if name == ctx:
                raise GraphError(f"{label}: parameter {name!r} receives the node context; "
                                 "it cannot also be an input")
        for name, param in params.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name == ctx:
                continue
            if param.kind is param.POSITIONAL_ONLY:
                raise GraphError(f"{label}: {step_key(fn)} has positional-only parameter "
                                 f"{name!r}; steps receive inputs by name")
            if param.default is param.empty and name not in inputs and name != map_param:
                raise GraphError(f"{label}: {step_key(fn)} requires input {name!r}; pass "
                                 f"{name}=<value or node>")

    def _check_types(self, label: str, fn: Callable[..., Any], inputs: Mapping[str, Any],
                     map_over: NodeRef | None, map_param: str | None) -> None:
        hints = resolved_hints(fn)
        for name, value in inputs.items():
            expected = hints.get(name)
            if expected is None or not isinstance(value, NodeRef) or value.path:
                continue
            produced = self._output_type(value.node)
            if value.optional:
                produced = produced | None
            if not is_assignable(produced, expected):
                raise GraphError(f"{label}: input {name!r} expects {type_name(expected)} but "
                                 f"node {value.node!r} returns {type_name(produced)}")
        if map_over is not None and map_param is not None and not map_over.path:
            expected = hints.get(map_param)
            produced = item_type(self._output_type(map_over.node))
            if expected is not None and not is_assignable(produced, expected):
                raise GraphError(f"{label}: mapped parameter {map_param!r} expects "
                                 f"{type_name(expected)} but items of node {map_over.node!r} "
                                 f"are {type_name(produced)}")

    def _output_type(self, node: NodeId) -> Any:
        spec = self.nodes.get(node)
        if spec is None or isinstance(spec.fn, Graph):
            return Any
        produced = return_type(spec.fn)
        if produced is Choose:
            return Any  # the chosen value's type is not declared
        if spec.kind is NodeKind.MAP or spec.kind is NodeKind.JOIN:
            return list[produced]  # type: ignore[valid-type]
        return produced

    def _insert(self, spec: NodeSpec) -> None:
        self.nodes[spec.id] = spec
        self._version += 1

    # --------------------------------------------------------------- validation
    def validate(self) -> Topology:
        """Check the whole graph and return its topology; raises :class:`GraphError`."""
        if self._compiled is not None and self._compiled[0] == self._version:
            return self._compiled[1]
        if not self.nodes:
            raise GraphError(f"graph {self.name!r} has no nodes; add one with g.add(...)")
        for spec in self.nodes.values():
            for dep in spec.deps:
                if dep not in self.nodes:
                    raise GraphError(
                        f"{spec.where}: graph {self.name!r}, node {spec.id!r} depends on "
                        f"unknown node {dep!r}; known nodes: {_preview(self.nodes)}")
        if self.output_ref is not None and self.output_ref.node not in self.nodes:
            raise GraphError(f"graph {self.name!r}: output refers to unknown node "
                             f"{self.output_ref.node!r}")
        topo = Topology.build(self.nodes.values(), self.name)
        self._compiled = (self._version, topo)
        return topo

    def fingerprint(self) -> str:
        """A hash of the graph's structure (ids, steps, dependencies) to detect changes."""
        if self._fingerprint is not None and self._fingerprint[0] == self._version:
            return self._fingerprint[1]
        digest = hashlib.sha256()
        for spec in self.nodes.values():
            # qualname only: the same file loaded as __main__ or by path must match
            qualname = spec.step_key.partition(":")[2]
            digest.update(f"{spec.id}|{qualname}|{','.join(spec.deps)}|{spec.kind}\n"
                          .encode())
        self._fingerprint = (self._version, digest.hexdigest()[:16])
        return self._fingerprint[1]


@dataclass(frozen=True, slots=True)
class Topology:
    """The validated structure of a graph: topological order and successor lists."""

    order: tuple[NodeId, ...]
    dependents: Mapping[NodeId, tuple[NodeId, ...]]
    cache: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    """Derived data reused by every run of the graph (initial run states)."""

    @staticmethod
    def build(specs: Iterable[NodeSpec], graph: str) -> Topology:
        specs = list(specs)
        dependents: dict[NodeId, list[NodeId]] = {s.id: [] for s in specs}
        indegree: dict[NodeId, int] = {}
        for spec in specs:
            indegree[spec.id] = len(spec.deps)
            for dep in spec.deps:
                dependents[dep].append(spec.id)
        queue = [s.id for s in specs if indegree[s.id] == 0]
        order: list[NodeId] = []
        while queue:
            node = queue.pop()
            order.append(node)
            for nxt in dependents[node]:
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    queue.append(nxt)
        if len(order) != len(specs):
            by_id = {s.id: s for s in specs}
            cycle = find_cycle({s.id: s.deps for s in specs})
            where = by_id[cycle[0]].where if cycle else "?"
            raise GraphError(f"{where}: graph {graph!r} has a cycle: "
                             f"{' -> '.join(cycle)}; remove one of these edges")
        return Topology(order=tuple(order),
                        dependents={k: tuple(v) for k, v in dependents.items()})


def find_cycle(deps: Mapping[NodeId, Iterable[NodeId]]) -> list[NodeId]:
    """One cycle in a dependency mapping, as ``[a, b, ..., a]``; ``[]`` if there is none."""
    state: dict[NodeId, int] = {}
    for root in deps:
        if state.get(root):
            continue
        stack: list[tuple[NodeId, Any]] = [(root, iter(deps.get(root, ())))]
        path = [root]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            nxt = next(children, None)
            if nxt is None:
                stack.pop()
                path.pop()
                state[node] = 2
            elif state.get(nxt) == 1:
                start = path.index(nxt)
                # deps point backwards; reverse so the cycle reads in execution order
                return list(reversed([*path[start:], nxt]))
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(deps.get(nxt, ()))))
    return []


def _check_estimate(estimate: float, where: str, graph: str, node: str) -> float:
    if not estimate >= 0:
        raise GraphError(f"{where}: graph {graph!r}, node {node!r}: estimate must be a "
                         f"duration >= 0 seconds, got {estimate!r}")
    return float(estimate)


def id_of(graph: Graph) -> int:
    """Identity used to tell references of different graphs apart."""
    return id(graph)


def _parameters(fn: Callable[..., Any]) -> list[str]:
    try:
        return [n for n, p in inspect.signature(fn).parameters.items()
                if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def _context_param(fn: Callable[..., Any]) -> str | None:
    """The parameter that receives the :class:`~counterpoint.context.NodeContext`, if any."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    hints = resolved_hints(fn)
    for name in params:
        hint = hints.get(name)
        if getattr(hint, "__name__", None) == "NodeContext" or name == "ctx":
            return name
    return None


def _preview(nodes: Mapping[NodeId, Any], limit: int = 8) -> str:
    ids = list(nodes)
    text = ", ".join(ids[:limit])
    return text + (f", ... ({len(ids)} in all)" if len(ids) > limit else "")
