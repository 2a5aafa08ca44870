"""The routing evaluation (benchmarks/routing.py, simulated models) at a small size: each
configuration's success is what the simulated models' seeded outcomes imply."""

from __future__ import annotations

from benchmarks.routing import evaluate
from counterpoint.testing.simulated_models import SimulatedModels, standard_lineup, task_suite


async def test_each_configuration_scores_what_the_simulation_implies() -> None:
    ev = await evaluate(tasks=24, seed=5)
    assert ev.simulated
    suite = task_suite(24, seed=5)
    sims = SimulatedModels(standard_lineup(), suite, seed=5)  # not started: outcomes only
    large = sum(sims.succeeds("sim-large", t) for t in suite)
    tiny = sum(sims.succeeds("sim-tiny", t) for t in suite)
    anyone = sum(any(sims.succeeds(m, t) for m in sims.models) for t in suite)
    assert ev.by_name("always strongest").passed == large
    assert ev.by_name("always cheapest").passed == tiny
    assert ev.by_name("always strongest").calls == 24
    ctp = ev.outcomes[0]
    # escalation ends on the strongest model, so it passes at least what that passes,
    # and at most what some model passes
    assert large <= ctp.passed <= anyone
    assert ctp.cost < ev.by_name("always strongest").cost
    assert ev.by_name("cheapest_that_passes, learning off").chosen_first == {"sim-tiny": 24}
    assert "hard" in ev.learned
