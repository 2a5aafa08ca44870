"""What routing did in a run, per node: a projection of its ``model_routed`` events.

:func:`routing_by_node` folds a run's log into one :class:`NodeRouting` per node that made
routed calls (``model="auto"``): the models each call went through (with why each
escalation happened), the policy, and the first choice's reason, shortened. The CLI's
``show`` and the web view read it; nothing is stored besides the events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..events import Event, EventKind

REASON_CHARS = 60
"""A shown reason is cut to about this many characters."""


@dataclass(slots=True)
class RoutedCall:
    """One routed call: each model tried in order and, for all but the last, why it was
    left (``check``, ``invalid_output`` or ``error``)."""

    models: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    exhausted: bool = False
    """No model passed (a last ``model_routed`` event chose none)."""


@dataclass(slots=True)
class NodeRouting:
    """The routed calls of one node (over all its attempts)."""

    policy: str
    reason: str
    """The first choice's reason of the latest call, shortened."""
    calls: list[RoutedCall] = field(default_factory=list)

    @property
    def model(self) -> str | None:
        """The model that answered the latest call (``None``: none passed)."""
        last = self.calls[-1] if self.calls else None
        return None if last is None or last.exhausted or not last.models else last.models[-1]

    @property
    def escalations(self) -> int:
        return sum(len(c.failures) for c in self.calls)

    def text(self) -> str:
        """One line: the latest call's path of models, escalations, policy and reason."""
        last = self.calls[-1]
        steps = [f"{m} ✗{why}" for m, why in zip(last.models, last.failures, strict=False)]
        steps += last.models[len(last.failures):]
        path = " → ".join([*steps, *(["none passed"] if last.exhausted else [])])
        calls = f"{len(self.calls)} calls, last: " if len(self.calls) > 1 else ""
        escalated = f", {self.escalations} escalation{'s' if self.escalations != 1 else ''}" \
            if self.escalations else ""
        return f"{calls}{path} ({self.policy}{escalated}: {self.reason})"

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "policy": self.policy, "reason": self.reason,
                "escalations": self.escalations,
                "calls": [{"models": c.models, "failures": c.failures,
                           "exhausted": c.exhausted} for c in self.calls]}


def short_reason(reason: str) -> str:
    """A reason's head (before its first ``:``), cut to :data:`REASON_CHARS`."""
    head = reason.split(":", 1)[0].strip()
    return head if len(head) <= REASON_CHARS else head[:REASON_CHARS - 1] + "…"


def routing_by_node(events: Iterable[Event]) -> dict[str, NodeRouting]:
    """Each node's routing, in the order nodes first routed (see the module docstring)."""
    nodes: dict[str, NodeRouting] = {}
    for event in events:
        if event.kind is not EventKind.MODEL_ROUTED or event.node is None:
            continue
        data = event.data or {}
        node = nodes.get(str(event.node))
        model = data.get("model")
        failure = (data.get("failure") or {}).get("kind")
        starts = "escalated_from" not in data
        if node is None or starts or not node.calls:
            node = nodes.setdefault(str(event.node), NodeRouting(
                policy=str(data.get("policy", "?")), reason=""))
            node.policy = str(data.get("policy", node.policy))
            node.reason = short_reason(str(data.get("reason", "")))
            node.calls.append(RoutedCall())
        call = node.calls[-1]
        if not starts:
            call.failures.append(str(failure or "failed"))
        if isinstance(model, str):
            call.models.append(model)
        else:
            call.exhausted = True
    return nodes
