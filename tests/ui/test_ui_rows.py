"""The runs list (counterpoint.ui.rows): sent from the run index alone, its nodes, tokens and
cost filled in by the runs stream, each finished run's log read once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from starlette.testclient import TestClient
from ui_support import mapped_graph

import counterpoint as cp
from counterpoint.events import Event
from counterpoint.ids import RunId
from counterpoint.store import MemoryStore, RunRecord
from counterpoint.ui import create_app
from counterpoint.ui.rows import RunRows

LOCAL = "http://127.0.0.1"


class _CountingStore(MemoryStore):
    """A memory store that counts whole-log reads."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def events(self, run_id: RunId) -> list[Event]:
        self.reads += 1
        return super().events(run_id)


def _runs(store: MemoryStore, count: int) -> list[RunId]:
    model = cp.Model(cp.ScriptedModel(["yes"] * count, name="m"))

    async def ask() -> str:
        return (await model.generate("ok?")).text

    g = cp.Graph("asks")
    g.add("ask", ask)
    return [cp.run_sync(g, store=store).run_id for _ in range(count)]


def _frames(client: TestClient, path: str) -> Iterator[dict[str, Any]]:
    with client.stream("GET", path) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                yield json.loads(line[6:])


def test_the_runs_list_reads_the_index_and_no_log() -> None:
    store = _CountingStore()
    made = _runs(store, 5)
    store.reads = 0
    rows = TestClient(create_app(store), base_url=LOCAL).get("/api/runs").json()["runs"]
    assert store.reads == 0
    assert [r["run_id"] for r in rows] == made[::-1]
    assert all(r["status"] == "succeeded" and r["duration"] >= 0 for r in rows)


def test_the_runs_stream_fills_in_nodes_tokens_and_cost() -> None:
    store = _CountingStore()
    made = set(_runs(store, 3))
    client = TestClient(create_app(store), base_url=LOCAL)
    for frame in _frames(client, "/api/runs/stream"):
        if all(r["tokens"] is not None for r in frame["runs"]):
            break
    assert {r["run_id"] for r in frame["runs"]} == made
    assert all(r["tokens"] > 0 and r["nodes"] == 1 and r["cost"] is not None
               for r in frame["runs"])
    totals = client.get("/api/runs").json()["runs"]  # the list now has them too
    assert [r["tokens"] for r in totals] == [r["tokens"] for r in frame["runs"]]


def test_a_finished_runs_log_is_read_once_and_a_second_filler_does_not_wait() -> None:
    store = _CountingStore()
    _runs(store, 2)
    rows = RunRows(store)
    records = rows.records(10)
    store.reads = 0
    assert rows.fill(records, budget=60.0)
    assert store.reads == 2
    assert not rows.fill(records, budget=60.0) and store.reads == 2
    busy = RunRows(store)
    with busy._filling:  # another thread is filling: this one returns at once
        assert not busy.fill(records, budget=60.0)
    assert store.reads == 2


class _IndexCountingStore(MemoryStore):
    """A memory store that records how many index records each ``runs`` read asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    def runs(self, limit: int = 50) -> list[RunRecord]:
        self.asked.append(limit)
        return super().runs(limit)


def test_top_level_runs_behind_many_sub_runs_are_read_from_the_index_of_them() -> None:
    """The list of top-level runs is the store's ``top_runs``: no read of the newest
    records, however many sub-runs are newer (a scan of 20,000 took 250 ms a look)."""
    store = _IndexCountingStore()
    single = cp.Graph("single")
    single.add("one", lambda: 1)
    older = cp.run_sync(single, store=store).run_id
    mapped = cp.run_sync(mapped_graph(30), store=store).run_id  # 30 sub-runs, newer than both
    rows = RunRows(store)
    assert [r.run_id for r in rows.records(5)] == [mapped, older]
    newer = cp.run_sync(single, store=store).run_id
    assert [r.run_id for r in rows.records(5)] == [newer, mapped, older]
    store.delete_runs([RunId(older)])
    assert [r.run_id for r in rows.records(5)] == [newer, mapped]
    assert store.asked == []  # the newest records were never read
    assert len(rows.records(5, sub_runs=True)) == 5 and store.asked == [5]
    store.close()
