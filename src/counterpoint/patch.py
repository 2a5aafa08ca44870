"""Live edits of a running graph.

An :class:`Edit` collects operations (add nodes and edges, cancel nodes,
replace a node that has not started). It becomes one :class:`Patch`, which the
scheduler validates against the current run state and applies atomically
between dispatches, recording it in the log as one versioned event.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import pydantic_core

from .errors import GraphError, PatchError, SourceError
from .graph import (
    NO_OPTIONS,
    Graph,
    InputRef,
    NodeOptions,
    NodeRef,
    NodeSpec,
    _caller_location,
    step_key,
)
from .ids import NodeId
from .policy import Backoff, Policy


@dataclass(frozen=True, kw_only=True, slots=True)
class Patch:
    """One validated, atomic change to a run's graph."""

    add: tuple[NodeSpec, ...] = ()
    edges: tuple[tuple[NodeId, NodeId], ...] = ()
    """Ordering edges ``(before, after)``; ``after`` must not have started."""
    cancel: tuple[NodeId, ...] = ()
    replace: tuple[NodeSpec, ...] = ()
    """New specs for nodes (same id) that have not started yet."""
    expected_version: int | None = None
    """Reject the patch if the graph was patched since this version was read."""
    reason: str = ""
    by: NodeId | None = None
    """The node whose step made the edit (``ctx.apply``); ``None`` for an edit from
    outside the run (``handle.apply``). A fork keeps an edit only if that node is reused."""

    @property
    def touched(self) -> list[NodeId]:
        """Every node id the patch adds, rewires or replaces."""
        return [*(s.id for s in self.add), *(s.id for s in self.replace),
                *(b for _, b in self.edges)]


@dataclass(frozen=True, slots=True)
class _AddOp:
    id: str
    fn: Callable[..., Any] | Graph
    options: Mapping[str, Any]
    replace: bool
    where: str


class Edit:
    """A batch of graph edits, applied atomically by ``ctx.apply(edit)`` / ``handle.apply(edit)``.

    >>> edit = Edit()
    >>> r = edit.add("extra", summarize, text=ref("fetch"))     # doctest: +SKIP
    >>> edit.cancel("slow_path")                                # doctest: +SKIP
    """

    def __init__(self, reason: str = "", *, expected_version: int | None = None) -> None:
        self.reason = reason
        self.by: NodeId | None = None
        """Set by ``ctx.apply``: the node making the edit (recorded with it)."""
        self.expected_version = expected_version
        self._ops: list[_AddOp] = []
        self._edges: list[tuple[NodeId, NodeId]] = []
        self._cancel: list[NodeId] = []

    def add(self, id: str, fn: Callable[..., Any] | Graph, /, *,
            after: Iterable[NodeRef | str] = (), policy: Policy | None = None,
            retries: int | None = None, timeout: float | None = None,
            fallback: Callable[..., Any] | None = None,
            resources: Mapping[str, int] | None = None, estimate: float | None = None,
            inputs: Mapping[str, Any] | None = None, **kwargs: Any) -> NodeRef:
        """Add a node, exactly like :meth:`Graph.add`. Returns a reference to its output."""
        return self._op(id, fn, False, dict(
            after=tuple(after), policy=policy, retries=retries, timeout=timeout,
            fallback=fallback, resources=resources, estimate=estimate,
            inputs={**(inputs or {}), **kwargs}))

    def replace(self, id: str, fn: Callable[..., Any] | Graph, /, *,
                after: Iterable[NodeRef | str] = (), policy: Policy | None = None,
                retries: int | None = None, timeout: float | None = None,
                fallback: Callable[..., Any] | None = None,
                resources: Mapping[str, int] | None = None, estimate: float | None = None,
                inputs: Mapping[str, Any] | None = None, **kwargs: Any) -> NodeRef:
        """Rewrite a node that has not started: new step, inputs and policy, same id."""
        return self._op(id, fn, True, dict(
            after=tuple(after), policy=policy, retries=retries, timeout=timeout,
            fallback=fallback, resources=resources, estimate=estimate,
            inputs={**(inputs or {}), **kwargs}))

    def _op(self, id: str, fn: Callable[..., Any] | Graph, replace: bool,
            options: dict[str, Any]) -> NodeRef:
        self._ops.append(_AddOp(id, fn, options, replace=replace, where=_caller_location(2)))
        return NodeRef(NodeId(id))

    def edge(self, before: NodeRef | str, after: NodeRef | str) -> None:
        """Make ``after`` wait for ``before`` (an ordering edge)."""
        self._edges.append((_node_id(before), _node_id(after)))

    def cancel(self, *nodes: NodeRef | str) -> None:
        """Cancel nodes; running ones are interrupted, their dependents end cancelled."""
        self._cancel.extend(_node_id(n) for n in nodes)

    def build(self, graph_name: str, specs: Mapping[NodeId, NodeSpec],
              inputs: Mapping[str, Any] | None = None) -> Patch:
        """Turn the collected operations into a :class:`Patch`, checking each new node's
        signature and annotated types exactly as :meth:`Graph.add` does. ``inputs`` are the
        run graph's declared inputs, which added nodes may read (``InputRef``)."""
        scratch = Graph(graph_name)
        scratch.nodes = dict(specs)
        scratch.inputs = dict(inputs or {})
        scratch._any_owner = True
        added: list[NodeSpec] = []
        replaced: list[NodeSpec] = []
        for op in self._ops:
            if op.replace:
                scratch.nodes.pop(NodeId(op.id), None)
            opts = op.options
            given = {k: opts[k] for k in ("retries", "timeout", "fallback", "resources")}
            node_options = NodeOptions(**given) if any(
                v is not None for v in given.values()) else NO_OPTIONS
            try:  # Graph.add's checks, with the edit's line as where the node was added
                spec = scratch._build_spec(op.id, op.fn, dict(opts["inputs"] or {}),
                                           opts["after"], opts["policy"], node_options,
                                           op.where, estimate=opts["estimate"])
            except GraphError as exc:
                raise PatchError(f"edit rejected: {exc}") from exc
            scratch.nodes[spec.id] = spec
            (replaced if op.replace else added).append(spec)
        return Patch(add=tuple(added), edges=tuple(self._edges), cancel=tuple(self._cancel),
                     replace=tuple(replaced), expected_version=self.expected_version,
                     by=self.by,
                     reason=self.reason)


@dataclass(frozen=True, kw_only=True, slots=True)
class EditMade:
    """A live edit a node's step made, as its run's state keeps it: a re-run of that
    node (a retry, or the resume after a crash) runs the same code and makes the same
    edit again, which the log holds already (``Control.apply`` gives it this version
    instead of applying it twice)."""

    attempt: int
    """The node's attempt that made it."""
    version: int
    """The graph version the edit made."""
    added: tuple[NodeId, ...]
    """The nodes it added (a rebuilt edit is checked against the graph without them)."""
    digest: str
    """:func:`edit_digest` of its recorded data."""


def edit_made(data: Mapping[str, Any], attempt: int) -> EditMade:
    """The :class:`EditMade` of a ``patch_applied`` event's ``data``, made by ``attempt``."""
    return EditMade(attempt=attempt, version=int(data.get("version", 0)),
                    added=tuple(NodeId(str(s["id"])) for s in data.get("add", ())),
                    digest=edit_digest(data))


def edit_digest(data: Mapping[str, Any]) -> str:
    """A digest of what an edit does (:func:`patch_to_data`), leaving out its version and
    the lines its nodes were added at: the same edit made by a re-run has the same one,
    as it has when read back from the log."""
    def bare(specs: Any) -> list[Any]:
        return [{k: v for k, v in spec.items() if k != "where"} for spec in specs or ()]
    body = {**{k: v for k, v in data.items() if k != "version"},
            "add": bare(data.get("add")), "replace": bare(data.get("replace"))}
    text = json.dumps(body, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _node_id(node: NodeRef | str) -> NodeId:
    return node.node if isinstance(node, NodeRef) else NodeId(node)


# ------------------------------------------------------------------ serialization
def patch_to_data(patch: Patch) -> dict[str, Any]:
    """The JSON form of a patch recorded in the log; callables are named by step key."""
    return {
        "reason": patch.reason,
        "add": [spec_to_data(s) for s in patch.add],
        "replace": [spec_to_data(s) for s in patch.replace],
        "edges": [list(e) for e in patch.edges],
        "cancel": list(patch.cancel),
        "by": patch.by,
    }


def patch_from_data(data: Mapping[str, Any], resolve: Resolver) -> Patch:
    """Rebuild a recorded patch, resolving step keys to callables with ``resolve``."""
    return Patch(add=tuple(spec_from_data(s, resolve) for s in data.get("add", ())),
                 replace=tuple(spec_from_data(s, resolve) for s in data.get("replace", ())),
                 edges=tuple((NodeId(a), NodeId(b)) for a, b in data.get("edges", ())),
                 cancel=tuple(NodeId(n) for n in data.get("cancel", ())),
                 reason=str(data.get("reason", "")),
                 by=NodeId(data["by"]) if data.get("by") else None)


Resolver = Callable[[str, str], Callable[..., Any]]
"""``(step_key, node_id) -> callable``; raises SourceError when it cannot be found."""


def spec_to_data(spec: NodeSpec) -> dict[str, Any]:
    """The JSON form of a node spec (policy callables by step key)."""
    policy = spec.policy
    data: dict[str, Any] = {
        "id": spec.id, "step": spec.step_key, "kind": spec.kind.value,
        "inputs": {k: _input_to_data(spec.id, k, v) for k, v in spec.inputs.items()},
        "after": list(spec.after), "where": spec.where, "estimate": spec.estimate,
        "policy": {"retries": policy.retries, "timeout": policy.timeout,
                   "resources": dict(policy.resources),
                   "fallback": step_key(policy.fallback) if policy.fallback else None,
                   "backoff": {"initial": policy.backoff.initial,
                               "factor": policy.backoff.factor,
                               "maximum": policy.backoff.maximum,
                               "jitter": policy.backoff.jitter},
                   "retry_on": [_type_key(t) for t in policy.retry_on]},
    }
    if spec.map_over is not None:
        data["map_over"] = _input_to_data(spec.id, "over", spec.map_over)
        data["map_param"] = spec.map_param
    return data


def spec_from_data(data: Mapping[str, Any], resolve: Resolver) -> NodeSpec:
    node = str(data["id"])
    fn = resolve(str(data["step"]), node)
    pol = data.get("policy", {})
    fallback = resolve(pol["fallback"], node) if pol.get("fallback") else None
    policy = Policy(retries=int(pol.get("retries", 0)), timeout=pol.get("timeout"),
                    resources=dict(pol.get("resources", {})), fallback=fallback)
    base = getattr(fn, "__counterpoint_policy__", None)
    if isinstance(base, Policy):
        policy = replace(base, retries=policy.retries, timeout=policy.timeout,
                         resources=policy.resources, fallback=fallback or base.fallback)
    if "backoff" in pol:  # recorded since the whole policy is: older logs keep the defaults
        policy = replace(policy, backoff=Backoff(**pol["backoff"]))
    if "retry_on" in pol:
        policy = replace(policy, retry_on=tuple(_type_from_key(k, node)
                                                for k in pol["retry_on"]))
    map_over = _input_from_data(data["map_over"]) if "map_over" in data else None
    scratch = Graph("patch")
    spec = scratch._build_spec(node, fn, {k: _input_from_data(v)
                                          for k, v in data.get("inputs", {}).items()},
                               [NodeId(a) for a in data.get("after", ())], policy,
                               NO_OPTIONS, str(data.get("where", "")),
                               map_over=map_over if isinstance(map_over, NodeRef) else None,
                               map_param=data.get("map_param"), estimate=data.get("estimate"))
    return spec


def _type_key(exc_type: type) -> str:
    return f"{exc_type.__module__}:{exc_type.__qualname__}"


def _type_from_key(key: str, node: str) -> type:
    """The exception type recorded as ``module:qualname`` in a node's ``retry_on``."""
    module_name, _, qualname = str(key).partition(":")
    try:
        found: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise SourceError(f"node {node!r}: its retry_on names {key!r}, which cannot be "
                          f"imported here ({exc}); make it importable, then resume") from exc
    if not isinstance(found, type):  # an exception type, or a class matching some
        raise SourceError(f"node {node!r}: its retry_on names {key!r}, which is not a "
                          "class")
    return found


def _input_to_data(node: str, name: str, value: Any) -> Any:
    if isinstance(value, NodeRef):
        return {"$ref": value.node, "path": list(value.path), "optional": value.optional}
    if isinstance(value, InputRef):
        return {"$input": value.name}
    try:
        return {"$lit": pydantic_core.to_jsonable_python(value)}
    except pydantic_core.PydanticSerializationError as exc:
        raise PatchError(f"node {node!r}: literal input {name!r} of type "
                         f"{type(value).__name__} cannot be recorded as JSON; pass it "
                         "through a node output or use JSON-compatible data") from exc


def _input_from_data(data: Mapping[str, Any]) -> Any:
    if "$ref" in data:
        return NodeRef(NodeId(data["$ref"]), tuple(data.get("path", ())),
                       bool(data.get("optional", False)))
    if "$input" in data:
        return InputRef(str(data["$input"]))
    return data["$lit"]


def require_edit(edit: object, where: str) -> Edit:
    """``edit`` if it is an :class:`Edit`, else a :class:`~counterpoint.errors.PatchError`
    saying what ``apply`` takes (``Edit.add`` returns a reference, not the edit)."""
    if not isinstance(edit, Edit):
        raise PatchError(f"{where}: apply takes a cp.Edit, not {type(edit).__name__}; "
                         "Edit.add returns a reference to the node it adds (to wire other "
                         "nodes to), so build the edit first: edit = cp.Edit(); "
                         "edit.add(...); apply(edit)")
    return edit
