"""The step-estimates role, on every store (:mod:`counterpoint.store.estimates`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from counterpoint.store import RunStore, SQLiteStore


class TestStepEstimates:
    def test_estimates_fold_observed_durations(self, store: RunStore) -> None:
        assert store.estimates() == {}
        store.record_durations({"m:f": [1.0, 3.0]})
        store.record_durations({"m:f": [2.0]})
        assert store.estimates() == {"m:f": pytest.approx(2.0)}

    def test_estimates_are_republished_only_when_a_mean_moves_enough(
            self, store: RunStore) -> None:
        # the same mapping object while means hold: runs of a graph reuse its ranks
        store.record_durations({"m:slow": [1.0], "m:tiny": [0.00002]})
        first = store.estimates()
        store.record_durations({"m:tiny": [0.00004]})  # +50%, but 10 µs: no rank cares
        assert store.estimates() is first
        store.record_durations({"m:slow": [1.02]})  # +1%
        assert store.estimates() is first
        store.record_durations({"m:slow": [1.5, 1.5]})  # +25%, +255 ms
        moved = store.estimates()
        assert moved is not first and moved["m:slow"] == pytest.approx(1.255)
        store.record_durations({"m:new": [0.0001]})  # a step seen for the first time
        assert store.estimates()["m:new"] == pytest.approx(0.0001)


def test_sqlite_estimates_persist_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    first = SQLiteStore(path)
    first.record_durations({"m:f": [0.5]})
    first.close()
    second = SQLiteStore(path)
    assert second.estimates() == {"m:f": pytest.approx(0.5)}
    second.close()
