"""The healing evaluation runs at a small size and is deterministic for a seed."""

from __future__ import annotations

from benchmarks.healing import evaluate


async def test_the_evaluation_counts_control_calls_and_meets_its_target() -> None:
    first = await evaluate(tasks=6, seed=3, flap=0.5)
    again = await evaluate(tasks=6, seed=3, flap=0.5)
    assert first == again
    assert first["simulation"] is True
    assert first["react"]["control_calls"] >= 6  # the primary model is down every time
    assert first["counterpoint"]["success"] == first["react"]["success"] == 6
    assert first["pass"]
