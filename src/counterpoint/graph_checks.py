"""The checks :class:`~counterpoint.graph.Graph` runs on each node as it is added, and
on the whole graph when it is validated.

They live in :class:`_GraphChecks`, a base class of ``Graph`` with no state of its own:
the ordering, signature, fallback and annotated-type checks of a node and
:meth:`~_GraphChecks.validate`, each raising a :class:`~counterpoint.errors.GraphError`
that names the graph, the node and where it was added.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .annotations import is_assignable, item_type, type_name
from .callables import StepFacts, step_facts
from .errors import GraphError, UserError
from .ids import NodeId
from .nodes import InputRef, NodeOptions, NodeRef, NodeSpec
from .policy import Policy
from .topology import Topology

if TYPE_CHECKING:
    from .graph import GraphSource

_MISSING = object()


class _GraphChecks:
    """The checks of :class:`~counterpoint.graph.Graph` (its only subclass)."""

    if TYPE_CHECKING:
        name: str
        inputs: dict[str, Any]
        nodes: dict[NodeId, NodeSpec]
        output_ref: NodeRef | None
        source: GraphSource
        _compiled: tuple[int, Topology] | None
        _version: int
        _any_owner: bool
        _identity: int
        _outputs: dict[NodeId, Any]
        _output_of: dict[NodeId, NodeSpec]

        def _output_type(self, node: NodeId) -> Any: ...

    def _ordering(self, where: str, node: str,
                  after: Iterable[NodeRef | str]) -> tuple[NodeId, ...]:
        if isinstance(after, str | NodeRef) or not isinstance(after, Iterable):
            one = "ref" if isinstance(after, NodeRef) else repr(after)
            raise GraphError(f"{self._label(where, node)}: after= takes a list of nodes (the "
                             f"references g.add returned, or their ids), got "
                             f"{type(after).__name__} {after!r}; write after=[{one}]")
        ordering: list[NodeId] = []
        for item in after:
            if isinstance(item, NodeRef):
                self._check_ref_owner(item, node, "after=")
                ordering.append(item.node)
            else:
                ordering.append(NodeId(str(item)))
        return tuple(ordering)

    def _label(self, where: str, node: str) -> str:
        return f"{where}: graph {self.name!r}, node {node!r}"

    def _facts(self, where: str, node: str, fn: Callable[..., Any]) -> StepFacts:
        try:
            return step_facts(fn)
        except GraphError as exc:  # an annotation that cannot be evaluated
            raise GraphError(f"{self._label(where, node)}: {exc}") from exc

    def _merged(self, where: str, node: str, inputs: object,
                kwargs: dict[str, Any]) -> dict[str, Any]:
        """``inputs={...}`` and the keyword inputs in one dict."""
        if not isinstance(inputs, Mapping):
            raise GraphError(f"{self._label(where, node)}: inputs= takes a mapping of "
                             f"parameter names to values or nodes, e.g. inputs={{'city': "
                             f"'Paris'}}, got {type(inputs).__name__} {inputs!r}")
        return {**inputs, **kwargs} if inputs else kwargs

    def _mapped_param(self, where: str, node: str, fn: Callable[..., Any] | _GraphChecks,
                      item: str | None, inputs: Mapping[str, Any]) -> str | None:
        """The parameter (or sub-graph input) of a map's ``fn`` that receives each item:
        ``item`` if given, else the first one not among ``inputs``."""
        if isinstance(fn, _GraphChecks):  # a sub-graph: Graph is the only subclass
            declared = f"declared inputs: {sorted(fn.inputs) or 'none'}"
            if item is None:
                free = [p for p in fn.inputs if p not in inputs]
                if not free:
                    raise GraphError(f"{self._label(where, node)}: sub-graph {fn.name!r} has no "
                                     "input left to receive the mapped item; declare one with "
                                     f"{fn.name}.input(...) ({declared})")
                return free[0]
            if item not in fn.inputs:
                raise GraphError(f"{self._label(where, node)}: sub-graph {fn.name!r} has no "
                                 f"input {item!r} to receive the mapped item; {declared}")
            return item
        if item is None and callable(fn):
            facts = self._facts(where, node, fn)
            free = [p for p in facts.names if p not in inputs and p != facts.context_param]
            if not free:
                raise GraphError(f"{self._label(where, node)}: {facts.key} has no parameter "
                                 "left to receive the mapped item; name one with item=")
            return free[0]
        return item

    def _no_step(self, where: str, id: object) -> GraphError:
        """The error for ``g.add`` given no function: used as a decorator, mostly."""
        if callable(id):  # @g.add over a def: the function came as the id
            name = getattr(id, "__name__", "step")
            return GraphError(f"{where}: graph {self.name!r}: g.add got function {name} "
                              "where the node id goes and no function, as @g.add over a def "
                              f"does; use @g.step (or @g.step({name!r})) to add a function as "
                              f"a node, or call g.add({name!r}, {name}, ...)")
        return GraphError(f"{self._label(where, str(id))}: g.add({id!r}) has no function to "
                          f"run; write g.add({id!r}, fn, ...), or put @g.step({id!r}) over "
                          "the function to add it as a node")

    def _step_id(self, where: str, given: str, id: str | None) -> str:
        """The id of ``@g.step("id")``: one of the two ways to name it."""
        if id is not None and id != given:
            raise GraphError(f"{where}: graph {self.name!r}: @g.step({given!r}, id={id!r}) "
                             "names the node twice; keep one of them")
        return given

    def _not_a_policy(self, where: str, node: str, policy: object) -> GraphError:
        example = ", ".join(f"{k}=..." for k in policy) if isinstance(policy, Mapping) \
            else "retries=2"
        return GraphError(f"{self._label(where, node)}: policy= takes a cp.Policy, got "
                          f"{type(policy).__name__} {policy!r}; write "
                          f"policy=cp.Policy({example or 'retries=2'}), or pass retries=, "
                          "timeout=, ... to g.add directly")

    def _options(self, where: str, node: str, options: NodeOptions, base: Policy) -> Policy:
        """``options.apply(base)``, its error named with the node and its ``g.add`` line."""
        try:
            return options.apply(base)
        except UserError as exc:
            raise GraphError(f"{self._label(where, node)}: {exc}") from None

    def _check_ref_owner(self, value: NodeRef, node: str, what: str) -> None:
        if not isinstance(value, NodeRef):
            raise GraphError(f"graph {self.name!r}, node {node!r}: {what} takes a node "
                             f"reference (the value g.add returned), got "
                             f"{type(value).__name__} {value!r}")
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

    # --------------------------------------------------------------- validation
    def validate(self) -> Topology:
        """Check the whole graph and return its topology; raises :class:`GraphError`."""
        if self._compiled is not None and self._compiled[0] == self._version:
            return self._compiled[1]
        nodes = self.nodes
        if not nodes:
            raise GraphError(f"{self.source.origin}: graph {self.name!r} has no nodes; add "
                             "one with g.add(...)")
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


def _check_estimate(estimate: float, where: str, graph: str, node: str) -> float:
    if isinstance(estimate, bool) or not isinstance(estimate, int | float) or \
            not 0 <= estimate < math.inf:
        raise GraphError(f"{where}: graph {graph!r}, node {node!r}: estimate must be a "
                         f"finite duration >= 0 seconds (a number), got {estimate!r}; or "
                         "leave it out to use the duration learned for the step")
    return float(estimate)


def id_of(graph: object) -> int:
    """Identity used to tell references of different graphs apart."""
    return id(graph)


def _preview(nodes: Mapping[NodeId, Any], limit: int = 8) -> str:
    ids = list(nodes)
    text = ", ".join(ids[:limit])
    return text + (f", ... ({len(ids)} in all)" if len(ids) > limit else "")


_CONTAINERS = frozenset({list, tuple, dict, set, frozenset})
"""Literal inputs checked for node references inside them (a mistake; see _holds_ref)."""


def _holds_ref(value: Any) -> bool:
    """Whether a literal container holds a node or graph-input reference, at any depth."""
    items = value.values() if type(value) is dict else value
    for item in items:
        if isinstance(item, NodeRef | InputRef):
            return True
        if type(item) in _CONTAINERS and _holds_ref(item):
            return True
    return False


def nested_refs_error(label: str, name: str, value: Any) -> GraphError:
    """The error for an input that holds node references inside a container."""
    return GraphError(
        f"{label}: input {name!r} is a {type(value).__name__} holding node references, which "
        "a node does not look inside (the step would get the references, not their outputs, "
        "and not wait for them); pass each reference as an input of its own "
        "(inputs={'a': ref_a, ...}), or map over a node's list output with g.map")
