"""Goal -> plan -> parallel subtasks -> verify -> re-plan -> answer, as one graph.

:func:`goal_graph` builds a graph with a single ``plan`` node. When it runs, the planner's
plan (:mod:`.planner`) becomes live edits: one node per subtask (:mod:`.subtasks`), laid
out in the topology the plan calls for or ``Limits.topology`` forces (:mod:`.topology`:
one agent for the whole goal, a fan-out where independent subtasks run in parallel, a
chain, or one node per independent sub-goal), a ``verify-1``
node after all of them (:mod:`.verify`), and an ``answer`` node after that, which writes
the cited answer. A verify node that finds gaps re-plans until the results pass or a stop
condition holds, and a checked subtask may re-plan while the plan runs (:mod:`.midrun`);
every round is a ``plan_round`` event in the log. The added nodes' steps are methods of
the graph's ``plan`` step (:class:`_GoalSteps`) and take everything else from their
recorded inputs (:mod:`.session`), and every decision is recorded before the edit it
leads to: a run resumed after a crash rebuilds its nodes from the log, and neither plans
again nor re-decides a verify round whose decision the log holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ..budget import Budget
from ..context import NodeContext
from ..events import EventKind
from ..graph import Graph
from ..patch import Edit
from .plan import Subtask
from .planner import check_goal, make_plan
from .session import _dump, _Earlier, _Session
from .subtasks import _work
from .team import Limits, Team
from .topology import lay_out, topology_for
from .verify import _verify
from .wiring import _add_subtasks, _add_tail, _results_text


def goal_graph(goal: str, team: Team | None = None, limits: Limits | None = None,
               *, name: str = "goal", budget: Budget | None = None,
               deadline: float | None = None) -> Graph:
    """A graph that plans ``goal`` when it runs and grows as the plan unfolds.

    A run of it can be resumed after a crash with a graph built the same way:
    ``cp.resume(run_id, graph=goal_graph(goal, team, limits))`` (the team's models may
    be new objects). Nodes whose success is in the log do not run again, and neither
    the planner nor a verify round that was decided is asked again.

    ``budget`` and ``deadline`` (seconds) are the goal run's hard limits when the caller
    sets none in ``RunOptions``: every model call of the planner, the workers, the
    verifier and the synthesizer reserves in that budget before it is sent (see
    :mod:`counterpoint.budget`), and the deadline stops what is left. ``limits`` only
    stops re-planning.
    """
    check_goal(goal)
    graph = Graph(name)
    graph.budget, graph.deadline = budget, deadline
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
        planned = earlier.plan()
        plan, repairs = planned or await make_plan(self.goal, self.team, self.limits, ctx=ctx)
        # the shape is a function of the plan and the option: a resumed run lays out
        # the same nodes from the plan its log holds
        choice = topology_for(plan.subtasks, self.limits.topology)
        laid = lay_out(plan.subtasks, choice.shape, self.goal)
        if planned is None:  # (a resumed run recorded its choice with its plan)
            ctx.record(EventKind.TOPOLOGY_CHOSEN, {
                "shape": choice.shape.value, "why": choice.why, "forced": choice.forced,
                "nodes": [s.id for s in laid], **dataclasses.asdict(choice.measures)})
        session = _Session(self, self.goal)
        edit = Edit("plan")
        _add_subtasks(edit, session, [(s, s.id) for s in laid])
        _add_tail(edit, session, replace=False)
        earlier.apply(ctx, edit)
        return {"decompose": plan.decompose, "subtasks": [_dump(s) for s in laid],
                "topology": choice.shape.value, "repairs": repairs,
                **({"planned": [_dump(s) for s in plan.subtasks]} if laid != plan.subtasks
                   else {})}

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


async def _answer(session: _Session, results: Mapping[str, Any],
                  ctx: NodeContext) -> dict[str, Any]:
    team = session.team
    shown = _results_text(session, results)
    generation = await team.synthesizer.model.generate(
        f"Goal: {session.goal}\n\nSubtask results:\n{shown}\n\nWrite the final answer.",
        system=team.synthesizer.instructions, max_tokens=team.call_tokens("synthesizer"),
        ctx=ctx, purpose="synthesize")
    text = generation.text.strip()
    cited = sorted(sid for sid in session.subtasks if f"[{sid}]" in text)
    return {"answer": text, "cited": cited, "rounds": session.rounds}
