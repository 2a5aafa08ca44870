"""Plans: what the planner, verifier and re-planner answer, and how plans are checked.

A :class:`Plan` is a list of subtasks with ids, a worker (agent or tool) each,
dependencies and the output expected. The answer schemas are built per team
(:func:`plan_type`), so constrained decoding can only name workers that exist, and a
first plan's subtasks are ``t1``, ``t2``, ... in order, each needing only ids before it;
:func:`check_plan` still validates everything, since not every provider constrains its
output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model
from pydantic.json_schema import SkipJsonSchema

from ..graph import find_cycle
from ..ids import NodeId
from .bounds import (
    EXPECTED_CHARS,
    ID_CHARS,
    MAX_GAPS,
    MAX_TAGS,
    PROBLEM_CHARS,
    TAG_CHARS,
    TASK_CHARS,
    MaxChars,
    MaxItems,
)

TAGS_DESCRIPTION = "skill tags of the work, like math or code (at most 2; may be empty)"


class Subtask(BaseModel):
    """One node of a plan."""

    id: str = Field(description="short unique id, like t1")
    task: str = Field(description="what to do, in one or two sentences")
    worker: str = Field(description="which worker does it")
    needs: list[str] = Field(default_factory=list,
                             description="ids of the subtasks whose results it needs")
    expected: str = Field(default="", description="what its result should contain")
    tags: list[str] = Field(default_factory=list, description=TAGS_DESCRIPTION,
                            exclude_if=lambda tags: not tags)
    """Skill tags: a routed worker (``model="auto"``) chooses its model by them (left out
    of the recorded plan when empty, so plans without skills read as before)."""


class Plan(BaseModel):
    """A plan: the subtasks, and whether the goal was decomposed (more than one subtask).

    The planner answers a :class:`PlanAnswer`; :meth:`PlanAnswer.plan` derives
    ``decompose`` from the subtasks it lists.
    """

    decompose: bool = Field(description="false if one worker does the whole goal at once")
    subtasks: list[Subtask]


MAX_EDITS = 3
"""Subtasks one re-plan may add, and ones it may redo: a re-plan keeps the change small."""
MAX_CANCELS = 6
"""Subtasks one re-plan may cancel."""
MAX_NEEDS = 6
"""Needs of a subtask a re-plan adds (a first plan's subtasks need at most N-1)."""

# The answers below are bounded in their schemas (see .bounds): a constrained decoder
# cannot run past a bound, so a small model's JSON ends before its token limit.
TaskText = Annotated[str, MaxChars(TASK_CHARS)]
ExpectedText = Annotated[str, MaxChars(EXPECTED_CHARS)]
ProblemText = Annotated[str, MaxChars(PROBLEM_CHARS)]
IdText = Annotated[str, MaxChars(ID_CHARS)]
TagText = Annotated[str, MaxChars(TAG_CHARS)]


class Gap(BaseModel):
    """Something the results do not yet cover."""

    problem: ProblemText = Field(description="what is missing or wrong")
    subtask: IdText = Field(default="", description="id of the subtask at fault, if any")


class Verdict(BaseModel):
    """The verifier's answer (at most ``MAX_GAPS`` gaps: the first ones are kept)."""

    complete: bool = Field(description="true if the results fully achieve the goal")
    gaps: Annotated[list[Gap], MaxItems(MAX_GAPS)] = Field(default_factory=list)


class Redo(BaseModel):
    """Do a finished subtask again, with a better task description."""

    id: IdText = Field(description="id of the subtask to redo")
    task: TaskText = Field(description="the improved task")


class Replan(BaseModel):
    """The re-planner's answer: edits that close the gaps.

    A verify node runs after every subtask of the plan has ended, so its cancel never
    stops work in flight: it takes a subtask out of the plan. Its result (and those of
    the subtasks that need it) no longer reach the next verify round or the answer. A
    mid-run re-plan (a checked subtask still has gaps after its redo) also stops the
    cancelled subtasks that are running or waiting, and may redo only subtasks that
    have not started.
    """

    add: list[Subtask] = Field(default_factory=list)
    redo: Annotated[list[Redo], MaxItems(MAX_EDITS)] = Field(default_factory=list)
    cancel: Annotated[list[IdText], MaxItems(MAX_CANCELS)] = Field(
        default_factory=list,
        description="ids of subtasks whose results are wrong or not needed: they are left "
                    "out of the answer, with every subtask that needs them")


PLANNED_ID = r"^t[0-9]{1,2}$"
"""The ids a re-planner writes (it adds ids after the existing ones; redone subtasks get
``.rN``)."""


def plan_ids(max_subtasks: int) -> tuple[str, ...]:
    """The ids a first plan may use: ``t1`` to ``tN``, N = ``max_subtasks``."""
    return tuple(f"t{i}" for i in range(1, max_subtasks + 1))


def _unique(value: Any) -> Any:
    """A list without repeats, first occurrence kept (a repeated need means nothing more)."""
    return list(dict.fromkeys(value)) if isinstance(value, list) else value


def _known_tags(known: tuple[str, ...]) -> Callable[[Any], Any]:
    """Reading tags leniently: repeats collapse and, when the tags are an enumeration, an
    unknown one is dropped (an unconstrained planner's extra skill is no reason to
    re-ask)."""
    def read(value: Any) -> Any:
        value = _unique(value)
        if known and isinstance(value, list):
            return [t for t in value if t in known]
        return value
    return read


def _needs_required(schema: dict[str, Any]) -> None:
    required = schema.setdefault("required", [])
    if "needs" not in required:
        required.append("needs")


class _PlannedBase(Subtask):
    # the schema requires needs (a constrained decoder must decide on it, even if only
    # to write []), while reading an answer without it still gives []
    model_config = ConfigDict(json_schema_extra=_needs_required)


def _planned_subtask(workers: Iterable[str], ids: tuple[str, ...] | None,
                     max_needs: int | None,
                     tags: Sequence[str] | None = None) -> type[Subtask]:
    """A ``Subtask`` whose worker must be one of ``workers`` and whose ids are ``ids``
    (else ``PLANNED_ID``), with at most ``max_needs`` distinct needs.

    Every bound is a plain JSON schema keyword (``enum``, ``maxItems``, ``uniqueItems``)
    that llama.cpp's grammar and OpenAI-style ``json_schema`` accept; a decoder that
    ignores one (llama.cpp ignores ``uniqueItems``) is still checked when the answer is
    read. Bounded needs stop a small model from counting ``t1, t2, ...`` until the
    token limit cuts its JSON. Skill tags are asked for only when ``tags`` is not
    ``None`` (some worker is routed: nothing else reads them, so the schema a small
    model decodes stays as it was): at most ``MAX_TAGS`` strings of at most
    ``TAG_CHARS``, or names from ``tags`` when the routed models declare some.
    """
    known = tuple(sorted(set(tags or ())))
    tag_type: Any = Literal[known] if known else TagText
    listed: Any = Annotated[list[tag_type], MaxItems(MAX_TAGS),
                            BeforeValidator(_known_tags(known))]
    worker_type: Any = Literal[tuple(sorted(workers))]
    id_type: Any = Literal[ids] if ids else Annotated[str, Field(pattern=PLANNED_ID,
                                                                 max_length=3)]
    needs_type: Any = Annotated[list[id_type], BeforeValidator(_unique)]
    most_needs = MAX_NEEDS if max_needs is None else max_needs
    return create_model("PlannedSubtask", __base__=_PlannedBase,
                        id=(id_type, Field(description="t1, t2, ...")),
                        task=(TaskText, Field(
                            description="what to do, in one or two sentences")),
                        needs=(needs_type, Field(
                            default_factory=list, max_length=most_needs,
                            json_schema_extra={"uniqueItems": True},
                            description="ids of earlier subtasks whose results it uses")),
                        worker=(worker_type, Field(description="which worker does it")),
                        expected=(ExpectedText, Field(
                            default="", description="what its result should contain")),
                        tags=(listed if tags is not None else SkipJsonSchema[list[str]],
                              Field(default_factory=list, description=TAGS_DESCRIPTION,
                                    exclude_if=lambda tags: not tags)))


class PlanAnswer(BaseModel):
    """What the planner answers: the subtasks, nothing else.

    There is no ``decompose`` field to fill in: the planner decides whether to decompose
    by how many subtasks it lists (one subtask is a simple goal, run as one node), so
    the decision and the list cannot disagree. An answer that still carries
    ``decompose`` (a provider that does not constrain its output) keeps it in
    :attr:`claimed_decompose` so a contradiction can be reported; it is not in the
    schema.
    """

    subtasks: list[Subtask]
    claimed_decompose: SkipJsonSchema[bool | None] = Field(default=None, alias="decompose")

    model_config = ConfigDict(populate_by_name=True)

    def plan(self) -> Plan:
        """The plan: decomposed exactly when there is more than one subtask."""
        return Plan(decompose=len(self.subtasks) > 1, subtasks=list(self.subtasks))


def plan_type(workers: Iterable[str], max_subtasks: int,
              tags: Sequence[str] | None = None) -> type[PlanAnswer]:
    """The planner's answer type for a team: workers from ``workers``, ids ``t1`` to
    ``tN`` and 1 to N subtasks (N = ``max_subtasks``), each needing at most N-1 others,
    with skill tags when ``tags`` is not ``None`` (from ``tags`` if it names some). Its
    JSON schema is stricter than its checks (see :func:`_positional`)."""
    sub = _planned_subtask(workers, plan_ids(max_subtasks), max_subtasks - 1, tags)
    positional: type[PlanAnswer] = type("PositionalPlan", (PlanAnswer,), {
        "__module__": __name__,
        "model_config": ConfigDict(json_schema_extra=_positional(sub, max_subtasks))})
    return create_model("TeamPlan", __base__=positional,
                        subtasks=(list[sub], Field(min_length=1,  # type: ignore[valid-type]
                                                   max_length=max_subtasks)))


TASK_PATTERN = r"^[A-Z][a-z]{1,15}( [^ _\n\"\\]{1,15}){2,11}$"
"""A first plan's tasks, in its JSON schema: a capitalised word, then 2 to 11 words of at
most 15 characters without underscores (at most 200 characters, ``TASK_CHARS``)."""


def _positional(sub: type[BaseModel], max_subtasks: int) -> Callable[[dict[str, Any]], None]:
    """Rewrites a first plan's JSON schema so that its subtasks are positional: the k-th
    is ``tk`` and needs only ids before it (``t1`` needs nothing), for 1 to N subtasks.

    The answer is still read with the type's own checks, which take any order and report
    a need of itself or of a later id; the schema only keeps a constrained decoder from
    writing those. SmolLM2-135M, given ids and needs as enumerations, named itself and
    ids it never wrote on each of three attempts at a goal, so the plan was repaired by
    dropping needs (see ``tests/planning/test_planner_schema.py``). Each length is an
    option of an ``anyOf`` of fixed tuples (``prefixItems``), which llama.cpp's grammar,
    vLLM's and OpenAI-style ``json_schema`` (not strict) take; the subtasks are written
    out inline, since the hook sees the model's schema without its ``$defs``."""
    base = sub.model_json_schema()
    ids = plan_ids(max_subtasks)
    slots = []
    for k, sid in enumerate(ids):
        slot = json.loads(json.dumps(base))  # a deep copy of plain JSON
        props = slot["properties"]
        props["id"] = {"const": sid, "type": "string", "description": props["id"].get(
            "description", "")}
        props["task"]["pattern"] = TASK_PATTERN
        needs = props["needs"]
        if k == 0:
            props["needs"] = {"const": [], "description": "the first subtask needs none"}
        else:
            needs["items"] = {"enum": list(ids[:k]), "type": "string"}
            needs["maxItems"] = k
        slot["title"] = f"Subtask{k + 1}"
        slots.append(slot)

    def rewrite(schema: dict[str, Any]) -> None:
        subtasks = schema["properties"]["subtasks"]
        schema["properties"]["subtasks"] = {
            "title": subtasks.get("title", "Subtasks"),
            "anyOf": [{"type": "array", "prefixItems": slots[:n], "items": False,
                       "minItems": n, "maxItems": n} for n in range(1, max_subtasks + 1)]}
    return rewrite


def replan_type(workers: Iterable[str], max_subtasks: int,
                tags: Sequence[str] | None = None) -> type[Replan]:
    """The re-planner's answer schema: new ids follow ``PLANNED_ID`` (they come after
    the existing ones, which this schema does not know); at most ``MAX_EDITS`` (and
    ``max_subtasks``) are added at once."""
    sub = _planned_subtask(workers, None, None, tags)
    added: Any = Annotated[list[sub], MaxItems(min(max_subtasks, MAX_EDITS))]  # type: ignore[valid-type]
    return create_model("TeamReplan", __base__=Replan,
                        add=(added, Field(default_factory=list)))


def salvage_subtasks(text: str) -> list[Subtask]:
    """The complete subtask objects at the start of an answer's ``subtasks`` list.

    For an answer that did not validate (the token limit cut its JSON, or one subtask
    is malformed): the objects read before the cut are kept for :func:`repair_plan`.
    """
    start = text.find('"subtasks"')
    at = text.find("[", start) if start >= 0 else -1
    if at < 0:
        return []
    decoder = json.JSONDecoder(strict=False)
    found: list[Subtask] = []
    pos = at + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        try:
            item, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return found
        try:
            found.append(Subtask.model_validate(item))
        except ValidationError:
            continue


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


def merge_repeats(subtasks: list[Subtask]) -> tuple[list[Subtask], list[str]]:
    """``subtasks`` (a valid plan's) with each subtask that repeats an earlier one merged
    into it, and what was merged. A repeat has the same worker, the same task up to case
    and spacing, and the same needs once those are merged: it would do the same work on
    the same inputs. A subtask that needed a repeat needs what it was merged into.

    Small models fill a plan with copies (SmolLM2-135M planned "writer" for five of six
    subtasks of one goal); each copy would cost a worker's call for nothing."""
    order = [s for _, s in subtask_tree(Plan(decompose=len(subtasks) > 1, subtasks=subtasks))]
    into: dict[str, str] = {}
    first: dict[tuple[str, str, tuple[str, ...]], str] = {}
    fixes: list[str] = []
    for s in order:  # the needs of a subtask are merged before it
        needs = tuple(sorted({into.get(d, d) for d in s.needs}))
        key = (s.worker, " ".join(s.task.lower().split()), needs)
        if key in first:
            into[s.id] = first[key]
            fixes.append(f"merged subtask {s.id!r} into {first[key]!r} (the same task for "
                         "the same worker)")
        else:
            first[key] = s.id
    if not into:
        return subtasks, []
    return [s.model_copy(update={"needs": list(dict.fromkeys(into.get(d, d) for d in s.needs))})
            for s in subtasks if s.id not in into], fixes


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
