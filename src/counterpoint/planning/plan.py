"""Plans: what the planner, verifier and re-planner answer, and how plans are checked.

A :class:`Plan` is a list of subtasks with ids, a worker (agent or tool) each,
dependencies and the output expected. The answer schemas are built per team
(:func:`plan_type`), so constrained decoding can only name workers that exist;
:func:`check_plan` still validates everything, since not every provider
constrains its output.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, create_model

from ..graph import find_cycle
from ..ids import NodeId


class Subtask(BaseModel):
    """One node of a plan."""

    id: str = Field(description="short unique id, like t1")
    task: str = Field(description="what to do, in one or two sentences")
    worker: str = Field(description="which worker does it")
    needs: list[str] = Field(default_factory=list,
                             description="ids of the subtasks whose results it needs")
    expected: str = Field(default="", description="what its result should contain")


class Plan(BaseModel):
    """The planner's answer: whether to decompose, and the subtasks."""

    decompose: bool = Field(description="false if one worker can do the whole goal at once")
    subtasks: list[Subtask]


class Gap(BaseModel):
    """Something the results do not yet cover."""

    problem: str = Field(description="what is missing or wrong")
    subtask: str = Field(default="", description="id of the subtask at fault, if any")


class Verdict(BaseModel):
    """The verifier's answer."""

    complete: bool = Field(description="true if the results fully achieve the goal")
    gaps: list[Gap] = Field(default_factory=list)


class Redo(BaseModel):
    """Do a finished subtask again, with a better task description."""

    id: str = Field(description="id of the subtask to redo")
    task: str = Field(description="the improved task")


class Replan(BaseModel):
    """The re-planner's answer: edits that close the gaps.

    There is no "cancel": a verify node runs after every subtask has ended, so there
    is nothing left to cancel when the re-planner answers.
    """

    add: list[Subtask] = Field(default_factory=list)
    redo: list[Redo] = Field(default_factory=list)


PLANNED_ID = r"^t[0-9]{1,2}$"
"""The ids a planner writes (re-plans add more, and redone subtasks get ``.rN``)."""


def _planned_subtask(workers: Iterable[str]) -> type[Subtask]:
    names = tuple(sorted(workers))
    worker_type: Any = Literal[names]
    # ids and needs follow one pattern, so constrained decoding cannot invent free text there
    return create_model("PlannedSubtask", __base__=Subtask,
                        id=(str, Field(pattern=PLANNED_ID, description="t1, t2, ...")),
                        needs=(list[Annotated[str, Field(pattern=PLANNED_ID)]], Field(
                            default_factory=list, description="ids of earlier subtasks "
                                                              "whose results it uses")),
                        worker=(worker_type, Field(description="which worker does it")))


def plan_type(workers: Iterable[str], max_subtasks: int) -> type[Plan]:
    """``Plan`` whose ``worker`` fields accept only ``workers`` (constrained decoding)."""
    sub = _planned_subtask(workers)
    return create_model("TeamPlan", __base__=Plan,
                        subtasks=(list[sub], Field(min_length=1,  # type: ignore[valid-type]
                                                   max_length=max_subtasks)))


def replan_type(workers: Iterable[str], max_subtasks: int) -> type[Replan]:
    sub = _planned_subtask(workers)
    return create_model("TeamReplan", __base__=Replan,
                        add=(list[sub], Field(default_factory=list,  # type: ignore[valid-type]
                                              max_length=max_subtasks)))


_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


def check_plan(subtasks: list[Subtask], workers: Iterable[str], *,
               existing: Mapping[str, Iterable[str]] | None = None,
               max_subtasks: int = 12) -> list[str]:
    """Everything wrong with ``subtasks`` (empty if valid).

    ``existing`` maps ids already in the graph to their dependencies, for
    re-plans that add subtasks next to finished ones.
    """
    problems: list[str] = []
    known_workers = set(workers)
    existing = dict(existing or {})
    if not subtasks:
        problems.append("the plan has no subtasks")
    if len(subtasks) > max_subtasks:
        problems.append(f"{len(subtasks)} subtasks; at most {max_subtasks} are allowed")
    ids = [s.id for s in subtasks]
    for sid in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(f"subtask id {sid!r} is used twice")
    for sid in ids:
        if not _ID.match(sid):
            problems.append(f"subtask id {sid!r} is not a short id (letters, digits, _ . -)")
        elif sid in existing:
            problems.append(f"subtask id {sid!r} already exists; pick a new id")
    all_ids = set(ids) | set(existing)
    for s in subtasks:
        if s.worker not in known_workers:
            problems.append(f"subtask {s.id!r}: unknown worker {s.worker!r}; workers are "
                            f"{sorted(known_workers)}")
        for dep in s.needs:
            if dep == s.id:
                problems.append(f"subtask {s.id!r} needs itself")
            elif dep not in all_ids:
                problems.append(f"subtask {s.id!r} needs {dep!r}, which is not a subtask")
        if not s.task.strip():
            problems.append(f"subtask {s.id!r} has an empty task")
    edges = {s.id: [d for d in s.needs if d in all_ids and d != s.id] for s in subtasks}
    for node, deps in existing.items():
        edges.setdefault(node, list(deps))
    cycle = find_cycle({NodeId(k): [NodeId(d) for d in v] for k, v in edges.items()})
    if cycle:
        problems.append("the dependencies form a cycle: " + " -> ".join(cycle))
    return problems


def repair_plan(subtasks: list[Subtask], workers: Iterable[str],
                existing: Iterable[str] = ()) -> tuple[list[Subtask], list[str]]:
    """Make a plan valid by dropping what is wrong; returns it and what was dropped.

    Used only after the planner failed to fix its plan within its attempts; every
    repair is recorded in the log.
    """
    known = set(workers)
    fixes: list[str] = []
    kept: list[Subtask] = []
    seen: set[str] = set(existing)
    for s in subtasks:
        if s.id in seen or not _ID.match(s.id) or s.worker not in known or not s.task.strip():
            fixes.append(f"dropped subtask {s.id!r}")
            continue
        seen.add(s.id)
        kept.append(s)
    ids = {s.id for s in kept} | set(existing)
    repaired: list[Subtask] = []
    placed: set[str] = set(existing)
    for s in kept:  # only earlier subtasks may be needed: that breaks every cycle
        needs = [d for d in s.needs if d in placed and d in ids]
        dropped = [d for d in s.needs if d not in needs]
        if dropped:
            fixes.append(f"subtask {s.id!r}: dropped needs {dropped}")
        repaired.append(s.model_copy(update={"needs": needs}))
        placed.add(s.id)
    return repaired, fixes
