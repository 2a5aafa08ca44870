"""counterpoint.tune_gc: the collector settings for processes that run many workflows."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

import counterpoint as cp
from counterpoint.garbage import THRESHOLDS


@pytest.fixture(autouse=True)
def restore_gc() -> Iterator[None]:
    before, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.set_threshold(*before)
    if enabled:
        gc.enable()


def test_tune_gc_raises_the_thresholds_and_returns_the_old_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COUNTERPOINT_GC", raising=False)
    gc.set_threshold(700, 10, 10)
    assert cp.tune_gc() == (700, 10, 10)
    assert gc.get_threshold() == THRESHOLDS


def test_tune_gc_never_lowers_a_threshold_set_higher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COUNTERPOINT_GC", raising=False)
    gc.set_threshold(100_000, 5, 50)
    cp.tune_gc()
    assert gc.get_threshold() == (100_000, THRESHOLDS[1], 50)


def test_counterpoint_gc_default_keeps_pythons_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COUNTERPOINT_GC", "default")
    gc.set_threshold(700, 10, 10)
    cp.tune_gc()
    assert gc.get_threshold() == (700, 10, 10)


def test_a_collector_switched_off_stays_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COUNTERPOINT_GC", raising=False)
    gc.set_threshold(0, 10, 10)
    cp.tune_gc()
    assert gc.get_threshold()[0] == 0


def test_run_sync_tunes_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COUNTERPOINT_GC", raising=False)
    gc.set_threshold(700, 10, 10)
    g = cp.Graph("gc")
    g.add("a", _one)
    assert cp.run_sync(g, store="memory").ok
    assert gc.get_threshold() == THRESHOLDS


def _one() -> int:
    return 1
