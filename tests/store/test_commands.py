"""The command-bus role, on every store (:mod:`counterpoint.store.commands`)."""

from __future__ import annotations

import asyncio

import pytest

import counterpoint as cp
from counterpoint.ids import RunId
from counterpoint.store import RunStore

from .helpers import RUN, created, finished


class TestCommandBus:
    def test_cancel_requests_reach_watchers(self, store: RunStore) -> None:
        store.append(RUN, created())
        store.flush_sync()

        async def scenario() -> None:
            seen = asyncio.Event()
            store.watch_cancel(RUN, asyncio.get_running_loop(), seen.set)
            store.request_cancel(RUN)
            await asyncio.wait_for(seen.wait(), timeout=30)
            store.unwatch_cancel(RUN)
            store.unwatch_cancel(RUN)  # idempotent

        asyncio.run(scenario())
        assert RUN in store.cancel_requests()

    def test_a_finished_run_has_no_open_cancel_request(self, store: RunStore) -> None:
        store.append(RUN, created())
        store.flush_sync()
        store.request_cancel(RUN)
        store.append(RUN, finished(2, "cancelled"))
        store.flush_sync()
        assert RUN not in store.cancel_requests()

    def test_cancelling_an_unknown_run_is_a_clear_error(self, store: RunStore) -> None:
        assert store.cancel_requests() == set()
        with pytest.raises(cp.RunNotFound, match="r-missing"):
            store.request_cancel(RunId("r-missing"))
