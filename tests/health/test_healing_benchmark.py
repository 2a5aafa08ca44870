"""The healing evaluation runs at a small size, is deterministic for a seed, and is a
fair comparison: some tasks need escalation, which costs counterpoint a control-plane
call each too."""

from __future__ import annotations

from benchmarks.healing import evaluate


async def test_the_evaluation_counts_control_calls_and_meets_its_target() -> None:
    first = await evaluate(tasks=8, seed=3, flap=0.5, every=4)
    again = await evaluate(tasks=8, seed=3, flap=0.5, every=4)
    assert first == again
    assert first["simulation"] is True
    healed, react = first["counterpoint"], first["react"]
    assert first["escalation_tasks"] == 2
    # one re-planner call per escalation, and nothing else asked a model
    assert healed["control_calls"] == healed["control_server_calls"] == 2
    # the loop asked after every failure: the primary was down for 4 tasks, the archive
    # for 2, and the service flapped on top of that
    assert react["control_calls"] == react["control_server_calls"] >= 4 + 2
    assert healed["success"] == react["success"] == 8
    assert first["fewer_control_calls"] == 1 - 2 / react["control_calls"]


async def test_without_escalations_counterpoint_asks_no_model() -> None:
    result = await evaluate(tasks=6, seed=1, flap=0.5, every=0)
    assert result["escalation_tasks"] == 0
    assert result["counterpoint"]["control_calls"] == 0
    assert result["counterpoint"]["success"] == 6
