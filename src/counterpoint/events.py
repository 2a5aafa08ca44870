"""The events that make up a run's log. The run state is a projection of them.

Events are small slotted records. ``value`` carries a node output already
encoded as JSON text (the store keeps large values once, by content hash);
``output`` and ``patch`` carry the decoded Python objects for the in-process
projection and are never persisted directly.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from .ids import NodeId


class EventKind(enum.StrEnum):
    """Every kind of state change a run records."""

    RUN_CREATED = "run_created"
    RUN_RESUMED = "run_resumed"
    RUN_FINISHED = "run_finished"
    RUN_STOPPING = "run_stopping"
    """The run is being stopped early (``data["reason"]``: cancelled, deadline, fail_fast)."""
    NODE_READY = "node_ready"
    """All of a node's dependencies ended and it may start. Logged only when the node did
    not start in the same burst of events (it waits for a slot or a resource): a
    ``node_started`` with no ``node_ready`` before it means ready and started at once."""
    NODE_STARTED = "node_started"
    NODE_SUCCEEDED = "node_succeeded"
    NODE_FAILED = "node_failed"
    """An attempt failed; ``data["final"]`` says whether the node is now FAILED."""
    NODE_CANCELLED = "node_cancelled"
    NODE_SKIPPED = "node_skipped"
    NODE_BLOCKED = "node_blocked"
    MAP_EXPANDED = "map_expanded"
    PATCH_APPLIED = "patch_applied"
    MODEL_CALL = "model_call"
    """One attempt at a model call made by a node (or a failed attempt, or a cache hit)."""
    MODEL_DELTA = "model_delta"
    """A piece of streamed model text; published to subscribers, never persisted. One
    with ``restart: True`` (no text, a ``note`` saying why) abandons the text streamed
    before it: the answer is asked again and starts anew."""
    AGENT_TURN = "agent_turn"
    """One turn of an agent's loop: the model's answer (text and tool calls)."""
    TOOL_CALL = "tool_call"
    """An agent is about to call a tool (recorded durably before a side effect)."""
    TOOL_RESULT = "tool_result"
    """A tool call's result or error."""
    PLAN_ROUND = "plan_round"
    """A planning round: a plan, a verification or a re-plan (``data["phase"]``)."""
    APPROVAL_REQUESTED = "approval_requested"
    """A node asks a person (``data["id"]``, question, payload, digest, timeout policy);
    the node is WAITING until every approval it asked is answered."""
    APPROVAL_ANSWERED = "approval_answered"
    """An approval was answered (approved or not, by whom, why, edited payload)."""
    APPROVAL_ESCALATED = "approval_escalated"
    """An approval's timeout passed and it was handed to someone else (``data["to"]``)."""
    APPROVAL_WITHDRAWN = "approval_withdrawn"
    """The attempt that asked ended (cancelled, timed out) before an answer came."""
    BOARD_WRITE = "board_write"
    """A write applied to the run's blackboard (:mod:`counterpoint.board`)."""
    BOARD_CONFLICT = "board_conflict"
    """A blackboard write that met a newer version, or that its key's policy refused."""
    QUEUE_PUT = "queue_put"
    """An item put in one of the blackboard's work queues."""
    CLAIM_TAKEN = "claim_taken"
    """A work-queue item claimed by a node's attempt, under a lease."""
    CLAIM_RELEASED = "claim_released"
    """A claim given back by its holder: the item is open again."""
    CLAIM_EXPIRED = "claim_expired"
    """A claim whose holder's attempt ended, or whose lease ran out: the item is open again."""
    CLAIM_DONE = "claim_done"
    """A claimed item completed with its (checked) result."""
    PERMISSION_DENIED = "permission_denied"
    """A call outside an agent's capabilities, refused before it ran."""
    HEALTH_CHANGED = "health_changed"
    """A model's or tool's circuit breaker changed state (target, before, after, why), on
    the run whose call saw it (:mod:`counterpoint.health`)."""
    REROUTED = "rerouted"
    """A failed or open-circuit model or tool was replaced by the cheapest healthy
    alternative (kind, from, to, why, cost, path): a fallback model, an alternative
    tool, a cached answer (``kind="cache"``, ``cached``, ``age`` in seconds) or a tool a
    re-planner named (``by="replanner"``)."""
    ESCALATED = "escalated"
    """A failure no healthy alternative could take: handed on (to the caller, the agent's
    model or a re-planner), with why and what was tried."""
    TOPOLOGY_CHOSEN = "topology_chosen"
    """How a goal run executes its plan (single, parallel, sequential, hierarchical),
    why, whether ``Limits.topology`` forced it, the nodes laid out, and the measures
    that decided it (:mod:`counterpoint.planning.topology`)."""
    MODEL_ROUTED = "model_routed"
    """The router chose a model for a call of ``model="auto"`` (``data``: model, policy,
    reason, tags, candidates considered; ``escalated_from`` and ``failure`` when an
    earlier choice failed its check; see :mod:`counterpoint.routing`)."""
    BUDGET_RESERVED = "budget_reserved"
    """A model call's bound (``data``: id, usd, tokens, model) reserved in the budgets
    that apply, durably before the call is sent; the ``model_call`` that follows names the
    reservation it settles (``data["reservation"]``). See :mod:`counterpoint.budget`."""
    MODEL_SAMPLED = "model_sampled"
    """A call asked for parallel samples (``data``: model, requested, sent, downgraded_by
    and reason when the budget or the deadline covered fewer, pick, answered, chosen,
    agree; see :mod:`counterpoint.models.sampling`)."""


# Module-level aliases: attribute access on an Enum class costs ~100 ns, which the
# scheduler's hot loop pays several times per event.
KIND_OF: dict[str, EventKind] = {kind.value: kind for kind in EventKind}
"""A kind's value -> the kind: what reading a log does for every event (a dict lookup,
a tenth of the cost of ``EventKind(value)``); an unknown value is not in it."""
RUN_CREATED = EventKind.RUN_CREATED
RUN_RESUMED = EventKind.RUN_RESUMED
RUN_FINISHED = EventKind.RUN_FINISHED
RUN_STOPPING = EventKind.RUN_STOPPING
NODE_READY = EventKind.NODE_READY
NODE_STARTED = EventKind.NODE_STARTED
NODE_SUCCEEDED = EventKind.NODE_SUCCEEDED
NODE_FAILED = EventKind.NODE_FAILED
NODE_CANCELLED = EventKind.NODE_CANCELLED
NODE_SKIPPED = EventKind.NODE_SKIPPED
NODE_BLOCKED = EventKind.NODE_BLOCKED
MAP_EXPANDED = EventKind.MAP_EXPANDED
PATCH_APPLIED = EventKind.PATCH_APPLIED
MODEL_CALL = EventKind.MODEL_CALL
APPROVAL_REQUESTED = EventKind.APPROVAL_REQUESTED
APPROVAL_ANSWERED = EventKind.APPROVAL_ANSWERED
APPROVAL_WITHDRAWN = EventKind.APPROVAL_WITHDRAWN
INFORMATIONAL = frozenset({EventKind.MODEL_CALL, EventKind.AGENT_TURN, EventKind.TOOL_CALL,
                           EventKind.TOOL_RESULT, EventKind.PLAN_ROUND,
                           EventKind.APPROVAL_REQUESTED, EventKind.APPROVAL_ANSWERED,
                           EventKind.APPROVAL_ESCALATED, EventKind.APPROVAL_WITHDRAWN,
                           EventKind.BOARD_WRITE, EventKind.BOARD_CONFLICT,
                           EventKind.QUEUE_PUT, EventKind.CLAIM_TAKEN,
                           EventKind.CLAIM_RELEASED, EventKind.CLAIM_EXPIRED,
                           EventKind.CLAIM_DONE, EventKind.PERMISSION_DENIED,
                           EventKind.HEALTH_CHANGED, EventKind.REROUTED,
                           EventKind.ESCALATED, EventKind.TOPOLOGY_CHOSEN,
                           EventKind.MODEL_ROUTED, EventKind.BUDGET_RESERVED,
                           EventKind.MODEL_SAMPLED})
"""Events that record what a node did without changing which nodes run."""
APPROVALS = frozenset({EventKind.APPROVAL_REQUESTED, EventKind.APPROVAL_ANSWERED,
                       EventKind.APPROVAL_ESCALATED, EventKind.APPROVAL_WITHDRAWN})
"""Events of approvals: they move a node between RUNNING and WAITING, nothing more."""
BOARD_EVENTS = frozenset({EventKind.BOARD_WRITE, EventKind.QUEUE_PUT, EventKind.CLAIM_TAKEN,
                          EventKind.CLAIM_RELEASED, EventKind.CLAIM_EXPIRED,
                          EventKind.CLAIM_DONE, EventKind.BOARD_CONFLICT,
                          EventKind.PERMISSION_DENIED})
"""Events the run's blackboard is the projection of (see :mod:`counterpoint.board`);
it keeps the refusals of agents' capabilities too, so ``show`` lists them."""
JOURNALED = frozenset({EventKind.AGENT_TURN, EventKind.TOOL_RESULT})
"""Events an interrupted node's next attempt gets back (see ``NodeContext.journal``)."""


@dataclass(slots=True)
class Event:
    """One state change of a run. Treat it as immutable once it has been appended."""

    kind: EventKind
    at: float
    """Wall-clock time (seconds since the epoch) when it happened."""
    node: NodeId | None = None
    attempt: int = 0
    data: dict[str, Any] | None = None
    """Small JSON-compatible details (error, reason, patch, run options)."""
    value: str | None = None
    """A node output encoded as JSON text (``NODE_SUCCEEDED`` only)."""
    output: Any = None
    """The decoded output; in memory only, rebuilt from ``value`` when replaying."""
    seq: int = 0
    """Position in the run's log, assigned when appended (1-based)."""
