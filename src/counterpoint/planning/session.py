"""What a node of a goal run knows of the plan, and what its earlier attempts recorded.

Nothing about a run is kept on the graph's steps: each node builds a :class:`_Session`
(the ``plan`` node from nothing, a verify or answer node from the ``plan`` input its edit
recorded, a :class:`_Snapshot`), changes it as it decides, and writes it into the inputs
of the nodes it adds. A node's
decisions are ``plan_round`` records written before the edits they lead to
(:func:`_record`), and :class:`_Earlier` reads them back after a crash, so a resumed node
finishes the same way instead of asking a model again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pydantic

from ..context import NodeContext
from ..events import EventKind
from ..patch import Edit
from .plan import Plan, Subtask
from .team import Limits, Team

if TYPE_CHECKING:
    from .goal import _GoalSteps


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


def _dump(model: pydantic.BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")


def _record(ctx: NodeContext | None, data: dict[str, Any]) -> None:
    if ctx is not None:
        ctx.record(EventKind.PLAN_ROUND, data)
