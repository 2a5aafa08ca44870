"""The L1 benchmark's baselines compute the graph, and every one is measured and reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.large import DEFAULT_GC, expected_values, measure_l1
from benchmarks.large_asyncio import BASELINES, run_l1_asyncio


@pytest.mark.parametrize("name", ["judged", *BASELINES])
def test_each_asyncio_baseline_computes_every_node(name: str) -> None:
    run = run_l1_asyncio if name == "judged" else BASELINES[name][1]
    _, values = run(7, 4)
    assert values == expected_values(7, 4)


def test_a_small_l1_reports_every_baseline_beside_the_judged_one(tmp_path: Path) -> None:
    result = measure_l1(tmp_path, trials=1, width=6, layers=3, rss=False)
    assert set(result.other_seconds) == {*BASELINES, DEFAULT_GC}
    data = result.as_json()
    assert set(data["other_baselines"]) == {*BASELINES, DEFAULT_GC}
    for entry in data["other_baselines"].values():
        assert entry["median_s"] > 0
        assert entry["ratio_counterpoint_over_it"] == pytest.approx(
            data["counterpoint"]["median_s"] / entry["median_s"])
