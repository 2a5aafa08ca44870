"""``counterpoint run "GOAL" --samples N``: the goal's worker samples each model turn N
times, and the goal run's source record keeps N, so a resume in a new process builds
the same team."""

from __future__ import annotations

from counterpoint.agents import Agent
from counterpoint.cli import goals
from counterpoint.loader import BuiltSource


def _goal_graph(samples: int) -> tuple[Agent, BuiltSource]:
    team = goals.team("local:smollm2", None, None, None, None, samples=samples)
    writer = team.workers["writer"]
    assert isinstance(writer, Agent)
    graph = goals.goal_run_graph("Compare two cities", team, rounds=1, budget_tokens=None,
                                 budget_usd=None, deadline=None, max_subtasks=3)
    assert isinstance(graph.source, BuiltSource)
    return writer, graph.source


def test_the_worker_samples_and_the_run_records_it() -> None:
    writer, source = _goal_graph(3)
    assert writer.samples == 3
    assert source.arguments["samples"] == 3
    rebuilt = goals.rebuild_goal_graph(**source.arguments)
    assert isinstance(rebuilt.source, BuiltSource)
    assert rebuilt.source.arguments == source.arguments


def test_one_sample_is_not_recorded() -> None:
    writer, source = _goal_graph(1)
    assert writer.samples == 1 and "samples" not in source.arguments  # old records match
