"""The task-graph model: nodes, data and ordering edges, and the builder API.

A :class:`Graph` is a plain description. Nothing runs when it is built; every
structural mistake (duplicate or missing ids, unknown inputs, annotated type
mismatches, cycles) is reported as a :class:`~counterpoint.errors.GraphError`
that names the graph, the node and the line where it was added.
"""

from __future__ import annotations

import enum
import hashlib
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, overload

from .annotations import is_assignable, item_type, type_name
from .callables import NO_FACTS as _NO_FACTS
from .callables import StepFacts, call_site, step_facts
from .errors import GraphError
from .ids import NodeId
from .policy import DEFAULT_POLICY, Backoff, Policy
from .topology import Topology as Topology
from .topology import find_cycle as find_cycle

F = TypeVar("F", bound=Callable[..., Any])

_POLICY_ATTR = "__counterpoint_policy__"
_RESERVED_ID_CHARS = "[]/"
_MISSING = object()


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


# Module-level aliases for the hot paths (Enum class attribute access is slow).
_TASK = NodeKind.TASK
_MAP = NodeKind.MAP
_JOIN = NodeKind.JOIN
_GRAPH = NodeKind.GRAPH
_KIND_TEXT = {kind: str(kind.value) for kind in NodeKind}


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
        refs, deps = _derived(self.inputs, self.map_over, self.after)
        object.__setattr__(self, "refs", refs)
        object.__setattr__(self, "deps", deps)

    def data_deps(self) -> set[NodeId]:
        """Dependencies whose output this node consumes and that skip it when skipped."""
        deps = {v.node for v in self.inputs.values() if isinstance(v, NodeRef) and not v.optional}
        if self.map_over is not None:
            deps.add(self.map_over.node)
        return deps


_Derived = tuple[tuple[tuple[str, "NodeRef | InputRef"], ...], tuple[NodeId, ...]]
"""A spec's ``refs`` and ``deps``."""


def _derived(inputs: Mapping[str, Any], map_over: NodeRef | None,
             after: tuple[NodeId, ...]) -> _Derived:
    """A spec's ``refs`` and ``deps`` (see :class:`NodeSpec`); ``Graph._build_spec`` works
    them out the same way while it checks the inputs."""
    seen: dict[NodeId, None] = {}
    refs: list[tuple[str, NodeRef | InputRef]] = []
    for name, value in inputs.items():
        if isinstance(value, NodeRef):
            seen[value.node] = None
            refs.append((name, value))
        elif isinstance(value, InputRef):
            refs.append((name, value))
    if map_over is not None:
        seen[map_over.node] = None
    for dep in after:
        seen[dep] = None
    return tuple(refs), tuple(seen)


# A frozen dataclass's __init__ sets each field through object.__setattr__, which costs
# about 0.25 µs a field on CPython 3.11 (a plain attribute store: 0.02 µs): NodeSpec's 16
# fields were most of the cost of Graph.add. The builder fills in these classes instead,
# which have the same slots and no frozen __setattr__, then gives the object its real
# class (the identical layout allows the __class__ assignment). The result is the object
# the dataclass constructor would make: tests/test_graph.py compares the two.
class _SpecDraft:
    __slots__ = NodeSpec.__slots__


class _RefDraft:
    __slots__ = NodeRef.__slots__


def _new_spec(*, id: str, fn: Callable[..., Any] | Graph, inputs: Mapping[str, Any],
              after: tuple[NodeId, ...], policy: Policy, kind: NodeKind,
              map_over: NodeRef | None, map_param: str | None, context_param: str | None,
              is_async: bool, step_key: str, where: str, estimate: float | None,
              derived: _Derived) -> NodeSpec:
    """``NodeSpec(...)`` with these fields (``spawned_by`` None), made about four times
    faster; ``derived`` is what :func:`_derived` gives for these inputs."""
    spec: Any = _SpecDraft()
    spec.id = id
    spec.fn = fn
    spec.inputs = inputs
    spec.after = after
    spec.policy = policy
    spec.kind = kind
    spec.map_over = map_over
    spec.map_param = map_param
    spec.context_param = context_param
    spec.is_async = is_async
    spec.step_key = step_key
    spec.where = where
    spec.estimate = estimate
    spec.spawned_by = None
    spec.refs, spec.deps = derived
    spec.__class__ = NodeSpec
    made: NodeSpec = spec
    return made


def _new_ref(node: NodeId, owner: int) -> NodeRef:
    """``NodeRef(node, owner=owner)``, made the fast way (see :func:`_new_spec`)."""
    ref: Any = _RefDraft()
    ref.node = node
    ref.path = ()
    ref.optional = False
    ref.owner = owner
    ref.__class__ = NodeRef
    made: NodeRef = ref
    return made


def step_key(fn: Callable[..., Any] | Graph) -> str:
    """``module:qualname`` naming a callable (or ``graph:name`` for a sub-graph)."""
    if isinstance(fn, Graph):
        return f"graph:{fn.name}"
    module = getattr(fn, "__module__", None) or type(fn).__module__
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{qualname}"


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeOptions:
    """Per-node overrides of a step's :class:`Policy`, as ``Graph.add`` and ``@step`` take them.

    A field left ``None`` keeps the base policy's value (the ``policy=`` given, else the
    one ``@step`` attached to the function, else the default policy).
    """

    retries: int | None = None
    """Additional attempts after the first one fails with a retryable error."""
    timeout: float | None = None
    """Seconds one attempt may take."""
    backoff: Backoff | None = None
    """Delay schedule between attempts."""
    fallback: Callable[..., Any] | None = None
    """Called with the node's inputs after the last attempt failed."""
    resources: Mapping[str, int] | None = None
    """Named resources the node holds while it runs."""

    def apply(self, base: Policy) -> Policy:
        """``base`` with every field set here replaced (``base`` itself when none is set)."""
        changes: dict[str, Any] = {}
        if self.retries is not None:
            changes["retries"] = self.retries
        if self.timeout is not None:
            changes["timeout"] = self.timeout
        if self.backoff is not None:
            changes["backoff"] = self.backoff
        if self.fallback is not None:
            changes["fallback"] = self.fallback
        if self.resources is not None:
            changes["resources"] = dict(self.resources)
        return replace(base, **changes) if changes else base


NO_OPTIONS = NodeOptions()
"""No overrides: the base policy as it is."""


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
    options = NodeOptions(retries=retries, timeout=timeout, backoff=backoff, fallback=fallback,
                          resources=resources)

    def attach(target: F) -> F:
        base: Policy = getattr(target, _POLICY_ATTR, DEFAULT_POLICY)
        setattr(target, _POLICY_ATTR, options.apply(base))
        return target

    return attach(fn) if fn is not None else attach


def _caller_location(depth: int) -> str:
    """``file:line`` of the call ``depth`` frames up from the caller."""
    return call_site(sys._getframe(depth + 1))


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
        self._identity = id_of(self)
        self._outputs: dict[NodeId, Any] = {}
        """Node -> the type it outputs, for the type checks of the nodes that read it;
        valid while ``self._output_of[node]`` is the spec in ``self.nodes``."""
        self._output_of: dict[NodeId, NodeSpec] = {}
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
        where = call_site(sys._getframe(1))
        merged = {**inputs, **kwargs} if inputs else kwargs
        options = NO_OPTIONS if retries is None and timeout is None and fallback is None \
            and resources is None else NodeOptions(retries=retries, timeout=timeout,
                                                   fallback=fallback, resources=resources)
        spec = self._build_spec(id, fn, merged, after, policy, options, where,
                                estimate=estimate)
        self.nodes[spec.id] = spec
        self._version += 1
        return _new_ref(spec.id, self._identity)

    def map(
        self,
        id: str,
        fn: Callable[..., Any] | Graph,
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
        given in ``inputs``). ``fn`` may be a sub-:class:`Graph`: each item then
        runs it as a nested run (``<run>/id[0]``, ...), the item given as the
        sub-graph input that ``item`` names (default: the first declared input
        not given in ``inputs``), and the join lists the sub-runs' outputs.
        """
        where = _caller_location(1)
        if not isinstance(over, NodeRef):
            raise GraphError(f"{where}: graph {self.name!r}, node {id!r}: map(over=...) takes a "
                             f"node reference (the value returned by Graph.add), got "
                             f"{type(over).__name__}")
        merged = {**(inputs or {}), **kwargs}
        param = item
        if isinstance(fn, Graph):
            if param is None:
                free = [p for p in fn.inputs if p not in merged]
                if not free:
                    raise GraphError(
                        f"{where}: graph {self.name!r}, node {id!r}: sub-graph {fn.name!r} has "
                        "no input left to receive the mapped item; declare one with "
                        f"{fn.name}.input(...) (declared inputs: {sorted(fn.inputs) or 'none'})")
                param = free[0]
            elif param not in fn.inputs:
                raise GraphError(
                    f"{where}: graph {self.name!r}, node {id!r}: sub-graph {fn.name!r} has no "
                    f"input {param!r} to receive the mapped item; declared inputs: "
                    f"{sorted(fn.inputs) or 'none'}")
        elif param is None and callable(fn):
            facts = self._facts(where, id, fn)
            free = [p for p in facts.names if p not in merged and p != facts.context_param]
            if not free:
                raise GraphError(f"{where}: graph {self.name!r}, node {id!r}: {facts.key} has "
                                 "no parameter left to receive the mapped item; name one with "
                                 "item=")
            param = free[0]
        spec = self._build_spec(id, fn, merged, after, policy,
                                NodeOptions(retries=retries, timeout=timeout, fallback=fallback,
                                            resources=resources), where,
                                map_over=over, map_param=param, estimate=estimate)
        self._insert(spec)
        return _new_ref(spec.id, self._identity)

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
        options = NodeOptions(retries=retries, timeout=timeout, fallback=fallback,
                              resources=resources)

        def register(target: F) -> F:
            node_id = id or target.__name__
            wired: dict[str, Any] = {}
            facts = self._facts(where, node_id, target)
            ctx = facts.context_param
            params = facts.params
            if params is None:
                raise GraphError(f"{where}: graph {self.name!r}, step {node_id!r}: the "
                                 f"signature of {facts.key} cannot be read, so its parameters "
                                 "cannot be wired; add it with g.add(...) instead")
            for name in facts.names:
                if name == ctx:
                    continue
                if name in self.nodes:
                    wired[name] = NodeRef(NodeId(name), owner=id_of(self))
                elif name in self.inputs:
                    wired[name] = InputRef(name)
                elif params[name].default is params[name].empty:
                    raise GraphError(
                        f"{where}: graph {self.name!r}, step {node_id!r}: parameter {name!r} "
                        f"matches no node or graph input; add node {name!r} first, declare "
                        f"g.input({name!r}), or give the parameter a default")
            spec = self._build_spec(node_id, target, wired, after, None, options, where)
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
        options: NodeOptions,
        where: str,
        map_over: NodeRef | None = None,
        map_param: str | None = None,
        estimate: float | None = None,
    ) -> NodeSpec:
        """Check a node to be added and return its spec (it is not added).

        The hot path of building a large graph. One pass over the inputs checks their
        references, works out the spec's ``refs`` and ``deps``, and tells whether the
        signature and the annotated types certainly match; when they might not, the exact
        checks (:meth:`_check_signature`, :meth:`_check_types`) decide, and raise.
        ``inputs`` becomes the spec's: every caller passes a dict of its own.
        """
        if not isinstance(id, str) or not id or "[" in id or "]" in id or "/" in id:
            raise GraphError(f"{self._label(where, id)}: node ids must be non-empty strings "
                             f"without {_RESERVED_ID_CHARS!r}")
        nodes = self.nodes
        if id in nodes:
            raise GraphError(f"{self._label(where, id)}: duplicate node id (first added at "
                             f"{nodes[NodeId(id)].where}); choose another id")
        subgraph = isinstance(fn, Graph)
        if not (subgraph or callable(fn)):
            raise GraphError(f"{self._label(where, id)}: expected a function or a Graph, got "
                             f"{type(fn).__name__}")
        after_ids = self._ordering(id, after) if after else ()
        try:
            facts = _NO_FACTS if subgraph else step_facts(fn)  # type: ignore[arg-type]
        except GraphError as exc:  # an annotation that cannot be evaluated
            raise GraphError(f"{self._label(where, id)}: {exc}") from exc
        hints, accepted, takes_kwargs, ctx = (facts.hints, facts.accepted, facts.takes_kwargs,
                                              facts.context_param)
        required = facts.required_set
        outputs, output_of = self._outputs, self._output_of
        own = self._identity
        deps: dict[NodeId, None] = {}
        refs: list[tuple[str, NodeRef | InputRef]] = []
        unexpected = False  # a name the signature may not take
        present = 0  # required parameters among the inputs
        mismatch = False  # an input whose annotated type may not match
        for name, value in inputs.items():
            if name in required:
                present += 1
            elif name not in accepted and (not takes_kwargs or name == ctx):
                unexpected = True
            if isinstance(value, NodeRef):
                if value.owner is not None and value.owner != own:
                    self._check_ref_owner(value, id, f"input {name!r}")
                source = value.node
                deps[source] = None
                refs.append((name, value))
                expected = hints.get(name)
                if expected is not None and not value.path and not mismatch:
                    produced = outputs[source] if output_of.get(source, _MISSING) \
                        is nodes.get(source) else self._output_type(source)
                    if value.optional:
                        produced = produced | None
                    mismatch = produced is not expected and not is_assignable(produced,
                                                                              expected)
            elif isinstance(value, InputRef):
                if value.name not in self.inputs:
                    raise GraphError(f"{self._label(where, id)}: input {name!r} refers to "
                                     f"graph input {value.name!r}, which is not declared; "
                                     f"call g.input({value.name!r}) first")
                refs.append((name, value))
        if map_over is not None:
            self._check_ref_owner(map_over, id, "map(over=...)")
            deps[map_over.node] = None
        for dep in after_ids:
            deps[dep] = None
        derived = (tuple(refs), tuple(deps))
        if subgraph:
            return self._subgraph_spec(NodeId(id), fn, inputs, after_ids, derived,  # type: ignore[arg-type]
                                       policy, options, where, map_over, map_param, estimate)
        if facts.params is not None and (unexpected or present < len(required)
                                         or facts.positional_only is not None):
            self._check_signature(where, id, facts, facts.key, inputs, map_param)
        if mismatch or (map_over is not None and hints):
            self._check_types(where, id, hints, inputs, map_over, map_param)
        base: Policy = policy if policy is not None else getattr(fn, _POLICY_ATTR,
                                                                 DEFAULT_POLICY)
        merged = base if options is NO_OPTIONS else options.apply(base)
        if merged.fallback is not None:
            self._check_fallback(where, id, merged.fallback, inputs, map_param)
        if estimate is not None:
            estimate = _check_estimate(estimate, where, self.name, id)
        kind = _MAP if map_over is not None else _TASK
        spec = _new_spec(
            id=id, fn=fn, inputs=inputs, after=after_ids, policy=merged, kind=kind,
            map_over=map_over, map_param=map_param, context_param=ctx,
            is_async=facts.is_async, step_key=facts.key, where=where, estimate=estimate,
            derived=derived)
        produced = facts.returns
        if produced is Choose:
            produced = Any  # the chosen value's type is not declared
        elif kind is _MAP:
            produced = list[produced]  # type: ignore[valid-type]
        outputs[spec.id] = produced  # two dicts, not one of pairs: no object per node
        output_of[spec.id] = spec
        return spec

    def _ordering(self, node: str, after: Iterable[NodeRef | str]) -> tuple[NodeId, ...]:
        ordering: list[NodeId] = []
        for item in after:
            if isinstance(item, NodeRef):
                self._check_ref_owner(item, node, "after=")
                ordering.append(item.node)
            else:
                ordering.append(NodeId(str(item)))
        return tuple(ordering)

    def _subgraph_spec(self, id: NodeId, sub: Graph, inputs: dict[str, Any],
                       after: tuple[NodeId, ...], derived: _Derived, policy: Policy | None,
                       options: NodeOptions,
                       where: str, map_over: NodeRef | None, map_param: str | None,
                       estimate: float | None) -> NodeSpec:
        label = self._label(where, id)
        if sub is self:
            raise GraphError(f"{label}: a graph cannot contain itself")
        unknown = sorted(set(inputs) - set(sub.inputs))
        if unknown:
            raise GraphError(f"{label}: sub-graph {sub.name!r} has no input(s) {unknown}; "
                             f"declared inputs: {sorted(sub.inputs) or 'none'}")
        if map_param is not None and map_param in inputs:
            raise GraphError(f"{label}: sub-graph input {map_param!r} receives the mapped "
                             "item; it cannot also be given as an input")
        missing = sorted(set(sub.inputs) - set(inputs) - {map_param})
        if missing:
            raise GraphError(f"{label}: sub-graph {sub.name!r} needs input(s) {missing}")
        merged = options.apply(policy or DEFAULT_POLICY)
        if merged.fallback is not None:
            self._check_fallback(where, id, merged.fallback, inputs, map_param)
        if estimate is not None:
            estimate = _check_estimate(estimate, where, self.name, id)
        return _new_spec(id=id, fn=sub, inputs=inputs, after=after, policy=merged,
                         kind=_MAP if map_over is not None else _GRAPH, map_over=map_over,
                         map_param=map_param, context_param=None, is_async=True,
                         step_key=step_key(sub), where=where, estimate=estimate,
                         derived=derived)

    def _label(self, where: str, node: str) -> str:
        return f"{where}: graph {self.name!r}, node {node!r}"

    def _facts(self, where: str, node: str, fn: Callable[..., Any]) -> StepFacts:
        try:
            return step_facts(fn)
        except GraphError as exc:  # an annotation that cannot be evaluated
            raise GraphError(f"{self._label(where, node)}: {exc}") from exc

    def _check_ref_owner(self, value: NodeRef, node: str, what: str) -> None:
        if value.owner is not None and value.owner != self._identity and not self._any_owner:
            raise GraphError(f"graph {self.name!r}, node {node!r}: {what} refers to node "
                             f"{value.node!r} of another graph; pass a node of this graph, "
                             "or wrap the other graph as a sub-graph node")

    def _check_signature(self, where: str, node: str, facts: StepFacts, what: str,
                         inputs: Mapping[str, Any], map_param: str | None) -> None:
        """Raise unless the callable of ``facts`` (named ``what`` in messages) accepts
        ``inputs`` and the mapped item by name."""
        params = facts.params
        if params is None:
            return
        ctx = facts.context_param
        takes_kwargs = facts.takes_kwargs
        for name in inputs:
            if name not in params and not takes_kwargs:
                raise GraphError(f"{self._label(where, node)}: {what} has no parameter "
                                 f"{name!r}; its parameters are {list(params)}")
            if name == ctx:
                raise GraphError(f"{self._label(where, node)}: parameter {name!r} receives "
                                 "the node context; it cannot also be an input")
        if facts.positional_only is not None:
            raise GraphError(f"{self._label(where, node)}: {what} has positional-only "
                             f"parameter {facts.positional_only!r}; steps receive inputs by "
                             "name")
        for name in facts.required:
            if name not in inputs and name != map_param:
                raise GraphError(f"{self._label(where, node)}: {what} requires input "
                                 f"{name!r}; pass {name}=<value or node>")

    def _check_fallback(self, where: str, node: str, fallback: Callable[..., Any],
                        inputs: Mapping[str, Any], map_param: str | None) -> None:
        """A fallback is called with the node's inputs, a mapped node's item among them, and
        no context: check that it takes them."""
        if not callable(fallback):
            raise GraphError(f"{self._label(where, node)}: fallback= takes a function, got "
                             f"{type(fallback).__name__}")
        facts = self._facts(where, node, fallback)
        what = f"fallback {facts.key}"
        ctx = facts.context_param
        if ctx is not None and facts.params is not None \
                and facts.params[ctx].default is facts.params[ctx].empty:
            raise GraphError(f"{self._label(where, node)}: {what} takes the node context in "
                             f"parameter {ctx!r}, but a fallback is called with the node's "
                             "inputs only; give that parameter a default or remove it")
        passed = {**inputs, map_param: None} if map_param is not None else inputs
        self._check_signature(where, node, facts, what, passed, None)

    def _check_types(self, where: str, node: str, hints: Mapping[str, Any],
                     inputs: Mapping[str, Any], map_over: NodeRef | None,
                     map_param: str | None) -> None:
        nodes, output_of = self.nodes, self._output_of
        for name, value in inputs.items():
            expected = hints.get(name)
            if expected is None or not isinstance(value, NodeRef) or value.path:
                continue
            source = value.node
            produced = self._outputs[source] if output_of.get(source, _MISSING) \
                is nodes.get(source) else self._output_type(source)
            if value.optional:
                produced = produced | None
            if produced is not expected and not is_assignable(produced, expected):
                raise GraphError(f"{self._label(where, node)}: input {name!r} expects "
                                 f"{type_name(expected)} but node {value.node!r} returns "
                                 f"{type_name(produced)}")
        if map_over is not None and map_param is not None and not map_over.path:
            expected = hints.get(map_param)
            produced = item_type(self._output_type(map_over.node))
            if expected is not None and not is_assignable(produced, expected):
                raise GraphError(f"{self._label(where, node)}: mapped parameter {map_param!r} "
                                 f"expects {type_name(expected)} but items of node "
                                 f"{map_over.node!r} are {type_name(produced)}")

    def _output_type(self, node: NodeId) -> Any:
        spec = self.nodes.get(node)
        if spec is None or isinstance(spec.fn, Graph):
            return Any
        try:
            produced = step_facts(spec.fn).returns
        except GraphError as exc:  # a node put in self.nodes without add(), as edits do
            raise GraphError(f"{self._label(spec.where, node)}: {exc}") from exc
        if produced is Choose:
            return Any  # the chosen value's type is not declared
        if spec.kind is _MAP or spec.kind is _JOIN:
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
        nodes = self.nodes
        if not nodes:
            origin = self.source.file or self.source.module
            raise GraphError(f"{origin}: graph {self.name!r} has no nodes; add one with "
                             "g.add(...)")
        topo = Topology.in_order(nodes.values())
        if topo is None:  # some node reads one added after it, or one that does not exist
            for spec in nodes.values():
                for dep in spec.deps:
                    if dep not in nodes:
                        raise GraphError(
                            f"{spec.where}: graph {self.name!r}, node {spec.id!r} depends on "
                            f"unknown node {dep!r}; known nodes: {_preview(nodes)}")
        if self.output_ref is not None and self.output_ref.node not in nodes:
            raise GraphError(f"graph {self.name!r}: output refers to unknown node "
                             f"{self.output_ref.node!r}")
        if topo is None:
            topo = Topology.build(nodes.values(), self.name)
        self._compiled = (self._version, topo)
        return topo

    def fingerprint(self) -> str:
        """A hash of the graph's structure (ids, steps, dependencies) to detect changes."""
        if self._fingerprint is not None and self._fingerprint[0] == self._version:
            return self._fingerprint[1]
        lines: list[str] = []
        qualnames: dict[str, str] = {}  # step key -> its qualname
        for spec in self.nodes.values():
            # qualname only: the same file loaded as __main__ or by path must match
            key = spec.step_key
            qualname = qualnames.get(key)
            if qualname is None:
                qualname = qualnames[key] = key.partition(":")[2]
            lines.append(f"{spec.id}|{qualname}|{','.join(spec.deps)}|{_KIND_TEXT[spec.kind]}\n")
        digest = hashlib.sha256("".join(lines).encode())  # one update: same bytes, same hash
        self._fingerprint = (self._version, digest.hexdigest()[:16])
        return self._fingerprint[1]


def _check_estimate(estimate: float, where: str, graph: str, node: str) -> float:
    if not estimate >= 0:
        raise GraphError(f"{where}: graph {graph!r}, node {node!r}: estimate must be a "
                         f"duration >= 0 seconds, got {estimate!r}")
    return float(estimate)


def id_of(graph: Graph) -> int:
    """Identity used to tell references of different graphs apart."""
    return id(graph)


def _preview(nodes: Mapping[NodeId, Any], limit: int = 8) -> str:
    ids = list(nodes)
    text = ", ".join(ids[:limit])
    return text + (f", ... ({len(ids)} in all)" if len(ids) > limit else "")
