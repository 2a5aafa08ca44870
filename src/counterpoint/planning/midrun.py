"""Mid-run re-plans: a checked subtask re-plans while other subtasks are pending or running.

When a checked subtask's redone result still has gaps (:mod:`.subtasks`), it asks the
re-planner at once, and its edits are one live edit that interrupts running subtasks it
cancels, cancels the subtasks that need them (they are not rewired: the re-planner adds
replacements), rewrites subtasks that have not started, and rewrites the waiting verify
node and the answer. A mid-run re-plan uses a round (``Limits.max_rounds`` counts verify
rounds and mid-run re-plans) and is made only when a verify round is left after it and
the budgets and deadline allow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..context import NodeContext
from ..ids import NodeId
from ..patch import Edit
from ..state import TERMINAL, NodeState, NodeStatus
from .plan import Replan, Subtask
from .session import _dump, _Earlier, _record, _Session, _with_dependents
from .verify import _ask, _replan_problems, _stop_reason
from .wiring import _add_subtask, _add_subtasks, _add_tail, _param, _results_text

if TYPE_CHECKING:
    from .goal import _GoalSteps


_TAIL_STARTED = "the verify and answer nodes have started; nothing can change now"


async def _midrun_replan(steps: _GoalSteps, subtask: Subtask, gaps: Sequence[str],
                         output: Any, ctx: NodeContext, earlier: _Earlier, *,
                         failed: str | None = None) -> str | None:
    """A checked subtask whose redone result still has gaps asks the re-planner now,
    while other subtasks may be pending or running, and applies its answer as one live
    edit (:func:`_midrun_edit`). The decision is recorded before the edit, and an earlier
    attempt's decision is used again. Returns ``None`` once the edit is applied, else why
    none was.

    ``failed`` (an escalated failure, :mod:`.escalating`): the subtask could not be done
    at all, for that reason; the re-planner is asked to replace it, and the edit always
    cancels it (with the subtasks that need it)."""
    reason = (f"re-plan after the failure of {ctx.node}" if failed is not None
              else f"re-plan after the check of {ctx.node}")
    decided = earlier.last("replan")
    if decided is None:
        live = _live_plan(steps, ctx)
        if live is None:
            return _TAIL_STARTED
        session = live[0]
        head = {"phase": "replan", "midrun": True, "after": subtask.id,
                "round": session.used + 1, **({"failed": failed} if failed else {})}
        stop = _stop_reason(session, ctx, extra=1)
        if stop is not None:
            decided = {**head, "applied": False, "stop": stop}
        else:
            def forced(replan: Replan) -> Replan:
                if failed is None or subtask.id in replan.cancel:
                    return replan
                return replan.model_copy(update={"cancel": [*replan.cancel, subtask.id]})

            def problems_of(replan: Replan) -> list[str]:
                now = _live_plan(steps, ctx)
                return ([_TAIL_STARTED]
                        if now is None else _midrun_problems(now[0], forced(replan), ctx))

            gap_lines = "\n".join(f"- {g}" for g in gaps)
            situation = (
                f"Subtask {subtask.id} failed and cannot be done as planned:\n{gap_lines}\n\n"
                f"Replace it now, while the plan runs: it is cancelled (with the subtasks "
                "that need it); add subtasks with new ids that do its part, with a worker "
                "that can, and replacements for the cancelled subtasks that need it."
                if failed is not None else
                f"Subtask {subtask.id} was checked, redone with the verifier's feedback, and "
                f"still has these gaps:\n{gap_lines}\n\nClose the gaps now, while the plan "
                "runs: add subtasks with new ids, redo subtasks that have not started, or "
                "cancel subtasks that do not serve the goal (a running one is stopped; the "
                "subtasks that need a cancelled one are cancelled too, and none of them "
                "reach the answer).")
            question = (
                f"Goal: {session.goal}\n\nWorkers:\n{session.team.describe_workers()}\n\n"
                f"Subtasks as they stand (some have not finished):\n"
                f"{_live_results(session, ctx, output)}\n\n{situation}")
            replan, problems = await _ask(session, question, ctx, f"replan {ctx.node}",
                                          problems_of)
            replan = forced(replan) if replan is not None else None
            now = _live_plan(steps, ctx)  # no await since the last check: the same plan
            if replan is None or problems or now is None:
                decided = {**head, "applied": False, "problems": problems or [
                    _TAIL_STARTED]}
            else:
                cancelled = _with_dependents(now[0].subtasks, replan.cancel)
                decided = {**head, "applied": True, "added": [s.id for s in replan.add],
                           "redone": [r.id for r in replan.redo],
                           **({"cancelled": cancelled,
                               "interrupted": [sid for sid in cancelled
                                               if not _ended(now[0], sid, ctx)]}
                              if cancelled else {}),
                           "edits": _dump(replan)}
        _record(ctx, decided)
    if not decided.get("applied"):
        return str(decided.get("stop") or "; ".join(decided.get("problems") or [])
                   or "no valid re-plan")
    if reason in earlier.applied:
        return None
    live = _live_plan(steps, ctx)
    if live is None:  # resumed after the tail started; nothing left to edit
        return _TAIL_STARTED
    ctx.apply(_midrun_edit(live[0], Replan.model_validate(decided["edits"]), ctx,
                           reason, live[1]))
    return None


def _live_plan(steps: _GoalSteps, ctx: NodeContext) -> tuple[_Session, str | None] | None:
    """The plan as it stands, and the verify node waiting for it (if any); None once the
    answer node has started.

    Read from the recorded ``plan`` input of the verify node that has not started (else
    of the answer node): every edit that changes the plan rewrites these nodes, and they
    wait for every subtask in it, so while a subtask runs they hold the plan as it stands.
    """
    nodes = ctx.state.nodes
    answer = nodes.get(NodeId("answer"))
    if answer is None or not _unstarted(answer):
        return None
    source, pending = answer, None
    for node in answer.spec.after:
        ns = nodes.get(node)
        if node.startswith("verify-") and ns is not None and _unstarted(ns):
            source, pending = ns, str(node)
    plan = source.spec.inputs.get("plan")
    if not isinstance(plan, Mapping):
        return None
    return _Session.of(steps, plan), pending


def _unstarted(ns: NodeState) -> bool:
    return ns.status in (NodeStatus.PENDING, NodeStatus.READY) and not ns.attempt


def _node_state(session: _Session, sid: str, ctx: NodeContext) -> NodeState:
    return ctx.state.nodes[NodeId(session.latest[sid])]


def _ended(session: _Session, sid: str, ctx: NodeContext) -> bool:
    """Whether the node holding ``sid``'s newest result has ended."""
    return _node_ended(session.latest[sid], ctx)


def _node_ended(node: str, ctx: NodeContext) -> bool:
    """Whether ``node`` has ended (this node counts as ended: it is about to return its
    result)."""
    return node == ctx.node or ctx.state.nodes[NodeId(node)].status in TERMINAL


def _live_results(session: _Session, ctx: NodeContext, output: Any) -> str:
    """The subtasks and their results so far (a status for those not finished)."""
    shown: dict[str, Any] = {}
    for sid, node in session.latest.items():
        ns = _node_state(session, sid, ctx)
        if node == ctx.node:
            shown[_param(sid)] = output
        elif ns.status is NodeStatus.SUCCEEDED:
            shown[_param(sid)] = ns.output
        else:
            shown[_param(sid)] = "(not started)" if _unstarted(ns) else f"({ns.status.value})"
    return _results_text(session, shown)


def _midrun_problems(session: _Session, replan: Replan, ctx: NodeContext) -> list[str]:
    """Everything wrong with a mid-run re-plan: what is wrong with any re-plan, and redoing
    a subtask that has started (only a node that has not started can be rewritten)."""
    problems = _replan_problems(session, replan, sorted(session.team.workers))
    for sid in dict.fromkeys(r.id for r in replan.redo):
        if sid in session.latest and (session.latest[sid] == ctx.node
                                      or not _unstarted(_node_state(session, sid, ctx))):
            problems.append(f"subtask {sid!r} has started; it cannot be redone now: cancel "
                            "it and add a new subtask instead")
    return problems


def _midrun_edit(session: _Session, replan: Replan, ctx: NodeContext, reason: str,
                 pending_verify: str | None) -> Edit:
    """The live edit of a mid-run re-plan (``session`` follows it).

    A cancelled subtask, and every subtask that needs it, leaves the plan; the nodes of
    those that have not ended are cancelled with the edit's reason (a running one is
    interrupted). The node re-planning is not cancelled: it ends with its result, which
    no longer reaches the answer. Dependents are cancelled rather than rewired: the
    re-planner adds a replacement, and what needs it, as new subtasks. A redone subtask
    has not started: its node is rewritten in place with the new task. The waiting
    verify node and the answer are rewritten to take the plan as it now stands.
    """
    edit = Edit(reason)
    for _, node in session.drop(replan.cancel):
        if not _node_ended(node, ctx):
            edit.cancel(node)
    for redo in replan.redo:
        # (a resumed run may find it started meanwhile: then it keeps its task)
        if redo.id in session.latest and _unstarted(_node_state(session, redo.id, ctx)) \
                and session.latest[redo.id] != ctx.node:
            revised = session.subtasks[redo.id].model_copy(update={"task": redo.task})
            session.subtasks[redo.id] = revised
            _add_subtask(edit, session, revised, session.latest[redo.id], replace=True)
    _add_subtasks(edit, session, [(s, s.id) for s in replan.add])
    session.midrun += 1
    _add_tail(edit, session, replace=True, pending_verify=pending_verify)
    return edit
