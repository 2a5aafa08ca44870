"""A large run is sent to the page as a bounded subset (counterpoint.ui.subset, through
RunView): the critical path, failed and active nodes and their neighbours, with counts."""

from __future__ import annotations

import orjson
import pytest

import counterpoint as cp
from benchmarks.large import build_l1
from counterpoint.events import EventKind
from counterpoint.store import MemoryStore
from counterpoint.ui import subset
from counterpoint.ui.projection import RunView


def _explode() -> int:
    raise ValueError("the fuse was lit")


def _large_run() -> tuple[MemoryStore, cp.RunResult]:
    g = build_l1(100, 30)  # 3,000 nodes, 30 layers
    g.add("boom", _explode, after=["n5-7"])
    store = MemoryStore()
    return store, cp.run_sync(g, store=store)


def test_a_large_run_is_sent_as_a_bounded_subset_holding_the_critical_path() -> None:
    store, result = _large_run()
    view = RunView(store.run(result.run_id))
    view.feed(store.events(result.run_id))
    data = view.snapshot()
    ids = {n["id"] for n in data["nodes"]}
    assert 0 < len(ids) <= subset.BOUND
    assert data["critical"] and set(data["critical"]) <= ids  # its path depends on timing
    assert "boom" in ids and "n5-7" in ids  # a failed node and its dependency
    part = data["partial"]
    assert part["total"] == 3001 and part["shown"] == len(ids)
    assert part["counts"]["failed"] == 1 and sum(part["counts"].values()) == 3001
    whole = view.snapshot(full=True)
    assert len(whole["nodes"]) == 3001 and "partial" not in whole
    assert len(orjson.dumps(data)) * 5 < len(orjson.dumps(whole))


def test_the_subset_follows_the_run_nodes_join_and_leave_it() -> None:
    store, result = _large_run()
    record = store.run(result.run_id)
    events = store.events(result.run_id)
    # part-way: some nodes of the first layers are running, none has failed yet
    split = next(i for i, ev in enumerate(events)
                 if ev.kind is EventKind.NODE_SUCCEEDED and ev.node == "n3-0")
    view = RunView(record)
    view.feed(events[:split])
    first = view.snapshot()
    held = {n["id"] for n in first["nodes"]}
    assert len(held) <= subset.BOUND and "boom" not in held
    view.feed(events[split:], record)
    later = view.update()
    assert later is not None and not later["reshaped"]
    held -= set(later["dropped"])
    held |= {n["id"] for n in later["nodes"]}
    final = {n["id"] for n in view.snapshot()["nodes"]}
    assert held == final and "boom" in final and later["dropped"]


@pytest.mark.parametrize("width,layers", [(10, 5), (40, 50)])
def test_a_run_up_to_the_threshold_is_sent_whole_as_before(width: int, layers: int) -> None:
    store = MemoryStore()
    result = cp.run_sync(build_l1(width, layers), store=store)
    view = RunView(store.run(result.run_id))
    view.feed(store.events(result.run_id))
    data = view.snapshot()
    assert len(data["nodes"]) == width * layers and "partial" not in data
    assert "dropped" not in (view.update() or {})
