"""The response-cache role, on every store (:mod:`counterpoint.store.cache`)."""

from __future__ import annotations

from counterpoint.store import RunStore, SQLiteStore

from .helpers import RUN, created, sqlite_of


class TestResponseCache:
    def test_a_response_is_visible_at_once_and_a_later_put_replaces_it(
            self, store: RunStore) -> None:
        assert store.cache_get("k") is None
        store.cache_put("k", '{"text": "one"}')
        assert store.cache_get("k") == '{"text": "one"}'
        store.cache_put("k", '{"text": "two"}')
        assert store.cache_get("k") == '{"text": "two"}'
        assert store.cache_get("other") is None

    def test_a_response_is_durable_with_the_next_commit(self, store: RunStore) -> None:
        store.cache_put("k", '{"text": "kept"}')
        store.append(RUN, created())
        store.flush_sync()
        sqlite = sqlite_of(store)
        if sqlite is not None:
            reopened = SQLiteStore(sqlite.path)
            assert reopened.cache_get("k") == '{"text": "kept"}'
            reopened.close()
