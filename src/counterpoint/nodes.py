"""The data types a task graph is made of: node kinds, references, specs and options.

A :class:`NodeSpec` describes one node of a :class:`~counterpoint.graph.Graph` (what to
run, with which inputs, after what, under which policy); its inputs are literals,
:class:`NodeRef` (another node's output) or :class:`InputRef` (a graph input). A step
returns :class:`Choose` to pick which successors run. :class:`NodeOptions` holds the
per-node policy overrides. The fast constructors :func:`_new_spec` and :func:`_new_ref`
are what the builder in :mod:`counterpoint.graph` uses; everything here is re-exported
from there, where most code imports it.

A spec stores its inputs as :attr:`NodeSpec.wires`, where a plain reference (a
:class:`NodeRef` with no index path, not :meth:`~NodeRef.or_none`) is its source node's id,
a ``str``; :attr:`NodeSpec.inputs` rebuilds the references on access. The reason is the
cyclic garbage collector: a ``NodeRef`` is an object it tracks, and so is a dict holding
one, while a dict of strings and numbers is not tracked at all (nor is a ``str``
subclass a way out: on CPython 3.11 its instances are tracked). Stored this way, a node
whose inputs are literals and plain references leaves one tracked object, its spec, where
its inputs dict and the references in it were tracked too (three objects a node of the
100,000-node L1 benchmark graph, whose nodes each read two others): the full collections
that Python's default thresholds start while such a graph is built walk a third as many.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, NoReturn

from .callables import call_site
from .checks import seconds, whole
from .errors import GraphError
from .ids import NodeId
from .policy import DEFAULT_POLICY, NO_TIMEOUT, Backoff, Policy, check_resources

if TYPE_CHECKING:
    from .graph import Graph


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

    def __iter__(self) -> NoReturn:
        """Refuse: the output does not exist while the graph is built. Without this,
        ``list(ref)``, ``a, b = ref`` and ``x in ref`` would call ``ref[0]``, ``ref[1]``,
        ... for ever (Python's iteration through ``__getitem__``)."""
        where = call_site(sys._getframe(1))
        raise GraphError(
            f"{where}: the output of node {self.node!r} was iterated (list(), unpacking, a "
            "for loop or `in`), but a reference stands for an output that exists only when "
            f"the graph runs; index it to pass part of it (ref[0], ref['key'], or "
            "a, b = ref[0], ref[1]), or run a "
            f"step once per item with g.map('id', fn, over=ref)")

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
    """One node of a graph: what to run, with which inputs, after what, under which policy.

    Its inputs are stored as :attr:`wires` and :attr:`inputs` is made from them on access
    (see the module docstring); construct, compare, copy, pickle and
    :func:`dataclasses.replace` a spec with ``inputs`` as if it were a plain field.
    """

    id: NodeId
    fn: Callable[..., Any] | Graph
    inputs: Mapping[str, Any]
    """Parameter name -> literal value, :class:`NodeRef` or :class:`InputRef`: a dict made
    from :attr:`wires` on each access (the references' ``owner`` is not kept)."""
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
    refs: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The parameters whose inputs are references (not literals), in order (derived): names
    only, since a tuple of strings is one object the garbage collector stops tracking, where
    (parameter, reference) pairs were three it walked on every full collection; specs with
    the same names share one tuple (see :func:`_shared`)."""
    wires: Mapping[str, Any] = field(init=False, repr=False, compare=False)
    """The inputs as stored (derived; what the runtime reads): :attr:`inputs` with each
    plain reference (a :class:`NodeRef` with no path, not optional) replaced by its source
    node's id, a ``str``, and every other value as given. Among the :attr:`refs`, a ``str``
    is such a source; elsewhere a ``str`` is a literal. Unlike a ``NodeRef``, a string is
    not tracked by the garbage collector, nor is a dict holding only strings and numbers:
    see the module docstring."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "deps", _deps(self.wires, self.refs, self.map_over,
                                               self.after))

    def __getstate__(self) -> list[Any]:
        """For pickle and copy: the fields, with the inputs as stored (not the view)."""
        return [getattr(self, name) for name in _STATE]

    def __setstate__(self, state: list[Any]) -> None:
        for name, value in zip(_STATE, state, strict=True):
            object.__setattr__(self, name, value)

    def data_deps(self) -> set[NodeId]:
        """Dependencies whose output this node consumes and that skip it when skipped."""
        deps: set[NodeId] = set()
        wires = self.wires
        for name in self.refs:
            value = wires[name]
            if isinstance(value, NodeRef):
                if not value.optional:
                    deps.add(value.node)
            elif not isinstance(value, InputRef):
                deps.add(value)
        if self.map_over is not None:
            deps.add(self.map_over.node)
        return deps


def _inputs_view(spec: NodeSpec) -> dict[str, Any]:
    return _view(spec.wires, spec.refs)


def _store_inputs(spec: NodeSpec, inputs: Mapping[str, Any]) -> None:
    wires, refs = _stored(inputs)
    object.__setattr__(spec, "wires", wires)
    object.__setattr__(spec, "refs", refs)


# ``inputs`` is a property over ``wires``, put in place of the slot the dataclass made for
# the field (which stays empty): the generated __init__, dataclasses.replace, __eq__ and
# __repr__ read or write the field by name, so they go through it.
NodeSpec.inputs = property(  # type: ignore[assignment, misc]
    _inputs_view, _store_inputs, doc="Parameter name -> literal, NodeRef or InputRef.")
_STATE = tuple(f.name for f in fields(NodeSpec) if f.name != "inputs")
"""The slots a spec's pickled state holds: ``wires`` and ``refs`` stand for ``inputs``."""

_Derived = tuple[tuple[str, ...], tuple[NodeId, ...]]
"""A spec's ``refs`` and ``deps``."""


def _stored(inputs: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A spec's ``wires`` and ``refs`` for these inputs (see :class:`NodeSpec`);
    ``Graph._build_spec`` works them out the same way while it checks the inputs."""
    wires: dict[str, Any] = {}
    refs: list[str] = []
    for name, value in inputs.items():
        if isinstance(value, NodeRef):
            wires[name] = value if value.path or value.optional else value.node
            refs.append(name)
        else:
            wires[name] = value
            if isinstance(value, InputRef):
                refs.append(name)
    return wires, _shared(refs)


_SHARED: dict[tuple[str, ...], tuple[str, ...]] = {}
_SHARED_LIMIT = 4096


def _shared(refs: list[str]) -> tuple[str, ...]:
    """``tuple(refs)``, the same tuple for every spec with these reference names (among the
    first 4096 sets of names met; a spec's ``refs`` never changes).

    The collector counts the objects of collectable types allocated and not yet freed,
    tracked or not, and under Python's default thresholds starts a full collection at most
    every 70,000 of them: a spec, its wires and its deps are three a node, and a tuple of
    its own would be a fourth (building the L1 graph: 3 full collections instead of 5)."""
    names = tuple(refs)
    shared = _SHARED.get(names)
    if shared is not None:
        return shared
    if len(_SHARED) < _SHARED_LIMIT:
        _SHARED[names] = names
    return names


def _view(wires: Mapping[str, Any], refs: tuple[str, ...]) -> dict[str, Any]:
    """The inputs ``wires`` stores: each plain reference's source id made a NodeRef again."""
    inputs = dict(wires)
    for name in refs:
        value = wires[name]
        if not isinstance(value, NodeRef | InputRef):
            inputs[name] = NodeRef(value)
    return inputs


def _deps(wires: Mapping[str, Any], refs: tuple[str, ...], map_over: NodeRef | None,
          after: tuple[NodeId, ...]) -> tuple[NodeId, ...]:
    """A spec's ``deps`` (see :class:`NodeSpec`)."""
    seen: dict[NodeId, None] = {}
    for name in refs:
        value = wires[name]
        if isinstance(value, NodeRef):
            seen[value.node] = None
        elif not isinstance(value, InputRef):
            seen[value] = None
    if map_over is not None:
        seen[map_over.node] = None
    for dep in after:
        seen[dep] = None
    return tuple(seen)


# A frozen dataclass's __init__ sets each field through object.__setattr__, which costs
# about 0.25 µs a field on CPython 3.11 (a plain attribute store: 0.02 µs): NodeSpec's 16
# fields were most of the cost of Graph.add. The builder fills in these classes instead,
# which have the same slots and no frozen __setattr__, then gives the object its real
# class (the identical layout allows the __class__ assignment). The result is the object
# the dataclass constructor would make: tests/test_graph.py compares the two. (The slot
# named ``inputs`` stays empty in both: see the property set on NodeSpec above.)
class _SpecDraft:
    __slots__ = NodeSpec.__slots__


class _RefDraft:
    __slots__ = NodeRef.__slots__


def _new_spec(id: str, fn: Callable[..., Any] | Graph, inputs: Mapping[str, Any],
              after: tuple[NodeId, ...], policy: Policy, kind: NodeKind,
              map_over: NodeRef | None, map_param: str | None, context_param: str | None,
              is_async: bool, step_key: str, where: str, estimate: float | None,
              derived: _Derived) -> NodeSpec:
    """``NodeSpec(...)`` with these fields (``spawned_by`` None), made about four times
    faster. ``inputs`` is the stored form (:attr:`NodeSpec.wires`), and ``derived`` the
    spec's ``refs`` and ``deps`` for it."""
    spec: Any = _SpecDraft()
    spec.id = id
    spec.fn = fn
    spec.wires = inputs
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
        """``base`` with every field set here replaced (``base`` itself when none is set).

        Raises :class:`~counterpoint.errors.UserError` for a value that makes no sense,
        naming the option as ``g.add`` takes it (``timeout``, not ``Policy.timeout``)."""
        changes: dict[str, Any] = {}
        if self.retries is not None:
            whole(self.retries, "retries", least=0)
            changes["retries"] = self.retries
        if self.timeout is not None:
            seconds(self.timeout, "timeout", fix=NO_TIMEOUT)
            changes["timeout"] = self.timeout
        if self.backoff is not None:
            changes["backoff"] = self.backoff
        if self.fallback is not None:
            changes["fallback"] = self.fallback
        if self.resources is not None:
            check_resources(self.resources, "resources")
            changes["resources"] = dict(self.resources)
        return replace(base, **changes) if changes else base


NO_OPTIONS = NodeOptions()
"""No overrides: the base policy as it is."""
