"""The task-graph model: nodes, data and ordering edges, and the builder API.

A :class:`Graph` is a plain description. Nothing runs when it is built; every
structural mistake (duplicate or missing ids, unknown inputs, annotated type
mismatches, cycles) is reported as a :class:`~counterpoint.errors.GraphError`
that names the graph, the node and the line where it was added. The node data
types live in :mod:`counterpoint.nodes` and its checks in
:mod:`counterpoint.graph_checks`; the names are re-exported here.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .annotations import is_assignable
from .callables import NO_FACTS as _NO_FACTS
from .callables import call_site, step_facts
from .errors import GraphError, UserError
from .graph_checks import _CONTAINERS, _GraphChecks, _holds_ref, nested_refs_error
from .graph_checks import _MISSING as _MISSING
from .graph_checks import _check_estimate as _check_estimate
from .graph_checks import _preview as _preview
from .graph_checks import id_of as id_of
from .ids import NodeId
from .nodes import _GRAPH as _GRAPH
from .nodes import _JOIN as _JOIN
from .nodes import _KIND_TEXT as _KIND_TEXT
from .nodes import _MAP as _MAP
from .nodes import _TASK as _TASK
from .nodes import NO_OPTIONS as NO_OPTIONS
from .nodes import Choose as Choose
from .nodes import InputRef as InputRef
from .nodes import NodeKind as NodeKind
from .nodes import NodeOptions as NodeOptions
from .nodes import NodeRef as NodeRef
from .nodes import NodeSpec as NodeSpec
from .nodes import _Derived as _Derived
from .nodes import _new_ref as _new_ref
from .nodes import _new_spec as _new_spec
from .nodes import _shared
from .nodes import ref as ref
from .policy import DEFAULT_POLICY, Backoff, Policy
from .topology import Topology as Topology
from .topology import find_cycle as find_cycle

if TYPE_CHECKING:
    from .board.spec import Board
    from .budget import Budget

F = TypeVar("F", bound=Callable[..., Any])

_POLICY_ATTR = "__counterpoint_policy__"
_NO_STEP: Any = object()  # g.add given an id only
_RESERVED_ID_CHARS = "[]/"


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
    options = NodeOptions(retries=retries, timeout=timeout, backoff=backoff, fallback=fallback,
                          resources=resources)
    where = _caller_location(1)

    def attach(target: F) -> F:
        base: Policy = getattr(target, _POLICY_ATTR, DEFAULT_POLICY)
        try:
            setattr(target, _POLICY_ATTR, options.apply(base))
        except UserError as exc:
            raise GraphError(f"{where}: @cp.step on {step_key(target)}: {exc}") from None
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

    @property
    def origin(self) -> str:
        """The file the graph was defined in, else its module: what messages name."""
        return self.file or self.module


class Graph(_GraphChecks):
    """A task graph under construction.

    >>> g = Graph("trip")
    >>> a = g.add("fetch", fetch, city="Paris")       # doctest: +SKIP
    >>> c = g.add("compare", compare, a=a, b=b)       # doctest: +SKIP

    Nodes are identified by stable string ids. Inputs are literals or other
    nodes' outputs (:class:`NodeRef`); ``after=`` adds ordering-only edges.
    """

    def __init__(self, name: str, *, board: Board | None = None) -> None:
        if not name or not isinstance(name, str):
            raise GraphError(f"Graph name must be a non-empty string, got {name!r}")
        self.name = name
        self.board = board
        """The run's blackboard: its keys' policies and its work queues (``ctx.board``)."""
        self.nodes: dict[NodeId, NodeSpec] = {}
        self.inputs: dict[str, Any] = {}
        self.output_ref: NodeRef | None = None
        self.budget: Budget | None = None
        """The budget of the graph's runs when the caller sets none (a workflow's
        ``budget:``); a sub-graph's is within what is left of its parent's."""
        self.deadline: float | None = None
        """Seconds the graph's runs may take when the caller sets no deadline (a
        workflow's ``deadline:``); a sub-graph's counts from when it starts."""
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
        fn: Callable[..., Any] | Graph = _NO_STEP,
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
        if fn is _NO_STEP:  # @g.add, or g.add("id") with no function
            raise self._no_step(where, id)
        merged = self._merged(where, id, inputs, kwargs) if inputs is not None else kwargs
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
        merged = self._merged(where, id, inputs, kwargs) if inputs is not None else kwargs
        param = self._mapped_param(where, id, fn, item, merged)
        spec = self._build_spec(id, fn, merged, after, policy,
                                NodeOptions(retries=retries, timeout=timeout, fallback=fallback,
                                            resources=resources), where,
                                map_over=over, map_param=param, estimate=estimate)
        self._insert(spec)
        return _new_ref(spec.id, self._identity)

    @overload
    def step(self, fn: F, /) -> F: ...
    @overload
    def step(self, fn: str | None = None, /, *, id: str | None = None, retries: int | None = None,
             timeout: float | None = None, fallback: Callable[..., Any] | None = None,
             resources: Mapping[str, int] | None = None,
             after: Iterable[NodeRef | str] = ()) -> Callable[[F], F]: ...

    def step(self, fn: Any = None, /, *, id: str | None = None, retries: int | None = None,
             timeout: float | None = None, fallback: Callable[..., Any] | None = None,
             resources: Mapping[str, int] | None = None,
             after: Iterable[NodeRef | str] = ()) -> Any:
        """Decorator sugar: add the function as a node named after it (``@g.step``), or
        ``id`` (``@g.step("id")`` or ``@g.step(id="id")``).

        Each parameter is wired to the node of the same name if one exists, else
        to the graph input of that name, else to its default value.
        """
        where = _caller_location(1)
        if isinstance(fn, str):
            fn, id = None, self._step_id(where, fn, id)
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
        references, works out the spec's ``wires``, ``refs`` and ``deps``, and tells whether
        the signature and the annotated types certainly match; when they might not, the
        exact checks (:meth:`_check_signature`, :meth:`_check_types`) decide, and raise."""
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
        after_ids = self._ordering(where, id, after) if after else ()
        if policy is not None and not isinstance(policy, Policy):
            raise self._not_a_policy(where, id, policy)
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
        refs: list[str] = []
        wires: dict[str, Any] = {}  # the inputs as the spec stores them: see NodeSpec.wires
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
                refs.append(name)
                wires[name] = value if value.path or value.optional else source
                expected = hints.get(name)
                if expected is not None and not value.path and not mismatch:
                    produced = outputs[source] if output_of.get(source, _MISSING) \
                        is nodes.get(source) else self._output_type(source)
                    if value.optional:
                        produced = produced | None
                    mismatch = produced is not expected and not is_assignable(produced,
                                                                              expected)
            else:
                wires[name] = value
                if isinstance(value, InputRef):
                    if value.name not in self.inputs:
                        raise GraphError(f"{self._label(where, id)}: input {name!r} refers "
                                         f"to graph input {value.name!r}, which is not "
                                         f"declared; call g.input({value.name!r}) first")
                    refs.append(name)
                elif type(value) in _CONTAINERS and _holds_ref(value):
                    raise nested_refs_error(self._label(where, id), name, value)
        if map_over is not None:
            self._check_ref_owner(map_over, id, "map(over=...)")
            deps[map_over.node] = None
        for dep in after_ids:
            deps[dep] = None
        derived = (_shared(refs), tuple(deps))
        if subgraph:
            return self._subgraph_spec(NodeId(id), fn, wires, after_ids, derived,  # type: ignore[arg-type]
                                       policy, options, where, map_over, map_param, estimate)
        if facts.params is not None and (unexpected or present < len(required)
                                         or facts.positional_only is not None):
            self._check_signature(where, id, facts, facts.key, inputs, map_param)
        if mismatch or (map_over is not None and hints):
            self._check_types(where, id, hints, inputs, map_over, map_param)
        base: Policy = policy if policy is not None else getattr(fn, _POLICY_ATTR,
                                                                 DEFAULT_POLICY)
        merged = base if options is NO_OPTIONS else self._options(where, id, options, base)
        if merged.fallback is not None:
            self._check_fallback(where, id, merged.fallback, inputs, map_param)
        if estimate is not None:
            estimate = _check_estimate(estimate, where, self.name, id)
        kind = _MAP if map_over is not None else _TASK
        spec = _new_spec(  # positional: matching 14 keywords cost 3% of the build
            id, fn, wires, after_ids, merged, kind, map_over, map_param, ctx,
            facts.is_async, facts.key, where, estimate, derived)
        produced = facts.returns
        if produced is Choose:
            produced = Any  # the chosen value's type is not declared
        elif kind is _MAP:
            produced = list[produced]  # type: ignore[valid-type]
        outputs[spec.id] = produced  # two dicts, not one of pairs: no object per node
        output_of[spec.id] = spec
        return spec

    def _subgraph_spec(self, id: NodeId, sub: Graph, inputs: dict[str, Any],
                       after: tuple[NodeId, ...], derived: _Derived, policy: Policy | None,
                       options: NodeOptions, where: str, map_over: NodeRef | None,
                       map_param: str | None, estimate: float | None) -> NodeSpec:
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
        merged = self._options(where, id, options, policy or DEFAULT_POLICY)
        if merged.fallback is not None:
            self._check_fallback(where, id, merged.fallback, inputs, map_param)
        if estimate is not None:
            estimate = _check_estimate(estimate, where, self.name, id)
        return _new_spec(id, sub, inputs, after, merged,
                         _MAP if map_over is not None else _GRAPH, map_over, map_param,
                         None, True, step_key(sub), where, estimate, derived)

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

    # ----------------------------------------------------------------- pictures
    def to_mermaid(self) -> str:
        """A Mermaid flowchart of this graph (see :mod:`counterpoint.pictures`)."""
        from . import pictures
        return pictures.to_mermaid(pictures.describe(self))

    def to_dot(self) -> str:
        """A Graphviz DOT digraph of this graph."""
        from . import pictures
        return pictures.to_dot(pictures.describe(self))

    def to_svg(self) -> str:
        """A self-contained SVG picture of this graph, laid out in layers."""
        from . import pictures
        return pictures.to_svg(pictures.describe(self))

