"""The lineage of forked runs in the run index, on every store: a record's
``forked_from`` comes from its ``run_created`` event, and ``forks`` finds a run's forks
(:mod:`counterpoint.store.index`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from counterpoint.events import Event, EventKind
from counterpoint.ids import NodeId, RunId
from counterpoint.store import ForkPoint, RunStore, SQLiteStore
from counterpoint.store.schema import MIGRATIONS

from .helpers import created


def _fork(run: str, parent: str, seq: int, node: str | None, at: float) -> tuple[RunId, Event]:
    return RunId(run), Event(EventKind.RUN_CREATED, at, seq=1, data={
        "graph": "g", "forked_from": {"run": parent, "seq": seq, "node": node}})


def test_forks_are_found_from_their_records_both_ways(store: RunStore) -> None:
    store.append(RunId("parent"), created())
    for run, event in (_fork("a", "parent", 7, "b", 2.0), _fork("b", "parent", 3, None, 3.0),
                       _fork("c", "a", 5, None, 4.0)):
        store.append(run, event)
    store.append(RunId("other"), created(at=5.0))
    store.flush_sync()
    assert store.run(RunId("parent")).forked_from is None
    assert store.run(RunId("a")).forked_from == ForkPoint(run=RunId("parent"), seq=7,
                                                          node=NodeId("b"))
    assert store.run(RunId("b")).forked_from == ForkPoint(run=RunId("parent"), seq=3)
    assert [r.run_id for r in store.forks(RunId("parent"))] == ["a", "b"]
    assert [r.run_id for r in store.forks(RunId("a"))] == ["c"]
    assert store.forks(RunId("c")) == [] and store.forks(RunId("nothing")) == []


def test_a_file_from_before_forks_is_migrated_with_no_lineage(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = SQLiteStore(path, migrations=MIGRATIONS[:-1])
    old.migrate()
    old.close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO runs (run_id, graph, status, created_at, updated_at) "
                 "VALUES ('r-old', 'g', 'succeeded', 1.0, 2.0)")
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    try:
        assert store.run(RunId("r-old")).forked_from is None
        assert store.forks(RunId("r-old")) == []
    finally:
        store.close()


def test_sub_runs_are_the_runs_under_a_run_at_any_depth(store: RunStore) -> None:
    """``sub_runs`` finds ``RUN/...`` (deeper levels and retried ones ``~2`` too), oldest
    first, and nothing whose id merely starts like the run's."""
    ids = ["r", "r/a", "r/a/b", "r/a~2", "r/b", "ra", "r0", "r.x", "other", "other/r"]
    for at, run in enumerate(ids, start=1):
        store.append(RunId(run), created(at=float(at)))
    store.flush_sync()
    assert [r.run_id for r in store.sub_runs(RunId("r"))] == ["r/a", "r/a/b", "r/a~2", "r/b"]
    assert [r.run_id for r in store.sub_runs(RunId("r/a"))] == ["r/a/b"]
    assert store.sub_runs(RunId("r/b")) == [] and store.sub_runs(RunId("nothing")) == []


def test_top_runs_are_the_newest_runs_that_are_not_sub_runs(store: RunStore) -> None:
    """``top_runs`` skips sub-runs however many newer ones there are (a map over a
    sub-graph makes one per item), newest first, up to its limit; forks are top-level."""
    def make(run: str, at: float, parent: str | None = None) -> None:
        event = created(at=at)
        if parent is not None:
            event = Event(event.kind, event.at, data={**(event.data or {}), "parent": parent},
                          seq=event.seq)
        store.append(RunId(run), event)

    make("old", 1.0)
    make("fork", 2.0)
    for i in range(300):  # newer than both: they fill the 200 newest records and more
        make(f"old/map[{i}]", 3.0 + i, parent="old")
    make("new", 400.0)
    make("new/a", 401.0, parent="new")
    store.flush_sync()
    assert [r.parent for r in store.runs(3)] == ["new", None, "old"]
    assert [r.run_id for r in store.top_runs(10)] == ["new", "fork", "old"]
    assert [r.run_id for r in store.top_runs(2)] == ["new", "fork"]
    assert store.top_runs(0) == []


def test_ids_containing_gives_every_id_that_holds_the_text(store: RunStore) -> None:
    """What resolving a start of a run id or of its serial reads: ids only, each run
    whose id contains the text (sub-runs too); a pattern character is text here."""
    ids = ["r-20261203-0101-ab12", "r-20261203-0101-ab12/map[0]", "r-20261203-0102-cd34",
           "r-20261204-0101-ab99", "x_%y"]
    for at, run in enumerate(ids, start=1):
        store.append(RunId(run), created(at=float(at)))
    store.flush_sync()
    assert sorted(store.ids_containing("ab1")) == ids[:2]
    assert sorted(store.ids_containing("-0101-")) == [ids[0], ids[1], ids[3]]
    assert store.ids_containing("_%") == ["x_%y"]
    assert store.ids_containing("zz") == []
