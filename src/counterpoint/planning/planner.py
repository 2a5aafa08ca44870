"""Asking the planner for a plan of a goal: re-asking with the problems, then repairing.

:func:`make_plan` is the planning entry point, used by the graph's ``plan`` node and on its
own (``counterpoint plan``). Every attempt is recorded as a ``plan_round`` when it runs in a
node, so a resumed ``plan`` node takes the plan from the log instead of asking again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..context import NodeContext
from ..errors import InvalidOutput, PlanningError, UserError
from ..models import Message
from .plan import (
    Plan,
    Subtask,
    check_plan,
    merge_repeats,
    plan_type,
    repair_plan,
    salvage_subtasks,
)
from .session import _dump, _record
from .team import Limits, Team
from .wiring import _reserved


async def make_plan(goal: str, team: Team, limits: Limits | None = None, *,
                    ctx: NodeContext | None = None,
                    stream: Callable[[str], None] | None = None) -> tuple[Plan, list[str]]:
    """Ask the planner for a valid plan; re-ask with the problems, then repair or fail.

    Returns the plan and the repairs made (empty when the planner got it right). A
    valid plan's repeats (the same task for the same worker on the same inputs) are
    merged (:func:`~.plan.merge_repeats`), and said among the repairs.
    ``stream`` receives the planner's answers as they arrive (``counterpoint plan``'s
    spinner counts them).

    *Whether to decompose* is decided by the number of subtasks the planner lists:
    the prompt asks it to decide first and to give exactly one subtask for a simple
    goal, which becomes one node (``Plan.decompose`` is false). The answer schema has
    no ``decompose`` field, so a decision and a list that disagree cannot be written;
    an answer that carries one anyway (an unconstrained provider) keeps every listed
    subtask, and the contradiction is recorded in the plan round.

    *Attempts* (``limits.plan_attempts``): an answer that does not validate against
    the schema (``InvalidOutput``, such as JSON cut off at the token limit) counts as
    one, as does a plan with problems (``check_plan``); the planner is asked again
    with the errors or problems. The first ask is at temperature 0 (and may come from
    the response cache); re-asks use ``limits.reask_temperature`` and the attempt
    number as seed, and never the cache, so they do not return the same answer. After
    the last attempt the latest plan read (or the complete subtasks read from an
    unreadable answer) is repaired by dropping what is wrong; if nothing is left,
    :class:`PlanningError`.

    The worker list and the size limit go in the model's ``context`` (the stable
    prompt prefix, shared by every planning call with this team); the user message
    holds only the goal.
    """
    check_goal(goal)
    limits = limits or Limits()
    workers = sorted(team.workers)
    answer_type = plan_type(workers, limits.max_subtasks, team.skill_tags())
    planner = team.planner
    n = limits.max_subtasks
    context = [f"Workers:\n{team.describe_workers()}",
               f"Plan at most {n} subtask{'s' if n > 1 else ''} (ids t1 to t{n})."]
    conversation = [Message.user(f"Goal: {goal}")]
    note = ""  # why the last answer could not be read; added to the next ask
    problems: list[str] = []
    latest: list[Subtask] = []  # the newest subtasks read (a plan, or salvaged): for repair
    for attempt in range(1, limits.plan_attempts + 1):
        reask = attempt > 1
        asked = conversation if not note else [
            *conversation[:-1], Message.user(f"{conversation[-1].content}\n\n{note}")]
        try:
            generation = await planner.model.generate(
                asked, system=planner.instructions, context=context, output=answer_type,
                max_tokens=team.call_tokens("planner", answer_type), ctx=ctx,
                purpose=f"plan {attempt}",
                temperature=limits.reask_temperature if reask else 0.0,
                seed=attempt if reask else None, cache=False if reask else None,
                stream=stream or False)
        except InvalidOutput as exc:
            cut = _cut_off(exc.raw)
            salvaged = [s for s in salvage_subtasks(exc.raw) if not _reserved(s.id)]
            latest = salvaged or latest
            problems = [f"the answer was cut off at the token limit ({exc.errors})" if cut
                        else f"the answer is not a valid plan: {exc.errors}"]
            note = _unreadable_note(exc.errors, cut, n)
            _record(ctx, {"phase": "plan", "goal": goal, "attempt": attempt, "invalid": exc.errors,
                          "cut_off": cut, "salvaged": [s.id for s in salvaged],
                          "problems": problems})
            continue
        answer = generation.output
        assert answer is not None
        plan = answer.plan()
        latest, note = list(plan.subtasks), ""
        problems = check_plan(plan.subtasks, workers, max_subtasks=n)
        problems += [f"subtask id {s.id!r} is reserved; use another" for s in plan.subtasks
                     if _reserved(s.id)]
        round_data: dict[str, Any] = {"phase": "plan", "goal": goal, "attempt": attempt,
                                      "plan": _dump(plan), "problems": problems}
        merges: list[str] = []
        if not problems:  # a valid plan: its repeats run once (recorded as repairs)
            merged, merges = merge_repeats(plan.subtasks)
            if merges:
                plan = Plan(decompose=len(merged) > 1, subtasks=merged)
                round_data.update(answered=round_data["plan"], plan=_dump(plan),
                                  repairs=merges)
        if answer.claimed_decompose is not None and answer.claimed_decompose != plan.decompose:
            round_data["contradiction"] = (
                f"the answer says decompose={str(answer.claimed_decompose).lower()} but "
                f"lists {len(plan.subtasks)} subtask(s); all of them are kept")
        _record(ctx, round_data)
        if not problems:
            return plan, merges
        conversation = [*asked, generation.response.message(), Message.user(
            "The plan has problems:\n- " + "\n- ".join(problems)
            + "\nAnswer again with a corrected plan.")]
    kept = [s for s in latest if not _reserved(s.id)]
    repaired, fixes = repair_plan(kept[:n], workers)
    if len(kept) > n:
        fixes.insert(0, f"dropped subtasks after the first {n}: "
                        f"{[s.id for s in kept[n:]]}")
    repaired, merges = merge_repeats(repaired)
    fixes += merges
    if not repaired:
        raise PlanningError(
            f"planner{_where(ctx)}: no valid plan after {limits.plan_attempts} attempt"
            f"{'s' if limits.plan_attempts > 1 else ''} with model {planner.model.name}: "
            f"{'; '.join(problems)}. Give the planner a "
            "stronger model (Team.default(planner=...)) or more attempts "
            "(Limits(plan_attempts=...)).")
    fixed = Plan(decompose=len(repaired) > 1, subtasks=repaired)
    _record(ctx, {"phase": "plan", "goal": goal, "attempt": "repaired", "plan": _dump(fixed),
                  "repairs": fixes})
    return fixed, fixes


def check_goal(goal: object) -> None:
    """A :class:`UserError` unless ``goal`` is a sentence: an empty goal would be
    planned as it is (the planner's model makes up a task for it)."""
    if not isinstance(goal, str):
        raise UserError(f"the goal must be a sentence (str), got {type(goal).__name__}; "
                        "say what to achieve, e.g. goal_graph(\"Compare Lisbon and Porto "
                        "for a weekend\")")
    if not goal.strip():
        raise UserError(f"the goal is empty ({goal!r}); say what to achieve, e.g. "
                        "counterpoint run \"Compare Lisbon and Porto for a weekend\"")


def _cut_off(text: str) -> bool:
    """Whether ``text`` is JSON that stops before its end (the token limit cut it)."""
    text = text.strip()
    if not text:
        return False
    try:
        json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        return exc.pos >= len(text) or exc.msg.startswith("Unterminated string")
    return False


def _unreadable_note(errors: str, cut: bool, max_subtasks: int) -> str:
    """What the planner is told about an answer that did not validate."""
    why = ("Your last answer was cut off at the token limit before its JSON ended. "
           if cut else f"Your last answer was not a valid plan: {errors}. ")
    return (why + f"Answer with a complete, short plan: at most {max_subtasks} "
            "subtasks, one or two sentences each, and in needs only the ids of earlier "
            "subtasks whose results it uses.")


def _where(ctx: NodeContext | None) -> str:
    return f" (run {ctx.run_id}, node {ctx.node!r})" if ctx is not None else ""
