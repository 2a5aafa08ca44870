"""An empty goal is refused before any model is asked: by ``goal_graph``, by
``make_plan`` and by ``counterpoint plan`` (exit code 2)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from counterpoint.cli.app import app
from counterpoint.errors import UserError
from counterpoint.models import Model, ScriptedModel
from counterpoint.planning import Team, goal_graph, make_plan


@pytest.mark.parametrize("goal", ["", "   \n"])
def test_an_empty_goal_is_a_user_error(goal: str) -> None:
    with pytest.raises(UserError, match=r"the goal is empty .*; say what to achieve"):
        goal_graph(goal)


async def test_make_plan_refuses_an_empty_goal_before_asking_the_planner() -> None:
    team = Team.default(Model(ScriptedModel([])))  # fails on any call: none is made
    with pytest.raises(UserError, match="the goal is empty"):
        await make_plan(" ", team)


def test_counterpoint_plan_of_an_empty_goal_exits_2() -> None:
    result = CliRunner().invoke(app, ["plan", "", "--model", "scripted"])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.exception
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: the goal is empty ('')"), result.output
