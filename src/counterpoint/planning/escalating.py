"""A subtask whose failure has no healthy path left: the goal's re-planner replaces it.

Self-healing (:mod:`counterpoint.health`) reroutes a failed model call over its
fallbacks without asking any model. When no healthy path is left, the error carries its
:class:`~counterpoint.health.Escalation`; inside a goal run the subtask node catches it,
records an ``escalated`` event with ``to="replanner"`` and asks the re-planner once for
a sub-plan that replaces the failed subtask (a mid-run re-plan, :mod:`.midrun`, which
always cancels the failed subtask and the subtasks that need it). The failed node ends
with a result that reaches nothing; the replacements run instead.

When no re-plan can be made (no round left, the budgets or deadline used, the answer
already started, or the re-planner's edits stay invalid), the escalation goes on to the
caller: an ``escalated`` event with ``to="caller"`` and the node fails with the error.
A failure is never skipped silently.
"""

from __future__ import annotations

from typing import Any

from ..context import NodeContext
from ..events import EventKind
from ..health.escalation import Escalation
from .plan import Subtask
from .session import _Earlier, _Session


async def _escalate(session: _Session, subtask: Subtask, problem: Escalation,
                    error: BaseException, ctx: NodeContext) -> dict[str, Any]:
    """Hand ``subtask``'s escalated failure to the re-planner (see the module docstring);
    returns the failed node's result, or raises ``error`` when no re-plan was applied."""
    from .midrun import _midrun_replan  # (midrun imports the subtask module's helpers)

    earlier = await _Earlier.read(ctx)
    why = (f"{problem.kind} {problem.name} failed and no healthy alternative is left "
           f"(tried: {', '.join(problem.tried) or 'none'}; circuit open: "
           f"{', '.join(problem.unavailable) or 'none'}): {problem.why}")
    base = {"kind": "subtask", "from": subtask.id, "worker": subtask.worker,
            "model": problem.name, "why": problem.why[:300],
            "tried": list(problem.tried), "unavailable": list(problem.unavailable)}
    if earlier.last("replan") is None:  # (a resumed attempt recorded this already)
        ctx.record(EventKind.ESCALATED, {**base, "to": "replanner"})
    refused = await _midrun_replan(session.steps, subtask, [why], None, ctx, earlier,
                                   failed=why)
    if refused is not None:
        ctx.record(EventKind.ESCALATED, {**base, "to": "caller", "replan": refused})
        error.add_note(f"goal run: subtask {subtask.id} could not be re-planned: {refused}")
        raise error
    return {"failed": why, "replaced": True}
