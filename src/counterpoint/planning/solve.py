"""Goal -> plan -> parallel subtasks -> verify -> re-plan -> answer, as one run.

:func:`goal_graph` builds a graph with a single ``plan`` node. When it runs, the
planner's plan becomes live edits: one node per subtask (each waits only for the
subtasks it needs, so independent ones run in parallel), a ``verify-1`` node after
all of them, and an ``answer`` node after that. A verify node that finds gaps asks
the re-planner for edits and applies them (new subtasks, redone subtasks, a
``verify-N+1`` node, and the ``answer`` node rewired to the newest results),
until the results pass or a stop condition holds: the rounds, the token or
money budget, or the deadline. Every round is a ``plan_round`` event in the log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic

from ..agents import Agent, Tool
from ..context import NodeContext
from ..errors import InvalidOutput, RunFailure
from ..events import EventKind
from ..graph import Graph
from ..models import Message
from ..patch import Edit
from .fitting import fit
from .plan import (
    Plan,
    Replan,
    Subtask,
    Verdict,
    check_plan,
    plan_type,
    repair_plan,
    replan_type,
    salvage_subtasks,
)
from .team import Limits, Team

RESERVED = frozenset({"plan", "answer"})


def _reserved(subtask_id: str) -> bool:
    """Ids the graph's own nodes use (``plan``, ``answer``, ``verify-N``)."""
    return subtask_id in RESERVED or subtask_id.startswith("verify-")


class PlanningError(RunFailure):
    """The planner produced no usable plan within its attempts."""

    retryable = False


@dataclass
class _Session:
    """What a planned run knows as it goes (verify nodes run one after another)."""

    goal: str
    team: Team
    limits: Limits
    subtasks: dict[str, Subtask] = field(default_factory=dict)
    latest: dict[str, str] = field(default_factory=dict)
    """Subtask id -> the node holding its newest result (redone subtasks move)."""
    rounds: int = 0
    stopped: bool = False
    """No more verify rounds: the re-planner found no valid edit."""


# --------------------------------------------------------------------- planning
async def make_plan(goal: str, team: Team, limits: Limits | None = None, *,
                    ctx: NodeContext | None = None) -> tuple[Plan, list[str]]:
    """Ask the planner for a valid plan; re-ask with the problems, then repair or fail.

    Returns the plan and the repairs made (empty when the planner got it right).

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
    limits = limits or Limits()
    workers = sorted(team.workers)
    answer_type = plan_type(workers, limits.max_subtasks)
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
                max_tokens=planner.turn_tokens * 2, ctx=ctx, purpose=f"plan {attempt}",
                temperature=limits.reask_temperature if reask else 0.0,
                seed=attempt if reask else None, cache=False if reask else None)
        except InvalidOutput as exc:
            cut = _cut_off(exc.raw)
            salvaged = [s for s in salvage_subtasks(exc.raw) if not _reserved(s.id)]
            latest = salvaged or latest
            problems = [f"the answer was cut off at the token limit ({exc.errors})" if cut
                        else f"the answer is not a valid plan: {exc.errors}"]
            note = _unreadable_note(exc.errors, cut, n)
            _record(ctx, {"phase": "plan", "attempt": attempt, "invalid": exc.errors,
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
        round_data: dict[str, Any] = {"phase": "plan", "attempt": attempt,
                                      "plan": _dump(plan), "problems": problems}
        if answer.claimed_decompose is not None and answer.claimed_decompose != plan.decompose:
            round_data["contradiction"] = (
                f"the answer says decompose={str(answer.claimed_decompose).lower()} but "
                f"lists {len(plan.subtasks)} subtask(s); all of them are kept")
        _record(ctx, round_data)
        if not problems:
            return plan, []
        conversation = [*asked, generation.response.message(), Message.user(
            "The plan has problems:\n- " + "\n- ".join(problems)
            + "\nAnswer again with a corrected plan.")]
    kept = [s for s in latest if not _reserved(s.id)]
    repaired, fixes = repair_plan(kept[:n], workers)
    if len(kept) > n:
        fixes.insert(0, f"dropped subtasks after the first {n}: "
                        f"{[s.id for s in kept[n:]]}")
    if not repaired:
        raise PlanningError(
            f"planner{_where(ctx)}: no valid plan after {limits.plan_attempts} attempt"
            f"{'s' if limits.plan_attempts > 1 else ''} with model {planner.model.name}: "
            f"{'; '.join(problems)}. Give the planner a "
            "stronger model (Team.default(planner=...)) or more attempts "
            "(Limits(plan_attempts=...)).")
    fixed = Plan(decompose=len(repaired) > 1, subtasks=repaired)
    _record(ctx, {"phase": "plan", "attempt": "repaired", "plan": _dump(fixed),
                  "repairs": fixes})
    return fixed, fixes


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


def goal_graph(goal: str, team: Team | None = None, limits: Limits | None = None,
               *, name: str = "goal") -> Graph:
    """A graph that plans ``goal`` when it runs and grows as the plan unfolds."""
    team = team or Team.default()
    limits = limits or Limits()
    graph = Graph(name)

    async def plan(ctx: NodeContext) -> dict[str, Any]:
        # a session per run (and per attempt): the graph may be run many times
        session = _Session(goal=goal, team=team, limits=limits)
        made, repairs = await make_plan(goal, team, limits, ctx=ctx)
        edit = Edit("plan")
        _add_subtasks(edit, session, [(s, s.id) for s in made.subtasks])
        _add_tail(edit, session, replace=False)
        ctx.apply(edit)
        return {"decompose": made.decompose, "subtasks": [_dump(s) for s in made.subtasks],
                "repairs": repairs}

    graph.add("plan", plan)
    return graph


# ------------------------------------------------------------------- the nodes
def _add_subtasks(edit: Edit, session: _Session,
                  placed: Sequence[tuple[Subtask, str]]) -> None:
    """Record each subtask and the node holding its result, then add the nodes.

    Recording all of them first lets a subtask need one listed after it.
    """
    for subtask, node in placed:
        session.subtasks[subtask.id] = subtask
        session.latest[subtask.id] = node
    for subtask, node in placed:
        _add_subtask(edit, session, subtask, node)


def _add_subtask(edit: Edit, session: _Session, subtask: Subtask, node: str) -> None:
    deps = {dep: session.latest[dep] for dep in subtask.needs}

    async def work(ctx: NodeContext, **results: Any) -> Any:
        return await _work(session, subtask, results, ctx)

    edit.add(node, work, **{_param(d): _ref(n) for d, n in deps.items()})


def _add_tail(edit: Edit, session: _Session, *, replace: bool) -> None:
    """The next verify node (if rounds remain) and the answer after it."""
    inputs = {_param(sid): _ref(node) for sid, node in session.latest.items()}
    after: list[str] = list(session.latest.values())
    if not session.stopped and session.rounds < session.limits.max_rounds:
        verify_id = f"verify-{session.rounds + 1}"

        async def verify(ctx: NodeContext, **results: Any) -> dict[str, Any]:
            return await _verify(session, results, ctx)

        edit.add(verify_id, verify, **inputs)
        after = [verify_id]

    async def answer(ctx: NodeContext, **results: Any) -> dict[str, Any]:
        return await _answer(session, results, ctx)

    (edit.replace if replace else edit.add)("answer", answer, after=after, **inputs)


async def _work(session: _Session, subtask: Subtask, results: Mapping[str, Any],
                ctx: NodeContext) -> Any:
    worker = session.team.workers[subtask.worker]
    agent = worker if isinstance(worker, Agent) else _tool_agent(worker, session)
    context = fit({_unparam(k): _text(v) for k, v in results.items()},
                  session.limits.context_chars)
    task = (f"Overall goal: {session.goal}\nYour subtask ({subtask.id}): {subtask.task}"
            + (f"\nExpected result: {subtask.expected}" if subtask.expected else ""))
    result = await agent.run(task, context=context or None, ctx=ctx)
    output = result.output
    if subtask.id in session.limits.check or "*" in session.limits.check:
        gaps = await _check(session, subtask, output, ctx)
        if gaps:  # redo once, with what the verifier found
            feedback = "\n".join(f"- {g}" for g in gaps)
            retry = await agent.run(f"{task}\nA first attempt had these problems; avoid "
                                    f"them:\n{feedback}", context=context or None, ctx=ctx)
            output = retry.output
            _record(ctx, {"phase": "check", "subtask": subtask.id, "redone": True,
                          "gaps": gaps})
    return output.model_dump(mode="json") if isinstance(output, pydantic.BaseModel) else output


async def _check(session: _Session, subtask: Subtask, output: Any,
                 ctx: NodeContext) -> list[str]:
    """The verifier's gaps in one subtask's result (empty if it passes)."""
    team = session.team
    generation = await team.verifier.model.generate(
        f"Goal: {session.goal}\n\nSubtask [{subtask.id}]: {subtask.task}"
        + (f" (expected: {subtask.expected})" if subtask.expected else "")
        + f"\nresult: {fit({'result': _text(output)}, session.limits.context_chars)['result']}",
        system=team.verifier.instructions, output=Verdict, max_tokens=team.verifier.turn_tokens,
        ctx=ctx, purpose=f"check {subtask.id}")
    verdict = generation.output
    assert verdict is not None
    gaps = [g.problem for g in verdict.gaps] or ([] if verdict.complete else
                                                 ["the result does not do the subtask"])
    _record(ctx, {"phase": "check", "subtask": subtask.id, "complete": not gaps,
                  "gaps": gaps})
    return gaps


def _tool_agent(tool: Tool, session: _Session) -> Agent:
    return Agent(f"{tool.name}-caller", model=session.team.synthesizer.model,
                 instructions=f"Call the tool {tool.name} to do the subtask, then report "
                              "its result briefly.", tools=[tool],
                 max_turns=session.limits.worker_turns)


async def _verify(session: _Session, results: Mapping[str, Any],
                  ctx: NodeContext) -> dict[str, Any]:
    session.rounds += 1
    team = session.team
    shown = _results_text(session, results)
    generation = await team.verifier.model.generate(
        f"Goal: {session.goal}\n\nSubtasks and results:\n{shown}",
        system=team.verifier.instructions, output=Verdict, max_tokens=team.verifier.turn_tokens,
        ctx=ctx, purpose=f"verify {session.rounds}")
    verdict = generation.output
    assert verdict is not None
    stop = None if not verdict.gaps and verdict.complete else _stop_reason(session, ctx)
    _record(ctx, {"phase": "verify", "round": session.rounds, "complete": verdict.complete,
                  "gaps": [g.model_dump() for g in verdict.gaps], "stop": stop})
    if verdict.complete and not verdict.gaps:
        return {"round": session.rounds, "complete": True, "gaps": []}
    if stop is not None:
        return {"round": session.rounds, "complete": False, "stopped": stop,
                "gaps": [g.model_dump() for g in verdict.gaps]}
    edits = await _replan(session, verdict, shown, ctx)
    return {"round": session.rounds, "complete": False, "replanned": edits,
            "gaps": [g.model_dump() for g in verdict.gaps]}


def _stop_reason(session: _Session, ctx: NodeContext) -> str | None:
    limits = session.limits
    usage = ctx.usage
    if session.rounds >= limits.max_rounds:
        return f"max rounds ({limits.max_rounds}) reached"
    if limits.max_tokens is not None and usage.tokens >= limits.max_tokens:
        return f"token budget used ({usage.tokens:,} of {limits.max_tokens:,})"
    if limits.max_cost is not None and usage.cost >= limits.max_cost:
        return f"money budget used (${usage.cost:.4f} of ${limits.max_cost:.4f})"
    # the run's own deadline cancels whatever is left when it passes: stop re-planning
    # before that too, so the answer still gets written
    run_deadline = ctx._execution.options.deadline  # not on NodeContext's public surface
    deadlines = [d for d in (limits.deadline, run_deadline) if d is not None]
    if deadlines and time.time() - ctx.run_started_at >= 0.7 * min(deadlines):
        return f"deadline near ({min(deadlines):g}s)"
    return None


async def _replan(session: _Session, verdict: Verdict, shown: str,
                  ctx: NodeContext) -> dict[str, Any]:
    team, limits = session.team, session.limits
    workers = sorted(team.workers)
    existing = {sid: s.needs for sid, s in session.subtasks.items()}
    gaps = "\n".join(f"- {g.problem}" + (f" (subtask {g.subtask})" if g.subtask else "")
                     for g in verdict.gaps) or "- the verifier found the results incomplete"
    conversation = [Message.user(
        f"Goal: {session.goal}\n\nWorkers:\n{team.describe_workers()}\n\nCurrent subtasks "
        f"and results:\n{shown}\n\nGaps:\n{gaps}\n\nAdd subtasks with new ids or redo "
        "existing ones to close the gaps.")]
    answer_type = replan_type(workers, limits.max_subtasks)
    replan: Replan | None = None
    problems: list[str] = []
    for attempt in range(1, limits.plan_attempts + 1):
        generation = await team.replanner.model.generate(
            conversation, system=team.replanner.instructions, output=answer_type,
            max_tokens=team.replanner.turn_tokens * 2, ctx=ctx,
            purpose=f"replan {session.rounds}.{attempt}")
        replan = generation.output
        assert replan is not None
        problems = check_plan(replan.add, workers, existing=existing,
                              max_subtasks=limits.max_subtasks) if replan.add else []
        problems += [f"redo names unknown subtask {r.id!r}" for r in replan.redo
                     if r.id not in session.subtasks]
        problems += [f"subtask id {s.id!r} is reserved; use another" for s in replan.add
                     if _reserved(s.id)]
        redone = [r.id for r in replan.redo]
        problems += [f"subtask {sid!r} is redone twice; redo it once"
                     for sid in sorted({i for i in redone if redone.count(i) > 1})]
        if not replan.add and not replan.redo:
            problems.append("no subtask added or redone")
        if not problems:
            break
        conversation = [*conversation, generation.response.message(), Message.user(
            "These edits have problems:\n- " + "\n- ".join(problems) + "\nAnswer again.")]
    if replan is None or problems:
        _record(ctx, {"phase": "replan", "round": session.rounds, "applied": False,
                      "problems": problems})
        edit = Edit(f"round {session.rounds}: no valid re-plan")
        session.stopped = True  # nothing to add: answer with what there is
        _add_tail(edit, session, replace=True)
        ctx.apply(edit)
        return {"applied": False, "problems": problems}
    edit = Edit(f"re-plan after verify-{session.rounds}")
    # a subtask added in the same edit that needs a redone one gets the new result, and
    # the verifier judges the redone task
    revised: list[tuple[Subtask, str]] = [
        (session.subtasks[r.id].model_copy(update={"task": r.task}),
         f"{r.id}.r{session.rounds + 1}") for r in replan.redo]
    _add_subtasks(edit, session, [*revised, *((s, s.id) for s in replan.add)])
    _add_tail(edit, session, replace=True)
    ctx.apply(edit)
    applied = {"applied": True, "added": [s.id for s in replan.add],
               "redone": [r.id for r in replan.redo]}
    _record(ctx, {"phase": "replan", "round": session.rounds, **applied})
    return applied


async def _answer(session: _Session, results: Mapping[str, Any],
                  ctx: NodeContext) -> dict[str, Any]:
    team = session.team
    shown = _results_text(session, results)
    generation = await team.synthesizer.model.generate(
        f"Goal: {session.goal}\n\nSubtask results:\n{shown}\n\nWrite the final answer.",
        system=team.synthesizer.instructions, max_tokens=team.synthesizer.turn_tokens,
        ctx=ctx, purpose="synthesize")
    text = generation.text.strip()
    cited = sorted(sid for sid in session.subtasks if f"[{sid}]" in text)
    return {"answer": text, "cited": cited, "rounds": session.rounds}


# --------------------------------------------------------------------- helpers
def _results_text(session: _Session, results: Mapping[str, Any]) -> str:
    by_id = {_unparam(k): _text(v) for k, v in results.items()}
    fitted = fit(by_id, session.limits.context_chars)
    lines = []
    for sid, subtask in session.subtasks.items():
        expected = f" (expected: {subtask.expected})" if subtask.expected else ""
        lines.append(f"[{sid}] {subtask.task}{expected}\nresult: {fitted.get(sid, '(none)')}")
    return "\n\n".join(lines)


def _param(subtask_id: str) -> str:
    """A keyword-safe parameter name for a subtask id (ids may hold ``.`` and ``-``)."""
    return "r_" + "".join(c if c.isalnum() else f"_{ord(c):x}_" for c in subtask_id)


def _unparam(name: str) -> str:
    body = name[2:]
    out, i = [], 0
    while i < len(body):
        if body[i] == "_":
            end = body.index("_", i + 1)
            out.append(chr(int(body[i + 1:end], 16)))
            i = end + 1
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def _ref(node: str) -> Any:
    from ..graph import NodeRef
    from ..ids import NodeId
    return NodeRef(NodeId(node))


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _dump(model: pydantic.BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")


def _record(ctx: NodeContext | None, data: dict[str, Any]) -> None:
    if ctx is not None:
        ctx.record(EventKind.PLAN_ROUND, data)


def _where(ctx: NodeContext | None) -> str:
    return f" (run {ctx.run_id}, node {ctx.node!r})" if ctx is not None else ""


def subtask_tree(plan: Plan) -> list[tuple[int, Subtask]]:
    """The subtasks in dependency order with their depth, for printing a plan."""
    depth: dict[str, int] = {}
    ordered: list[tuple[int, Subtask]] = []
    remaining: Sequence[Subtask] = list(plan.subtasks)
    while remaining:
        progressed = []
        for s in remaining:
            if all(d in depth for d in s.needs):
                depth[s.id] = 1 + max((depth[d] for d in s.needs), default=-1)
                ordered.append((depth[s.id], s))
                progressed.append(s.id)
        if not progressed:
            ordered.extend((0, s) for s in remaining if s.id not in depth)
            break
        remaining = [s for s in remaining if s.id not in depth]
    return ordered
