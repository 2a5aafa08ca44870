"""The topology benchmark runs each plan in the shape it names (times are not asserted:
the benchmark reports them)."""

from __future__ import annotations

from benchmarks.topology import evaluate


async def test_each_topology_runs_its_shape_and_auto_follows_the_plan() -> None:
    result = await evaluate(call=0.0, step=0.0, repeats=1)
    rows = result["rows"]
    assert result["simulation"] is True
    assert [rows[p]["auto"][2] for p in ("fan-out", "chain", "two chains", "one step")] == \
        ["parallel", "sequential", "hierarchical", "single"]
    for plan, cells in rows.items():
        for topology, (_, calls, shape) in cells.items():
            assert topology == "auto" or shape == topology, (plan, topology, shape)
            assert calls >= 3  # the planner, at least one worker, the synthesizer
    # one worker for the whole goal: planner + worker + synthesizer
    assert rows["fan-out"]["single"][1] == 3 and rows["fan-out"]["parallel"][1] == 7
