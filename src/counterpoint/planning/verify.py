"""The verify node: judge the results and re-plan the gaps, until a stop condition holds.

A ``verify-N`` node asks the verifier for a verdict on the plan's results; when it finds
gaps, the re-planner's edits (new subtasks, redone subtasks, cancelled subtasks, a
``verify-N+1`` node, and the answer rewired to the newest results) are applied as one live
edit, unless a stop condition holds (:func:`_stop_reason`: the rounds, the token or money
budget, or the deadline). The re-planner's ask loop and the checks of its edits are shared
with mid-run re-plans (:mod:`.midrun`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ..context import NodeContext
from ..models import Message
from ..patch import Edit
from .plan import Replan, Subtask, Verdict, check_plan, replan_type
from .session import _dump, _Earlier, _record, _Session, _with_dependents
from .wiring import _add_subtasks, _add_tail, _reserved, _results_text


async def _verify(session: _Session, results: Mapping[str, Any],
                  ctx: NodeContext) -> dict[str, Any]:
    earlier = await _Earlier.read(ctx)
    session.rounds += 1
    shown = _results_text(session, results)
    judged = earlier.last("verify")
    if judged is None:
        team = session.team
        # a verdict is structured output, like a plan: one cut off at the token limit
        # cannot be read, so its token limit fits its bounded schema (Team.call_tokens)
        generation = await team.verifier.model.generate(
            f"Goal: {session.goal}\n\nSubtasks and results:\n{shown}",
            system=team.verifier.instructions, output=Verdict,
            max_tokens=team.call_tokens("verifier", Verdict), ctx=ctx,
            purpose=f"verify {session.rounds}")
        found = generation.output
        assert found is not None
        judged = {"phase": "verify", "round": session.rounds, "complete": found.complete,
                  "gaps": [g.model_dump() for g in found.gaps],
                  "stop": None if found.complete and not found.gaps
                  else _stop_reason(session, ctx)}
        _record(ctx, judged)
    verdict = Verdict.model_validate(judged)
    gaps = [g.model_dump() for g in verdict.gaps]
    if verdict.complete and not verdict.gaps:
        return {"round": session.rounds, "complete": True, "gaps": []}
    if judged.get("stop") is not None:
        return {"round": session.rounds, "complete": False, "stopped": judged["stop"],
                "gaps": gaps}
    edits = await _replan(session, verdict, shown, ctx, earlier)
    return {"round": session.rounds, "complete": False, "replanned": edits, "gaps": gaps}


def _stop_reason(session: _Session, ctx: NodeContext, *, extra: int = 0) -> str | None:
    """Why no more re-planning, if a stop condition holds. Rounds are the verify rounds
    run and the mid-run re-plans made; ``extra`` rounds must still be left (a mid-run
    re-plan needs one for itself, and a verify round always follows it)."""
    limits = session.limits
    usage = ctx.usage
    if session.used + extra >= limits.max_rounds:
        return f"max rounds ({limits.max_rounds}) reached"
    if limits.max_tokens is not None and usage.tokens >= limits.max_tokens:
        return f"token budget used ({usage.tokens:,} of {limits.max_tokens:,})"
    if limits.max_cost is not None and usage.cost >= limits.max_cost:
        return f"money budget used (${usage.cost:.4f} of ${limits.max_cost:.4f})"
    # the run's own deadline cancels whatever is left when it passes: stop re-planning
    # before that too, so the answer still gets written
    run_deadline = ctx.options.deadline
    deadlines = [d for d in (limits.deadline, run_deadline) if d is not None]
    if deadlines and time.time() - ctx.run_started_at >= 0.7 * min(deadlines):
        return f"deadline near ({min(deadlines):g}s)"
    return None


async def _replan(session: _Session, verdict: Verdict, shown: str, ctx: NodeContext,
                  earlier: _Earlier) -> dict[str, Any]:
    """Ask the re-planner for edits (or take the ones an earlier attempt recorded), record
    them, then apply them: new subtasks, redone ones, cancelled ones, the next verify
    node and the answer rewired."""
    decided = earlier.last("replan")
    if decided is None:
        replan, problems = await _ask_replanner(session, verdict, shown, ctx)
        if replan is None or problems:
            decided = {"phase": "replan", "round": session.rounds, "applied": False,
                       "problems": problems}
        else:
            cancelled = _with_dependents(session.subtasks, replan.cancel)
            decided = {"phase": "replan", "round": session.rounds, "applied": True,
                       "added": [s.id for s in replan.add],
                       "redone": [r.id for r in replan.redo],
                       **({"cancelled": cancelled} if cancelled else {}),
                       "edits": _dump(replan)}
        _record(ctx, decided)
    if not decided.get("applied"):
        edit = Edit(f"round {session.rounds}: no valid re-plan")
        session.stopped = True  # nothing to add: answer with what there is
        _add_tail(edit, session, replace=True)
        earlier.apply(ctx, edit)
        return {"applied": False, "problems": list(decided.get("problems") or [])}
    earlier.apply(ctx, _replan_edit(session, Replan.model_validate(decided["edits"])))
    return {k: decided[k] for k in ("applied", "added", "redone", "cancelled") if k in decided}


async def _ask_replanner(session: _Session, verdict: Verdict, shown: str,
                         ctx: NodeContext) -> tuple[Replan | None, list[str]]:
    """The re-planner's edits and their problems (empty when valid), after re-asks."""
    team = session.team
    workers = sorted(team.workers)
    gaps = "\n".join(f"- {g.problem}" + (f" (subtask {g.subtask})" if g.subtask else "")
                     for g in verdict.gaps) or "- the verifier found the results incomplete"
    return await _ask(session, (
        f"Goal: {session.goal}\n\nWorkers:\n{team.describe_workers()}\n\nCurrent subtasks "
        f"and results:\n{shown}\n\nGaps:\n{gaps}\n\nAdd subtasks with new ids or redo "
        "existing ones to close the gaps; cancel subtasks whose results are wrong or not "
        "needed (they are left out of the answer, with the subtasks that need them)."),
        ctx, f"replan {session.rounds}", lambda r: _replan_problems(session, r, workers))


async def _ask(session: _Session, question: str, ctx: NodeContext, purpose: str,
               problems_of: Callable[[Replan], list[str]]) -> tuple[Replan | None, list[str]]:
    """Ask the re-planner ``question``; re-ask with the problems ``problems_of`` finds."""
    team, limits = session.team, session.limits
    conversation = [Message.user(question)]
    answer_type = replan_type(sorted(team.workers), limits.max_subtasks, team.skill_tags())
    replan: Replan | None = None
    problems: list[str] = []
    for attempt in range(1, limits.plan_attempts + 1):
        generation = await team.replanner.model.generate(
            conversation, system=team.replanner.instructions, output=answer_type,
            max_tokens=team.call_tokens("replanner", answer_type), ctx=ctx,
            purpose=f"{purpose}.{attempt}")
        replan = generation.output
        assert replan is not None
        problems = problems_of(replan)
        if not problems:
            break
        conversation = [*conversation, generation.response.message(), Message.user(
            "These edits have problems:\n- " + "\n- ".join(problems) + "\nAnswer again.")]
    return replan, problems


def _replan_problems(session: _Session, replan: Replan, workers: list[str]) -> list[str]:
    """Everything wrong with a re-plan's edits (empty if they can be applied)."""
    plan, gone = session.subtasks, session.cancelled
    # cancelled ids stay taken: their nodes are in the graph
    existing = {**{sid: s.needs for sid, s in plan.items()}, **{sid: [] for sid in gone}}
    problems = check_plan(replan.add, workers, existing=existing,
                          max_subtasks=session.limits.max_subtasks) if replan.add else []
    problems += [f"subtask id {s.id!r} is reserved; use another" for s in replan.add
                 if _reserved(s.id)]

    def unknown(what: str, sid: str) -> str:
        return (f"{what} names subtask {sid!r}, which an earlier round cancelled"
                if sid in gone else f"{what} names unknown subtask {sid!r}")

    problems += [unknown("redo", r.id) for r in replan.redo if r.id not in plan]
    problems += [unknown("cancel", sid) for sid in replan.cancel if sid not in plan]
    redone = [r.id for r in replan.redo]
    problems += [f"subtask {sid!r} is redone twice; redo it once"
                 for sid in sorted({i for i in redone if redone.count(i) > 1})]
    cancelled = _with_dependents(plan, replan.cancel)
    for sid in dict.fromkeys(redone):
        if sid in replan.cancel:
            problems.append(f"subtask {sid!r} is both redone and cancelled; choose one")
        elif sid in cancelled:
            problems.append(f"subtask {sid!r} is redone but needs a cancelled subtask; "
                            "cancel it too, or keep what it needs")
    problems += [f"subtask {s.id!r} needs {dep!r}, which is cancelled" for s in replan.add
                 for dep in s.needs if dep in cancelled or dep in gone]
    if cancelled and len(cancelled) == len(plan) and not replan.add:
        problems.append("the edits cancel every subtask; keep or add at least one")
    if not replan.add and not replan.redo and not replan.cancel:
        problems.append("no subtask added, redone or cancelled")
    return problems


def _replan_edit(session: _Session, replan: Replan) -> Edit:
    """The live edit of a valid re-plan (``session`` follows it).

    A cancelled subtask has ended (the verify node waited for it), so its node stays as
    it is; it leaves the plan, and the next verify node and the answer no longer take its
    result, nor those of the subtasks that need it.
    """
    edit = Edit(f"re-plan after verify-{session.rounds}")
    session.drop(replan.cancel)
    # a subtask added in the same edit that needs a redone one gets the new result, and
    # the verifier judges the redone task
    revised: list[tuple[Subtask, str]] = [
        (session.subtasks[r.id].model_copy(update={"task": r.task}),
         f"{r.id}.r{session.rounds + 1}") for r in replan.redo]
    _add_subtasks(edit, session, [*revised, *((s, s.id) for s in replan.add)])
    _add_tail(edit, session, replace=True)
    return edit
