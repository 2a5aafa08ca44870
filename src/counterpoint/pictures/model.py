"""What a graph picture shows, before any format: boxes (nodes and graph inputs) and
the lines between them, read from a :class:`~counterpoint.graph.Graph` by :func:`describe`.

The writers (:mod:`.text` for Mermaid and DOT, :mod:`.svg`) draw a :class:`Picture`;
none of them looks at the graph itself, so every format shows the same thing.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..nodes import InputRef, NodeKind, NodeRef, NodeSpec

if TYPE_CHECKING:
    from ..graph import Graph


class BoxKind(enum.StrEnum):
    """How a box is drawn."""

    STEP = "step"
    """A node that calls a step function."""
    MAP = "map"
    """A fan-out: one task (or sub-run) per item of a list known at run time."""
    GRAPH = "graph"
    """A node that runs a sub-graph as a nested run."""
    BRANCH = "branch"
    """A node whose step returns :class:`~counterpoint.nodes.Choose`: it picks which of
    its successors run."""
    INPUT = "input"
    """A graph input, supplied when the run starts."""


INPUT_PREFIX = "[input]"
"""Keys of input boxes start with this; node ids cannot contain ``[``, so they never
collide with a node's key."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Box:
    """One box of the picture."""

    key: str
    """The node id, or :data:`INPUT_PREFIX` + the input's name."""
    label: str
    """The first line drawn: the node id or the input's name."""
    kind: BoxKind
    detail: str = ""
    """The second line drawn: the step, the map's source, the sub-graph."""
    output: bool = False
    """Whether this node's output is the graph's output."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Line:
    """A dependency: ``target`` runs after ``source``."""

    source: str
    target: str
    ordering: bool = False
    """An ordering-only ``after=`` edge: no data flows (drawn dashed)."""
    choice: bool = False
    """``source`` is a branch: ``target`` runs only if ``source`` chooses it."""
    label: str = ""
    """The parameters the data fills, ``over`` for a map's list."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Picture:
    """A graph as boxes and lines, in the order the graph declares its nodes."""

    name: str
    boxes: tuple[Box, ...]
    lines: tuple[Line, ...]


def describe(graph: Graph) -> Picture:
    """The picture of ``graph``: every node, the inputs some node reads, every edge."""
    boxes: list[Box] = []
    lines: list[Line] = []
    inputs: dict[str, None] = {}
    output = graph.output_ref.node if graph.output_ref is not None else None
    branches = {node for node, spec in graph.nodes.items() if _chooses(spec.fn)}
    for node, spec in graph.nodes.items():
        detail = _detail(spec)
        boxes.append(Box(key=node, label=node, kind=_kind(spec, node in branches),
                         detail="" if detail == node else detail, output=node == output))
        params: dict[str, list[str]] = {}
        for param, value in spec.inputs.items():
            if isinstance(value, NodeRef):
                params.setdefault(value.node, []).append(param)
            elif isinstance(value, InputRef):
                inputs[value.name] = None
                params.setdefault(INPUT_PREFIX + value.name, []).append(param)
        if spec.map_over is not None:
            params.setdefault(spec.map_over.node, []).append("over")
        for source, names in params.items():
            lines.append(Line(source=source, target=node, label=", ".join(names),
                              choice=source in branches))
        for source in spec.after:
            if source not in params:
                lines.append(Line(source=source, target=node, ordering=True,
                                  choice=source in branches))
    declared = [Box(key=INPUT_PREFIX + name, label=name, kind=BoxKind.INPUT, detail="input")
                for name in graph.inputs if name in inputs]
    declared += [Box(key=INPUT_PREFIX + name, label=name, kind=BoxKind.INPUT, detail="input")
                 for name in inputs if name not in graph.inputs]
    return Picture(name=graph.name, boxes=(*declared, *boxes), lines=tuple(lines))


def _kind(spec: NodeSpec, branch: bool) -> BoxKind:
    if spec.kind is NodeKind.MAP:
        return BoxKind.MAP
    if spec.kind is NodeKind.GRAPH:
        return BoxKind.GRAPH
    return BoxKind.BRANCH if branch else BoxKind.STEP


def _detail(spec: NodeSpec) -> str:
    fn: Any = spec.fn
    sub = _subgraph(fn)
    what = f"graph {sub}" if sub is not None else _step_name(spec)
    if spec.kind is NodeKind.MAP and spec.map_over is not None:
        return f"map {what} over {spec.map_over.node}"
    return what


def _subgraph(fn: Any) -> str | None:
    # duck-typed: importing Graph here would make graph -> pictures -> graph a cycle
    nodes = getattr(fn, "nodes", None)
    name = getattr(fn, "name", None)
    if isinstance(nodes, dict) and isinstance(name, str) and hasattr(fn, "output_ref"):
        return f"{name} ({len(nodes)} node{'' if len(nodes) == 1 else 's'})"
    return None


def _step_name(spec: NodeSpec) -> str:
    key = spec.step_key
    if key:
        return key.rpartition(":")[2] or key
    return str(getattr(spec.fn, "__qualname__", type(spec.fn).__qualname__))


def _chooses(fn: Callable[..., Any] | Any) -> bool:
    """Whether a step picks its successors: it says so (``chooses = True``) or its return
    annotation names ``Choose``."""
    if getattr(fn, "chooses", False) is True:
        return True
    if not callable(fn) or _subgraph(fn) is not None:
        return False
    try:
        annotation = inspect.signature(fn).return_annotation
    except (TypeError, ValueError):
        return False
    if annotation is inspect.Signature.empty:
        return False
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return "Choose" in text
