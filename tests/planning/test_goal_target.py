"""What `counterpoint run` reads as a goal: a sentence in any script (Chinese and
Japanese have no spaces) and of any length (longer than a file name may be)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from counterpoint.cli.app import app
from counterpoint.cli.goals import target_kind

LONG = "Explain why the sky is blue and what it means for photography. " * 400
"""A goal longer than a file name may be (stat() fails with ENAMETOOLONG)."""


@pytest.mark.parametrize("goal", ["用三句话介绍东京的交通", "東京の交通を三文で説明して",
                                  "Résumé.x", LONG])
def test_a_sentence_without_spaces_or_longer_than_a_path_is_a_goal(goal: str) -> None:
    assert target_kind(goal) == "goal"


@pytest.mark.parametrize("target", ["examples.trip", "my_flows.daily:graph", "summarize",
                                    "flow.py", "flow.yaml"])
def test_module_and_file_names_are_not_goals(target: str) -> None:
    assert target_kind(target) != "goal"


def test_a_non_ascii_module_that_exists_is_still_a_module(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flüsse.py").write_text("")
    assert target_kind("flüsse:graph") == "graph"


@pytest.mark.parametrize("goal", [LONG, "用三句话介绍东京的交通"])
def test_the_cli_runs_such_a_goal_as_a_goal(tmp_path: Path, goal: str) -> None:
    # an unknown model is refused before anything runs: the goal was read as a goal
    result = CliRunner().invoke(app, ["run", goal, "--rounds", "1", "--model", "nosuch:m",
                                      "--db", str(tmp_path / "runs.db")])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.exception
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: unknown provider 'nosuch'"), result.output
