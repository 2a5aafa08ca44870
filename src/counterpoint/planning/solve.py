"""Goal -> plan -> parallel subtasks -> verify -> re-plan -> answer, as one run.

:func:`goal_graph` builds a graph with a single ``plan`` node. When it runs, the
planner's plan becomes live edits: one node per subtask (each waits only for the
subtasks it needs, so independent ones run in parallel), a ``verify-1`` node after
all of them, and an ``answer`` node after that. A verify node that finds gaps asks
the re-planner for edits and applies them (new subtasks, redone subtasks, cancelled
subtasks, a ``verify-N+1`` node, and the ``answer`` node rewired to the newest
results), until the results pass or a stop condition holds: the rounds, the token
or money budget, or the deadline. Every round is a ``plan_round`` event in the log.

A subtask checked as soon as it ends (``Limits.check``) is redone once with the
verifier's gaps; if the redone result still has gaps, it re-plans at once, while other
subtasks are pending or running (a *mid-run* re-plan): its edits are one live edit that
interrupts running subtasks it cancels, cancels the subtasks that need them (they are
not rewired: the re-planner adds replacements), rewrites subtasks that have not
started, and rewrites the waiting verify node and the answer. A mid-run re-plan uses a
round (``Limits.max_rounds`` counts verify rounds and mid-run re-plans) and is made only
when a verify round is left after it and the budgets and deadline allow.

The added nodes' steps are methods of the graph's ``plan`` step and take everything
else from their recorded inputs, and every decision is recorded before the edit it
leads to: a run resumed after a crash rebuilds its nodes from the log, and neither
plans again nor re-decides a verify round whose decision the log holds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic

from ..agents import Agent, Tool
from ..context import NodeContext
from ..errors import InvalidOutput, PlanningError
from ..events import EventKind
from ..graph import Graph
from ..ids import NodeId
from ..models import Message
from ..patch import Edit
from ..state import TERMINAL, NodeState, NodeStatus
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
    """A graph that plans ``goal`` when it runs and grows as the plan unfolds.

    A run of it can be resumed after a crash with a graph built the same way:
    ``cp.resume(run_id, graph=goal_graph(goal, team, limits))`` (the team's models may
    be new objects). Nodes whose success is in the log do not run again, and neither
    the planner nor a verify round that was decided is asked again.
    """
    graph = Graph(name)
    graph.add("plan", _GoalSteps(goal, team or Team.default(), limits or Limits()))
    return graph


class _GoalSteps:
    """The steps of one goal graph, bound to its team and limits: the ``plan`` node itself
    (``__call__``) and the steps of the subtask, verify and answer nodes its edits add.

    Nothing about a run is kept here (a graph may run many times, even at once): each
    added node gets what it needs as literal inputs (its subtask; a verify or answer
    node the plan as it stands), which the log records with the edit. A resumed run
    finds these steps through ``__counterpoint_live_steps__`` on the graph it is given
    (see :func:`counterpoint.loader.make_resolver`), so the log and that graph rebuild
    every node.
    """

    def __init__(self, goal: str, team: Team, limits: Limits) -> None:
        self.goal = goal
        self.team = team
        self.limits = limits

    @property
    def __counterpoint_live_steps__(self) -> tuple[Callable[..., Any], ...]:
        return (self.work, self.verify, self.answer)

    async def __call__(self, ctx: NodeContext) -> dict[str, Any]:
        """The ``plan`` node: plan the goal, add its subtasks, a verify and an answer node."""
        earlier = await _Earlier.read(ctx)
        plan, repairs = earlier.plan() or await make_plan(self.goal, self.team, self.limits,
                                                          ctx=ctx)
        session = _Session(self, self.goal)
        edit = Edit("plan")
        _add_subtasks(edit, session, [(s, s.id) for s in plan.subtasks])
        _add_tail(edit, session, replace=False)
        earlier.apply(ctx, edit)
        return {"decompose": plan.decompose, "subtasks": [_dump(s) for s in plan.subtasks],
                "repairs": repairs}

    async def work(self, ctx: NodeContext, subtask: dict[str, Any], goal: str,
                   **results: Any) -> Any:
        """A subtask node: its worker does ``subtask`` with its needs' ``results``."""
        return await _work(_Session(self, goal), Subtask.model_validate(subtask), results, ctx)

    async def verify(self, ctx: NodeContext, plan: dict[str, Any],
                     **results: Any) -> dict[str, Any]:
        """A ``verify-N`` node: judge the results of ``plan``; re-plan the gaps."""
        return await _verify(_Session.of(self, plan), results, ctx)

    async def answer(self, ctx: NodeContext, plan: dict[str, Any],
                     **results: Any) -> dict[str, Any]:
        """The ``answer`` node: write the cited answer from the results of ``plan``."""
        return await _answer(_Session.of(self, plan), results, ctx)


class _Snapshot(pydantic.BaseModel):
    """The plan as it stands when a verify or answer node is added: that node's literal
    input ``plan``, recorded in the log with the edit that adds the node."""

    goal: str
    subtasks: list[Subtask]
    latest: dict[str, str]
    cancelled: list[str] = []
    rounds: int
    """Verify rounds run before a verify node; for the answer node, before it."""
    midrun: int = 0
    """Re-plans made so far by checked subtasks while the plan ran (each uses a round)."""


@dataclass
class _Earlier:
    """What earlier attempts of the running node recorded, when a crash (or a failure)
    cut them short: a decision recorded there is used again instead of asking a model
    for a new one, and an edit already applied is not applied twice.

    A node records its decision (a ``plan_round``) before it applies the edit that
    follows from it, and succeeds after; the log keeps events in order, so whatever
    prefix of them survived a crash, the node can finish the same way.
    """

    rounds: list[dict[str, Any]] = field(default_factory=list)
    """This node's ``plan_round`` records from earlier attempts, in order."""
    applied: frozenset[str] = frozenset()
    """The reasons of the edits applied to the run so far."""

    @classmethod
    async def read(cls, ctx: NodeContext) -> _Earlier:
        if ctx.attempt == 1:
            return cls()  # a first attempt has nothing before it: no need to read the log
        await ctx.flush()  # an earlier attempt in this process may still be queued
        events = ctx.store.events(ctx.run_id)
        return cls(rounds=[e.data for e in events if e.kind is EventKind.PLAN_ROUND
                           and e.node == ctx.node and e.attempt < ctx.attempt and e.data],
                   applied=frozenset(str((e.data or {}).get("reason", "")) for e in events
                                     if e.kind is EventKind.PATCH_APPLIED))

    def last(self, phase: str) -> dict[str, Any] | None:
        return next((r for r in reversed(self.rounds) if r.get("phase") == phase), None)

    def plan(self) -> tuple[Plan, list[str]] | None:
        """The plan :func:`make_plan` returned to an earlier attempt, and its repairs."""
        for data in reversed(self.rounds):
            final = data.get("attempt") == "repaired" or data.get("problems") == []
            if data.get("phase") == "plan" and "plan" in data and final:
                return Plan.model_validate(data["plan"]), list(data.get("repairs") or [])
        return None

    def apply(self, ctx: NodeContext, edit: Edit) -> None:
        """Apply ``edit`` unless an earlier attempt did (edit reasons are unique per run)."""
        if edit.reason not in self.applied:
            ctx.apply(edit)


@dataclass
class _Session:
    """What one plan, verify or answer node knows of the plan while it runs.

    Built for each node from the graph's steps and the node's recorded inputs, and
    changed only by that node: nothing is shared between nodes or runs.
    """

    steps: _GoalSteps
    goal: str
    subtasks: dict[str, Subtask] = field(default_factory=dict)
    """The subtasks in the plan, by id, in plan order (cancelled ones are gone)."""
    latest: dict[str, str] = field(default_factory=dict)
    """Subtask id -> the node holding its newest result (redone subtasks move)."""
    cancelled: list[str] = field(default_factory=list)
    """Ids that re-plans took out of the plan; they are never used again."""
    rounds: int = 0
    midrun: int = 0
    """Mid-run re-plans so far (checked subtasks that re-planned while the plan ran)."""
    stopped: bool = False
    """No more verify rounds: the re-planner found no valid edit."""

    @classmethod
    def of(cls, steps: _GoalSteps, plan: Mapping[str, Any]) -> _Session:
        known = _Snapshot.model_validate(plan)
        return cls(steps, known.goal, {s.id: s for s in known.subtasks}, dict(known.latest),
                   list(known.cancelled), known.rounds, known.midrun)

    @property
    def used(self) -> int:
        """Rounds used: verify rounds run and mid-run re-plans made."""
        return self.rounds + self.midrun

    @property
    def team(self) -> Team:
        return self.steps.team

    @property
    def limits(self) -> Limits:
        return self.steps.limits

    def drop(self, cancel: Iterable[str]) -> list[tuple[str, str]]:
        """Take the subtasks in ``cancel``, and those that need them, out of the plan for
        good; returns each one's id and the node that held its newest result."""
        gone = [(sid, self.latest[sid]) for sid in _with_dependents(self.subtasks, cancel)]
        for sid, _ in gone:
            del self.subtasks[sid], self.latest[sid]
            self.cancelled.append(sid)
        return gone

    def snapshot(self, rounds: int) -> dict[str, Any]:
        return _Snapshot(goal=self.goal, subtasks=list(self.subtasks.values()),
                         latest=self.latest, cancelled=self.cancelled,
                         rounds=rounds, midrun=self.midrun).model_dump(mode="json")


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


def _add_subtask(edit: Edit, session: _Session, subtask: Subtask, node: str, *,
                 replace: bool = False) -> None:
    deps = {dep: session.latest[dep] for dep in subtask.needs}
    (edit.replace if replace else edit.add)(
        node, session.steps.work, subtask=_dump(subtask), goal=session.goal,
        **{_param(d): _ref(n) for d, n in deps.items()})


def _add_tail(edit: Edit, session: _Session, *, replace: bool,
              pending_verify: str | None = None) -> None:
    """The next verify node (if rounds remain) and the answer after it.

    ``pending_verify`` (a mid-run re-plan): the verify node that has not started yet; it
    is rewritten in place to judge the plan as it now stands.
    """
    inputs = {_param(sid): _ref(node) for sid, node in session.latest.items()}
    after: list[str] = list(session.latest.values())
    rounds = session.rounds
    if pending_verify is not None:
        edit.replace(pending_verify, session.steps.verify, plan=session.snapshot(rounds),
                     **inputs)
        after = [pending_verify]
        rounds += 1
    elif not session.stopped and session.used < session.limits.max_rounds:
        verify_id = f"verify-{session.rounds + 1}"
        edit.add(verify_id, session.steps.verify, plan=session.snapshot(rounds), **inputs)
        after = [verify_id]
        rounds += 1
    (edit.replace if replace else edit.add)("answer", session.steps.answer, after=after,
                                            plan=session.snapshot(rounds), **inputs)


async def _work(session: _Session, subtask: Subtask, results: Mapping[str, Any],
                ctx: NodeContext) -> Any:
    live = _live_plan(session.steps, ctx)
    if live is not None and subtask.id in live[0].cancelled:
        # a re-plan cancelled this node, but the log that a resumed run was rebuilt from
        # lost the cancellation the edit implied, so it started anyway: its result
        # would reach nothing, so no worker is asked for it
        return None
    worker = session.team.workers[subtask.worker]
    agent = worker if isinstance(worker, Agent) else _tool_agent(worker, session)
    context = fit({_unparam(k): _text(v) for k, v in results.items()},
                  session.limits.context_chars)
    task = (f"Overall goal: {session.goal}\nYour subtask ({subtask.id}): {subtask.task}"
            + (f"\nExpected result: {subtask.expected}" if subtask.expected else ""))
    result = await agent.run(task, context=context or None, ctx=ctx)
    output = result.output
    if subtask.id in session.limits.check or "*" in session.limits.check:
        earlier = await _Earlier.read(ctx)
        judged = earlier.last("check")  # checked before a crash: keep it
        gaps = list(judged["gaps"]) if judged else await _check(session, subtask, output, ctx)
        if gaps:  # redo once, with what the verifier found
            feedback = "\n".join(f"- {g}" for g in gaps)
            retry = await agent.run(f"{task}\nA first attempt had these problems; avoid "
                                    f"them:\n{feedback}", context=context or None, ctx=ctx)
            output = retry.output
            _record(ctx, {"phase": "check", "subtask": subtask.id, "redone": True,
                          "gaps": gaps})
            await _after_redo(session, subtask, output, ctx, earlier)
    return output.model_dump(mode="json") if isinstance(output, pydantic.BaseModel) else output


async def _after_redo(session: _Session, subtask: Subtask, output: Any, ctx: NodeContext,
                      earlier: _Earlier) -> None:
    """Check a redone subtask again; if gaps remain, re-plan now, while the plan runs.

    Only when a round is left for the re-plan and a verify round after it (and the
    budgets and deadline allow): otherwise the redone result stands, unchecked, and the
    verify rounds judge it. A decision an earlier attempt recorded is used again.
    """
    rejudged = earlier.last("recheck")
    if rejudged is None and earlier.last("replan") is None:
        live = _live_plan(session.steps, ctx)
        if live is None or _stop_reason(live[0], ctx, extra=1) is not None:
            return
    gaps = (list(rejudged["gaps"]) if rejudged is not None
            else await _check(session, subtask, output, ctx, again=True))
    if gaps:
        await _midrun_replan(session.steps, subtask, gaps, output, ctx, earlier)


async def _check(session: _Session, subtask: Subtask, output: Any,
                 ctx: NodeContext, *, again: bool = False) -> list[str]:
    """The verifier's gaps in one subtask's result (empty if it passes); ``again`` for
    the redone result (a ``recheck``)."""
    team = session.team
    generation = await team.verifier.model.generate(
        f"Goal: {session.goal}\n\nSubtask [{subtask.id}]: {subtask.task}"
        + (f" (expected: {subtask.expected})" if subtask.expected else "")
        + f"\nresult: {fit({'result': _text(output)}, session.limits.context_chars)['result']}",
        system=team.verifier.instructions, output=Verdict,
        max_tokens=team.verifier.turn_tokens * 2, ctx=ctx,
        purpose=f"{'recheck' if again else 'check'} {subtask.id}")
    verdict = generation.output
    assert verdict is not None
    gaps = [g.problem for g in verdict.gaps] or ([] if verdict.complete else
                                                 ["the result does not do the subtask"])
    _record(ctx, {"phase": "recheck" if again else "check", "subtask": subtask.id,
                  "complete": not gaps, "gaps": gaps})
    return gaps


def _tool_agent(tool: Tool, session: _Session) -> Agent:
    return Agent(f"{tool.name}-caller", model=session.team.synthesizer.model,
                 instructions=f"Call the tool {tool.name} to do the subtask, then report "
                              "its result briefly.", tools=[tool],
                 max_turns=session.limits.worker_turns)


async def _verify(session: _Session, results: Mapping[str, Any],
                  ctx: NodeContext) -> dict[str, Any]:
    earlier = await _Earlier.read(ctx)
    session.rounds += 1
    shown = _results_text(session, results)
    judged = earlier.last("verify")
    if judged is None:
        team = session.team
        # a verdict is structured output, like a plan: one cut off at the token limit
        # cannot be read, so the verifier gets two turns' tokens, as the planner does
        generation = await team.verifier.model.generate(
            f"Goal: {session.goal}\n\nSubtasks and results:\n{shown}",
            system=team.verifier.instructions, output=Verdict,
            max_tokens=team.verifier.turn_tokens * 2, ctx=ctx,
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
    answer_type = replan_type(sorted(team.workers), limits.max_subtasks)
    replan: Replan | None = None
    problems: list[str] = []
    for attempt in range(1, limits.plan_attempts + 1):
        generation = await team.replanner.model.generate(
            conversation, system=team.replanner.instructions, output=answer_type,
            max_tokens=team.replanner.turn_tokens * 2, ctx=ctx,
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


def _with_dependents(plan: Mapping[str, Subtask], cancel: Iterable[str]) -> list[str]:
    """The subtasks of ``plan`` in ``cancel`` and those that need them, in plan order."""
    gone = {sid for sid in cancel if sid in plan}
    grew = bool(gone)
    while grew:
        grew = False
        for sid, subtask in plan.items():
            if sid not in gone and any(dep in gone for dep in subtask.needs):
                gone.add(sid)
                grew = True
    return [sid for sid in plan if sid in gone]


# ------------------------------------------------------------ mid-run re-plans
_TAIL_STARTED = "the verify and answer nodes have started; nothing can change now"
async def _midrun_replan(steps: _GoalSteps, subtask: Subtask, gaps: Sequence[str],
                         output: Any, ctx: NodeContext, earlier: _Earlier) -> None:
    """A checked subtask whose redone result still has gaps asks the re-planner now,
    while other subtasks may be pending or running, and applies its answer as one live
    edit (:func:`_midrun_edit`). The decision is recorded before the edit, and an earlier
    attempt's decision is used again."""
    reason = f"re-plan after the check of {ctx.node}"
    decided = earlier.last("replan")
    if decided is None:
        live = _live_plan(steps, ctx)
        if live is None:
            return
        session = live[0]
        head = {"phase": "replan", "midrun": True, "after": subtask.id,
                "round": session.used + 1}
        stop = _stop_reason(session, ctx, extra=1)
        if stop is not None:
            decided = {**head, "applied": False, "stop": stop}
        else:
            def problems_of(replan: Replan) -> list[str]:
                now = _live_plan(steps, ctx)
                return ([_TAIL_STARTED]
                        if now is None else _midrun_problems(now[0], replan, ctx))

            gap_lines = "\n".join(f"- {g}" for g in gaps)
            question = (
                f"Goal: {session.goal}\n\nWorkers:\n{session.team.describe_workers()}\n\n"
                f"Subtasks as they stand (some have not finished):\n"
                f"{_live_results(session, ctx, output)}\n\nSubtask {subtask.id} was checked, "
                f"redone with the verifier's feedback, and still has these gaps:\n"
                f"{gap_lines}\n\nClose the gaps now, while the plan runs: add subtasks with "
                "new ids, redo subtasks that have not started, or cancel subtasks that do "
                "not serve the goal (a running one is stopped; the subtasks that need a "
                "cancelled one are cancelled too, and none of them reach the answer).")
            replan, problems = await _ask(session, question, ctx, f"replan {ctx.node}",
                                          problems_of)
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
    if not decided.get("applied") or reason in earlier.applied:
        return
    live = _live_plan(steps, ctx)
    if live is not None:  # (None: resumed after the tail started; nothing left to edit)
        ctx.apply(_midrun_edit(live[0], Replan.model_validate(decided["edits"]), ctx,
                               reason, live[1]))


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
