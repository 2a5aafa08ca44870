"""A run's state rebuilt from its log: outputs decoded, edits re-applied, journals kept."""

from __future__ import annotations

from typing import Any

from .. import codec
from ..annotations import return_type
from ..events import JOURNALED, NODE_SUCCEEDED, PATCH_APPLIED, Event
from ..graph import Choose, Graph, NodeKind
from ..ids import NodeId
from ..loader import make_resolver
from ..patch import Resolver, patch_from_data
from ..state import RunState
from ..transitions import evolve


def journal_of(state: RunState, events: list[Event]) -> dict[NodeId, list[Event]]:
    """What each interrupted node's last attempt recorded (agent turns, tool results)."""
    journal: dict[NodeId, list[Event]] = {}
    for ev in events:
        if ev.kind in JOURNALED and ev.node is not None:
            ns = state.nodes.get(ev.node)
            if ns is not None and ev.attempt == ns.attempt and not ns.status.terminal:
                journal.setdefault(ev.node, []).append(ev)
    return journal


def replay(state: RunState, events: list[Event], graph: Graph) -> None:
    """Rebuild ``state`` from recorded events (outputs and patches decoded)."""
    resolver = make_resolver(graph, state.run_id)
    for ev in events:
        decode(state, ev, resolver)
        evolve(state, ev)


def decode(state: RunState, ev: Event, resolver: Resolver) -> None:
    """Set ``ev.output`` from what the log recorded, as ``state`` (the run's state just
    before ``ev``) types it: a node's output, or a patch with its steps resolved."""
    kind = ev.kind
    if kind is NODE_SUCCEEDED and ev.value is not None:
        ns = state.nodes[ev.node]  # type: ignore[index]
        if ns.spec.kind is NodeKind.JOIN:
            ev.output = [state.nodes[c].output for c in ns.spec.after]
        elif isinstance(ns.spec.fn, Graph) or (ev.data or {}).get("via") == "fallback":
            ev.output = codec.decode(ev.value)
        else:
            declared = return_type(ns.spec.fn)
            ev.output = codec.decode(ev.value, Any if declared is Choose else declared)
    elif kind is PATCH_APPLIED:
        ev.output = patch_from_data(ev.data or {}, resolver)
