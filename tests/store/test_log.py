"""The event-log role, on every store (:mod:`counterpoint.store.log`)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.events import Event, EventKind
from counterpoint.ids import NodeId, RunId
from counterpoint.store import EventLog, RunStore, SQLiteStore
from counterpoint.store.sqlite import BLOB_THRESHOLD

from .helpers import RUN, created, node_event, sqlite_of


class TestEventLog:
    def test_events_round_trip_in_order(self, store: RunStore) -> None:
        store.append(RUN, created())
        for seq in range(2, 50):
            store.append(RUN, node_event(seq, data={"k": seq} if seq % 7 == 0 else None))
        store.flush_sync()
        events = store.events(RUN)
        assert [e.seq for e in events] == list(range(1, 50))
        assert events[0].kind is EventKind.RUN_CREATED
        assert events[6].data == {"k": 7} and events[7].data is None
        assert all(e.output is None for e in events)

    def test_append_many_keeps_order_and_stores_what_precedes_an_unstorable_event(
            self, store: RunStore) -> None:
        store.append_many(RUN, [])  # nothing to queue: not an error
        store.append_many(RUN, [created(), *(node_event(seq) for seq in range(2, 6))])
        store.append_many(RUN, [node_event(6, data={"k": 6})])
        bad = Event(EventKind.NODE_FAILED, 9.0, NodeId("n9"), 1, data={"error": object()},
                    seq=9)
        if sqlite_of(store) is not None:  # the memory store keeps objects as they are
            with pytest.raises(cp.StoreError, match=r"event 9 \(node_failed, node 'n9'\) "
                                                    r"cannot be stored"):
                store.append_many(RUN, [node_event(7), node_event(8), bad, node_event(10)])
        else:
            store.append_many(RUN, [node_event(7), node_event(8)])
        store.flush_sync()
        events = store.events(RUN)
        assert [e.seq for e in events] == list(range(1, 9))  # the events before it, in order
        assert events[5].data == {"k": 6}
        assert store.run(RUN).status == "running"

    def test_values_survive_including_large_ones_stored_once(self, store: RunStore) -> None:
        big = '"' + "x" * (BLOB_THRESHOLD * 4) + '"'
        store.append(RUN, created())
        store.append(RUN, node_event(2, EventKind.NODE_SUCCEEDED, value=big))
        store.append(RUN, node_event(3, EventKind.NODE_SUCCEEDED, value=big))
        store.append(RUN, node_event(4, EventKind.NODE_SUCCEEDED, value="42"))
        store.flush_sync()
        assert [e.value for e in store.events(RUN)] == [None, big, big, "42"]
        sqlite = sqlite_of(store)
        if sqlite is not None:
            conn = sqlite3.connect(sqlite.path)
            assert conn.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 1
            stored = conn.execute("SELECT SUM(LENGTH(events)) FROM segments").fetchone()[0]
            assert stored < len(big)  # the value is referenced, not copied
            conn.close()

    def test_unknown_run_is_a_clear_error(self, store: RunStore) -> None:
        with pytest.raises(cp.RunNotFound, match="r-missing"):
            store.events(RunId("r-missing"))
        store.append(RUN, created())
        store.flush_sync()
        with pytest.raises(cp.RunNotFound, match="r-missing"):
            store.events(RunId("r-missing"))

    def test_flush_barrier_makes_appends_durable(self, store: RunStore) -> None:
        async def scenario() -> None:
            store.append(RUN, created())
            for seq in range(2, 200):
                store.append(RUN, node_event(seq))
            await store.flush()
            assert len(store.events(RUN)) == 199

        asyncio.run(scenario())

    def test_settle_when_flushed_resolves_a_future_once_appends_are_durable(
            self, store: RunStore) -> None:
        async def scenario() -> None:
            loop = asyncio.get_running_loop()
            store.append(RUN, created())
            for seq in range(2, 200):
                store.append(RUN, node_event(seq))
            fut: asyncio.Future[None] = loop.create_future()
            store.settle_when_flushed(fut)
            if sqlite_of(store) is not None:  # resolved from the writer's answer, on the loop
                assert not fut.done()
            await asyncio.wait_for(fut, timeout=30)
            assert len(store.events(RUN)) == 199
            again: asyncio.Future[None] = loop.create_future()
            store.settle_when_flushed(again)  # nothing new: resolved at once
            assert again.done() and again.exception() is None

        asyncio.run(scenario())

    def test_settle_when_batched_resolves_each_waiter_once_its_appends_are_durable(
            self, store: RunStore) -> None:
        """The first waiter may hurry the writer, those behind it wait for the next
        batch: every one is resolved, none before what was appended before it is stored."""
        async def scenario() -> None:
            loop = asyncio.get_running_loop()
            waiters = []
            for i in range(20):  # twenty runs started together, each waiting for its first
                run = RunId(f"r-batched-{i}")
                store.append(run, created())
                fut: asyncio.Future[None] = loop.create_future()
                store.settle_when_batched(fut)
                waiters.append((run, fut))
            for run, fut in waiters:
                await asyncio.wait_for(fut, timeout=30)
                assert fut.exception() is None
                assert [e.kind for e in store.events(run)] == [EventKind.RUN_CREATED]

        asyncio.run(scenario())


def test_settle_when_flushed_defaults_to_flush_for_other_stores() -> None:
    """A store that only implements flush() gets the role's default: fut follows it."""

    class Slow(cp.MemoryStore):
        fail = False
        settle_when_flushed = EventLog.settle_when_flushed

        async def flush(self) -> None:
            await asyncio.sleep(0.01)
            if self.fail:
                raise cp.StoreError("disk full")

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        store = Slow()
        ok: asyncio.Future[None] = loop.create_future()
        store.settle_when_flushed(ok)
        assert not ok.done()  # it waits for flush()
        await asyncio.wait_for(ok, timeout=30)
        store.fail = True
        failed: asyncio.Future[None] = loop.create_future()
        store.settle_when_flushed(failed)
        with pytest.raises(cp.StoreError, match="disk full"):
            await asyncio.wait_for(failed, timeout=30)

    asyncio.run(scenario())


def test_a_top_level_run_returns_with_its_log_durable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")

    async def step() -> int:
        return 1

    g = cp.Graph("durable")
    g.add("a", step)
    result = asyncio.run(cp.run(g, store=store))  # no flush of our own
    kinds = [e.kind for e in store.events(result.run_id)]
    assert kinds[0] is EventKind.RUN_CREATED and kinds[-1] is EventKind.RUN_FINISHED
    assert store.run(result.run_id).status == "succeeded"
    store.close()
