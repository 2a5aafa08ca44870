"""The planner's answer schema and its asking loop, with the scripted model.

The schema bounds what a small model can write (ids ``t1``-``tN``, at most N-1
distinct needs, no ``decompose`` field); ``make_plan`` catches answers that do not
validate (a JSON cut at the token limit) and re-asks with what was wrong, re-asks at
a higher temperature with a seed and without the response cache, records a
``decompose`` that contradicts the subtasks instead of dropping subtasks, and puts
the worker list in the shared prompt prefix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pydantic
import pytest

import counterpoint as cp
from counterpoint.events import Event, EventKind
from counterpoint.models import Response, ScriptedModel
from counterpoint.plan_text import round_lines
from counterpoint.planning import Limits, PlanningError, Subtask, Team, make_plan
from counterpoint.planning.bounds import TASK_CHARS, worst_case_chars
from counterpoint.planning.plan import (
    TASK_PATTERN,
    check_plan,
    merge_repeats,
    plan_type,
    replan_type,
    salvage_subtasks,
)
from counterpoint.planning.team import PLANNER
from counterpoint.store import MemoryStore

GOOD = {"subtasks": [
    {"id": "t1", "task": "find flights", "worker": "writer", "needs": []},
    {"id": "t2", "task": "compare them", "worker": "writer", "needs": ["t1"]}]}
# what SmolLM2 wrote in TaskBench: needs counting up until max_tokens cut the JSON
CUT = ('{"subtasks": [{"id": "t1", "task": "find flights", "worker": "writer", "needs": []}, '
       '{"id": "t2", "task": "compare", "worker": "writer", "needs": ["t1", "t2", "t3", "t4", '
       '"t5", "t6", "t7", "t8", "t9", "t10", "t11", "t1')


def _cut(text: str = CUT) -> Response:
    return Response(text=text, finish_reason="length")


async def _plan_in_run(model: cp.Model, limits: Limits, *, store: MemoryStore | None = None,
                       goal: str = "plan a trip") -> tuple[cp.RunResult, list[Event]]:
    """``make_plan`` inside a one-node run, so its rounds and model calls are logged."""
    store = store or MemoryStore()
    team = Team.default(model)

    async def plan(ctx: cp.NodeContext) -> dict[str, Any]:
        made, repairs = await make_plan(goal, team, limits, ctx=ctx)
        return {"decompose": made.decompose, "repairs": repairs,
                "subtasks": [s.model_dump(mode="json") for s in made.subtasks]}

    graph = cp.Graph("planning")
    graph.add("plan", plan)
    result = await cp.run(graph, store=store)
    return result, store.events(result.run_id)


def _rounds(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [e.data or {} for e in events if e.kind is EventKind.PLAN_ROUND]


def _calls(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [e.data or {} for e in events if e.kind is EventKind.MODEL_CALL
            and "invalid_output" not in (e.data or {})]


# ------------------------------------------------------------------- the schema
def _slots(schema: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The subtask schemas of each length a plan may have, shortest first."""
    options = schema["properties"]["subtasks"]["anyOf"]
    for option in options:
        n = len(option["prefixItems"])
        assert option["type"] == "array" and option["items"] is False
        assert (option["minItems"], option["maxItems"]) == (n, n)
    return [option["prefixItems"] for option in options]


def test_plan_schema_makes_subtasks_positional_each_needing_only_earlier_ids() -> None:
    # SmolLM2, given ids and needs as two enumerations, wrote "t1 needs t1..t5" on every
    # attempt: here the k-th subtask is tk, and needs only t1..t(k-1)
    schema = plan_type(["writer", "search"], 4).model_json_schema()
    lengths = _slots(schema)
    assert [len(slots) for slots in lengths] == [1, 2, 3, 4]
    longest = lengths[-1]
    assert all(slots == longest[:len(slots)] for slots in lengths)  # the same k-th slot
    ids = ["t1", "t2", "t3", "t4"]
    for k, slot in enumerate(longest):
        props = slot["properties"]
        assert props["id"]["const"] == ids[k]
        assert props["worker"]["enum"] == ["search", "writer"]
        assert "needs" in slot["required"]
        if k == 0:
            assert props["needs"]["const"] == []
        else:
            assert props["needs"]["items"] == {"enum": ids[:k], "type": "string"}
            assert props["needs"]["maxItems"] == k and props["needs"]["uniqueItems"] is True
    assert list(schema["properties"]) == ["subtasks"]  # no decompose to fill in first
    assert worst_case_chars(schema) is not None  # bounded: the token limit fits it


def test_plan_schema_of_one_subtask_allows_no_needs() -> None:
    (only,) = _slots(plan_type(["w"], 1).model_json_schema())
    assert only[0]["properties"]["needs"] == {"const": [],
                                              "description": "the first subtask needs none"}


def test_plan_answers_out_of_position_still_read_and_are_checked() -> None:
    # the schema only steers a constrained decoder: an unconstrained provider's answer in
    # another order reads, and check_plan reports what the positions would have excluded
    answer = plan_type(["w"], 3).model_validate({"subtasks": [
        {"id": "t2", "task": "b", "worker": "w", "needs": ["t2"]},
        {"id": "t1", "task": "a", "worker": "w", "needs": ["t2"]}]})
    assert [s.id for s in answer.subtasks] == ["t2", "t1"]
    assert check_plan(answer.subtasks, ["w"]) == ["subtask 't2' needs itself"]


def test_plan_answers_outside_the_bounds_do_not_validate_and_repeats_collapse() -> None:
    answer_type = plan_type(["w"], 3)

    def sub(sid: str, needs: list[str]) -> dict[str, Any]:
        return {"id": sid, "task": "x", "worker": "w", "needs": needs}

    with pytest.raises(pydantic.ValidationError, match=r"subtasks\.0\.id"):
        answer_type.model_validate({"subtasks": [sub("t4", [])]})
    with pytest.raises(pydantic.ValidationError, match=r"subtasks\.0\.needs\.0"):
        answer_type.model_validate({"subtasks": [sub("t1", ["t9"])]})
    with pytest.raises(pydantic.ValidationError, match=r"at most 2 items"):
        answer_type.model_validate({"subtasks": [sub("t1", ["t1", "t2", "t3"])]})
    read = answer_type.model_validate({"subtasks": [sub("t3", ["t1", "t2", "t1", "t2"])]})
    assert read.subtasks[0].needs == ["t1", "t2"]
    # answers without needs still read (providers that do not constrain their output)
    bare = answer_type.model_validate({"subtasks": [{"id": "t1", "task": "x", "worker": "w"}]})
    assert bare.subtasks[0].needs == []


def test_replan_schema_keeps_new_ids_open_but_needs_unique() -> None:
    sub = replan_type(["w"], 3).model_json_schema()["$defs"]["PlannedSubtask"]["properties"]
    assert sub["id"]["pattern"] == r"^t[0-9]{1,2}$"
    assert sub["needs"]["uniqueItems"] is True


def test_plan_schema_becomes_a_bounded_llama_cpp_grammar() -> None:
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar")
    from counterpoint.models.prompt import OutputShape
    schema = OutputShape(plan_type(["writer"], 3)).spec.schema_
    grammar = llama_grammar.json_schema_to_gbnf(json.dumps(schema))
    rules = dict(line.split(" ::= ", 1) for line in grammar.splitlines() if " ::= " in line)
    assert rules["subtasks"] == "subtasks-0 | subtasks-1 | subtasks-2"  # 1 to 3 subtasks
    third = "subtasks-2-tuple-2"  # the third subtask of a plan of three
    assert rules[f"{third}-id"] == r'"\"t3\""'
    assert rules[f"{third}-needs-item"] == r'"\"t1\"" | "\"t2\""'
    # at most two needs: a repetition with two optional items, not an open-ended star
    needs = rules[f"{third}-needs"]
    assert needs.count(f"{third}-needs-item") == 2 and "*" not in needs
    assert rules["subtasks-2-tuple-0-needs"] == '"[]"'  # the first needs nothing
    llama_grammar.LlamaGrammar.from_string(grammar, verbose=False)  # parses


def test_salvage_keeps_the_complete_subtasks_of_a_cut_answer() -> None:
    assert [s.id for s in salvage_subtasks(CUT)] == ["t1"]
    assert salvage_subtasks("not json") == []
    assert [s.id for s in salvage_subtasks(json.dumps(GOOD))] == ["t1", "t2"]


# ------------------------------------------------------ answers that do not read
async def test_a_cut_answer_is_reasked_with_the_cut_named_and_the_next_plan_is_used() -> None:
    # the model layer re-asks twice itself (output_retries=2) before make_plan sees it
    scripted = ScriptedModel([_cut(), _cut(), _cut(), GOOD])
    result, events = await _plan_in_run(cp.Model(scripted), Limits(plan_attempts=3))
    assert result.ok, result.nodes[cp.NodeId("plan")].error
    assert [s["id"] for s in result["plan"]["subtasks"]] == ["t1", "t2"]
    assert result["plan"]["repairs"] == [] and result["plan"]["decompose"] is True
    first, reask = scripted.requests[0], scripted.requests[3]
    assert first.messages[-1].content == "Goal: plan a trip"
    assert reask.messages[-1].content.startswith("Goal: plan a trip\n\nYour last answer was "
                                                 "cut off at the token limit")
    assert "at most 6 subtasks" in reask.messages[-1].content
    assert CUT not in "".join(m.content for m in reask.messages)  # not fed back to repeat
    rounds = _rounds(events)
    assert [r["attempt"] for r in rounds] == [1, 2]
    assert rounds[0]["cut_off"] is True and rounds[0]["salvaged"] == ["t1"]
    assert rounds[0]["problems"][0].startswith("the answer was cut off at the token limit")
    assert rounds[1]["problems"] == []


async def test_an_invalid_answer_is_reasked_with_its_validation_errors() -> None:
    ghost = {"subtasks": [{"id": "t1", "task": "x", "worker": "ghost", "needs": []}]}
    scripted = ScriptedModel([ghost, ghost, ghost, GOOD])
    plan, repairs = await make_plan("goal", Team.default(cp.Model(scripted)))
    assert [s.id for s in plan.subtasks] == ["t1", "t2"] and repairs == []
    note = scripted.requests[3].messages[-1].content
    assert "Your last answer was not a valid plan: subtasks.0.worker" in note
    assert "cut off" not in note


async def test_cut_answers_to_the_end_are_salvaged_and_repaired() -> None:
    scripted = ScriptedModel([_cut()] * 6)
    result, events = await _plan_in_run(cp.Model(scripted), Limits(plan_attempts=2))
    assert result.ok
    assert [s["id"] for s in result["plan"]["subtasks"]] == ["t1"]
    assert result["plan"]["decompose"] is False
    rounds = _rounds(events)
    assert [r["attempt"] for r in rounds] == [1, 2, "repaired"]
    assert scripted.remaining == 0


async def test_unreadable_answers_to_the_end_fail_naming_run_node_and_cut() -> None:
    scripted = ScriptedModel([_cut('{"subtasks": [{"id": "t1", "task": "a')] * 6)
    result, _ = await _plan_in_run(cp.Model(scripted), Limits(plan_attempts=2))
    node = result.nodes[cp.NodeId("plan")]
    assert node.status is cp.NodeStatus.FAILED and node.error is not None
    assert node.error["type"] == "PlanningError"
    message = node.error["message"]
    assert f"run {result.run_id}" in message and "node 'plan'" in message
    assert "no valid plan after 2 attempts" in message and "cut off at the token limit" in message
    with pytest.raises(PlanningError, match=r"^planner: no valid plan"):
        await make_plan("goal", Team.default(cp.Model(ScriptedModel(["{"] * 3))),
                        Limits(plan_attempts=1))


# ------------------------------------------------------------------ decompose
async def test_decompose_false_with_several_subtasks_keeps_them_and_says_so() -> None:
    three = {"decompose": False, "subtasks": [
        {"id": "t1", "task": "a", "worker": "writer", "needs": []},
        {"id": "t2", "task": "b", "worker": "writer", "needs": ["t1"]},
        {"id": "t3", "task": "c", "worker": "writer", "needs": ["t1"]}]}
    result, events = await _plan_in_run(cp.Model(ScriptedModel([three])), Limits())
    assert [s["id"] for s in result["plan"]["subtasks"]] == ["t1", "t2", "t3"]
    assert result["plan"]["decompose"] is True
    (first,) = _rounds(events)
    assert first["contradiction"] == ("the answer says decompose=false but lists 3 "
                                      "subtask(s); all of them are kept")
    assert first["problems"] == []


async def test_one_subtask_is_a_simple_goal_and_no_contradiction_is_invented() -> None:
    one = {"subtasks": [{"id": "t1", "task": "all of it", "worker": "writer", "needs": []}]}
    result, events = await _plan_in_run(cp.Model(ScriptedModel([one])), Limits())
    assert result["plan"]["decompose"] is False
    assert "contradiction" not in _rounds(events)[0]
    claimed = {"decompose": True, **one}
    result, events = await _plan_in_run(cp.Model(ScriptedModel([claimed])), Limits())
    assert result["plan"]["decompose"] is False
    assert _rounds(events)[0]["contradiction"].startswith("the answer says decompose=true")


def test_the_planner_prompt_asks_to_decide_on_decomposing_first() -> None:
    assert PLANNER.index("First decide whether the goal needs several steps") < \
        PLANNER.index("Otherwise give a few small subtasks")
    assert "exactly one subtask" in PLANNER


# ---------------------------------------------------------------------- re-asks
async def test_reasks_sample_with_a_seed_per_attempt() -> None:
    cyclic = {"subtasks": [{"id": "t1", "task": "a", "worker": "writer", "needs": ["t2"]},
                           {"id": "t2", "task": "b", "worker": "writer", "needs": ["t1"]}]}
    scripted = ScriptedModel([cyclic, cyclic, GOOD])
    await make_plan("goal", Team.default(cp.Model(scripted)),
                    Limits(plan_attempts=3, reask_temperature=0.9))
    assert [(r.temperature, r.seed) for r in scripted.requests] == [(0.0, None), (0.9, 2),
                                                                     (0.9, 3)]


async def test_reasks_bypass_the_response_cache() -> None:
    cyclic = {"subtasks": [{"id": "t1", "task": "a", "worker": "writer", "needs": ["t2"]},
                           {"id": "t2", "task": "b", "worker": "writer", "needs": ["t1"]}]}
    fixed = {"subtasks": [{"id": "t1", "task": "other", "worker": "writer", "needs": []}]}
    scripted = ScriptedModel([cyclic, GOOD])
    model = cp.Model(scripted, cache=True)  # caches at any temperature, unless told not to
    store = MemoryStore()
    first, first_events = await _plan_in_run(model, Limits(), store=store)
    assert [s["id"] for s in first["plan"]["subtasks"]] == ["t1", "t2"]
    # the same planning again: the first ask is answered from the cache (the same bad
    # plan), the identical re-ask goes to the model
    scripted.add(fixed)
    again, events = await _plan_in_run(model, Limits(), store=store)
    assert again.ok and [s["task"] for s in again["plan"]["subtasks"]] == ["other"]
    assert len(scripted.requests) == 3
    assert scripted.requests[2].messages == scripted.requests[1].messages
    assert [(c["purpose"], c["cache_hit"]) for c in _calls(events)] == [
        ("plan 1", True), ("plan 2", False)]
    assert [(c["purpose"], c["cache_hit"]) for c in _calls(first_events)] == [
        ("plan 1", False), ("plan 2", False)]


# --------------------------------------------------------- the prompt's prefix
async def test_the_worker_list_is_in_the_shared_prefix_and_the_goal_alone_after_it() -> None:
    scripted = ScriptedModel([GOOD, GOOD])
    team = Team.default(cp.Model(scripted))
    await make_plan("plan a trip", team, Limits(max_subtasks=4))
    await make_plan("write a poem", team, Limits(max_subtasks=4))
    one, two = scripted.requests
    system = one.messages[0]
    assert system.role == "system"
    assert system.content == (f"{PLANNER}\n\nWorkers:\n{team.describe_workers()}\n\n"
                              "Plan at most 4 subtasks (ids t1 to t4).")
    assert "writer" in team.describe_workers()
    assert [m.content for m in one.messages[1:]] == ["Goal: plan a trip"]
    assert [m.content for m in two.messages[1:]] == ["Goal: write a poem"]
    assert two.messages[0] == system  # the same prefix, byte for byte


def test_limits_reject_a_negative_reask_temperature() -> None:
    from counterpoint.errors import UserError
    with pytest.raises(UserError, match="reask_temperature"):
        Limits(reask_temperature=-0.1)


# ------------------------------------------------------------- repeated subtasks
def test_a_first_plans_tasks_are_sentences_in_the_schema_only() -> None:
    # SmolLM2 wrote "writer", "Explain" and "compare_python_and_rust" as tasks: the schema
    # asks for a capitalised sentence of three or more words, of at most TASK_CHARS
    schema = plan_type(["w"], 2).model_json_schema()
    for slot in _slots(schema)[-1]:
        assert slot["properties"]["task"]["pattern"] == TASK_PATTERN
    task = re.compile(TASK_PATTERN)
    assert task.match("Write two short tips for Lisbon.")
    assert not any(task.match(t) for t in ("writer", "Explain", "compare_python_and_rust"))
    assert len("Abcdefghijklmnop" + " abcdefghijklmno" * 11) <= TASK_CHARS  # the longest
    # reading is not stricter than before: a provider that ignores patterns still plans
    answer = plan_type(["w"], 2).model_validate(
        {"subtasks": [{"id": "t1", "task": "writer", "worker": "w", "needs": []}]})
    assert answer.subtasks[0].task == "writer"


def test_repeats_are_merged_into_the_first_with_their_dependents_rewired() -> None:
    def sub(sid: str, task: str, needs: list[str], worker: str = "w") -> Subtask:
        return Subtask(id=sid, task=task, worker=worker, needs=needs)

    plan = [sub("t1", "Find flights", []), sub("t2", "find   FLIGHTS", []),
            sub("t3", "Compare them", ["t2"]), sub("t4", "Compare them", ["t1"]),
            sub("t5", "Compare them", []), sub("t6", "Find flights", [], worker="x"),
            sub("t7", "Book one", ["t4", "t3", "t5"])]
    merged, fixes = merge_repeats(plan)
    assert [(s.id, s.needs) for s in merged] == [
        ("t1", []), ("t3", ["t1"]), ("t5", []), ("t6", []), ("t7", ["t3", "t5"])]
    assert fixes == [
        "merged subtask 't2' into 't1' (the same task for the same worker)",
        "merged subtask 't4' into 't3' (the same task for the same worker)"]
    assert merge_repeats(merged) == (merged, [])  # nothing left to merge


async def test_a_plan_with_repeats_runs_each_once_and_its_round_records_both_plans() -> None:
    repeats = {"subtasks": [
        {"id": "t1", "task": "Find flights", "worker": "writer", "needs": []},
        {"id": "t2", "task": "Find flights", "worker": "writer", "needs": []},
        {"id": "t3", "task": "Compare them", "worker": "writer", "needs": ["t1", "t2"]}]}
    scripted = ScriptedModel([repeats])
    result, events = await _plan_in_run(cp.Model(scripted), Limits())
    assert [(s["id"], s["needs"]) for s in result["plan"]["subtasks"]] == [
        ("t1", []), ("t3", ["t1"])]
    assert result["plan"]["repairs"] == [
        "merged subtask 't2' into 't1' (the same task for the same worker)"]
    assert len(scripted.requests) == 1  # merged, not asked again
    (round_,) = _rounds(events)
    assert round_["problems"] == [] and round_["repairs"] == result["plan"]["repairs"]
    assert [s["id"] for s in round_["answered"]["subtasks"]] == ["t1", "t2", "t3"]
    assert [s["id"] for s in round_["plan"]["subtasks"]] == ["t1", "t3"]
    assert round_lines(round_)[0].startswith("plan (repaired: merged subtask 't2' into 't1'")


def test_a_verdict_of_incomplete_without_gaps_says_so() -> None:
    # SmolLM2 answered complete=false with no gaps: the line said "0 gap(s)"
    assert round_lines({"phase": "verify", "round": 1, "complete": False, "gaps": []}) == [
        "verify round 1: incomplete, no gap named"]
    assert round_lines({"phase": "verify", "round": 2, "complete": True, "gaps": []}) == [
        "verify round 2: complete"]
