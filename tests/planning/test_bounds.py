"""Every goal role's structured answer is bounded, its token limit fits the bound, and a
goal whose verifier is cut at the token limit still finishes (and a re-run does not
replay the cut answer from the cache)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.errors import UserError
from counterpoint.models import Request, Response, ScriptedModel, Usage
from counterpoint.models.local import CAPABILITIES
from counterpoint.models.prompt import without_string_bounds
from counterpoint.models.types import OutputSpec
from counterpoint.planning import Gap, Limits, Team, Verdict, goal_graph
from counterpoint.planning.bounds import CHARS_PER_TOKEN, PROBLEM_CHARS, worst_case_chars
from counterpoint.planning.plan import plan_type, replan_type
from counterpoint.store import open_store


def _answers() -> dict[str, dict[str, Any]]:
    return {"plan": plan_type(["writer", "searcher"], 6).model_json_schema(),
            "verdict": Verdict.model_json_schema(),
            "replan": replan_type(["writer", "searcher"], 6).model_json_schema()}


@pytest.mark.parametrize("role", ["plan", "verdict", "replan"])
def test_every_answer_schema_is_bounded(role: str) -> None:
    schema = _answers()[role]
    chars = worst_case_chars(schema)
    assert chars is not None, f"{role}: something in the schema is unbounded"
    text = json.dumps(schema)
    assert '"maxLength"' in text and '"maxItems"' in text


def test_each_roles_token_limit_fits_its_longest_answer() -> None:
    team = Team.default(cp.Model(ScriptedModel(name="any")))
    for role, answer in (("planner", plan_type(["writer"], 6)), ("verifier", Verdict),
                         ("replanner", replan_type(["writer"], 6))):
        chars = worst_case_chars(answer.model_json_schema())
        assert chars is not None
        assert team.call_tokens(role, answer) * CHARS_PER_TOKEN >= chars, role


def test_a_set_token_limit_wins_and_bad_ones_are_refused() -> None:
    model = cp.Model(ScriptedModel(name="any"))
    team = Team.default(model, tokens={"verifier": 333, "worker": 77})
    assert team.call_tokens("verifier", Verdict) == 333
    assert team.workers["writer"].turn_tokens == 77  # type: ignore[union-attr]
    with pytest.raises(UserError, match="unknown role 'critic'"):
        Team.default(model, tokens={"critic": 10})
    with pytest.raises(UserError, match=">= 1"):
        Team.default(model, tokens={"planner": 0})


def test_a_long_answer_from_an_unconstrained_provider_is_cut_not_rejected() -> None:
    gap = Gap(problem="x" * (PROBLEM_CHARS + 50))
    assert len(gap.problem) == PROBLEM_CHARS and gap.problem.endswith("…")
    verdict = Verdict.model_validate({"complete": False,
                                      "gaps": [{"problem": str(i)} for i in range(9)]})
    assert [g.problem for g in verdict.gaps] == ["0", "1", "2", "3"]


def test_string_bounds_can_be_left_out_of_what_a_decoder_is_sent() -> None:
    spec = OutputSpec(name="v", schema=Verdict.model_json_schema())
    # the embedded model keeps them: without them it runs past the digest's token limit
    assert CAPABILITIES.string_bounds
    stripped = json.dumps(without_string_bounds(spec).schema_)
    assert '"maxLength"' not in stripped and '"maxItems"' in stripped


PLAN = {"subtasks": [{"id": "t1", "task": "Compare Lisbon and Porto.", "worker": "writer",
                      "needs": []}]}
CUT = '{"complete": false, "gaps": [{"problem": "the comparison misses the food of'


def _verifier_cut_once() -> list[Any]:
    """The answers of one goal run whose verifier is cut at the token limit first."""
    cut = Response(text=CUT, finish_reason="length", usage=Usage(output_tokens=64, calls=1))
    return [PLAN, "Lisbon is larger; Porto is cheaper [t1].", cut,
            {"complete": True, "gaps": []}, "Lisbon is larger and Porto cheaper [t1]."]


def test_a_goal_whose_verifier_is_cut_finishes_and_a_rerun_asks_again() -> None:
    store = open_store("memory")
    scripted = ScriptedModel(_verifier_cut_once(), name="goal-model")
    team = Team.default(cp.Model(scripted))
    result = cp.run_sync(goal_graph("Compare Lisbon and Porto", team, Limits(max_rounds=1)),
                         store=store)
    assert result.status.value == "succeeded", result.state.stop_reason
    assert "Porto cheaper [t1]" in result.output["answer"]["answer"]
    assert result["verify-1"]["complete"] is True
    verifier_asks = [r for r in scripted.requests if _is_verify(r)]
    assert len(verifier_asks) == 2  # the cut answer was asked again, shorter
    assert "cut off" in verifier_asks[1].messages[-1].content
    # the same goal again on the same store: every complete answer comes from the cache,
    # but the cut one is not replayed: the verifier is asked again (and cut again, then
    # answers), so the run finishes the same way
    rerun = ScriptedModel([_verifier_cut_once()[2]], name="goal-model")
    again = cp.run_sync(goal_graph("Compare Lisbon and Porto",
                                   Team.default(cp.Model(rerun)), Limits(max_rounds=1)),
                        store=store)
    assert again.status.value == "succeeded"
    assert [_is_verify(r) for r in rerun.requests] == [True]
    assert again.output["answer"]["answer"] == result.output["answer"]["answer"]


def _is_verify(request: Request) -> bool:
    return request.output is not None and request.output.name == "Verdict"
