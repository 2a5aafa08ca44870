"""The blob role, on every store (:mod:`counterpoint.store.blobs`)."""

from __future__ import annotations

import hashlib

from counterpoint.store import RunStore, SQLiteStore

from .helpers import RUN, created, sqlite_of


class TestBlobStore:
    def test_a_blob_is_stored_once_by_content_and_read_at_once(self, store: RunStore) -> None:
        text = "a prompt " * 500
        digest = store.put_blob(text)
        assert digest == hashlib.sha256(text.encode()).hexdigest()
        assert store.put_blob(text) == digest  # idempotent
        assert store.blob(digest) == text  # before anything is flushed

    def test_an_unknown_digest_is_none(self, store: RunStore) -> None:
        assert store.blob("0" * 64) is None
        store.put_blob("something")
        assert store.blob("0" * 64) is None

    def test_a_blob_is_durable_with_the_next_event(self, store: RunStore) -> None:
        digest = store.put_blob("kept")
        store.append(RUN, created())
        store.flush_sync()
        sqlite = sqlite_of(store)
        if sqlite is not None:
            reopened = SQLiteStore(sqlite.path)
            assert reopened.blob(digest) == "kept"
            reopened.close()
        assert store.blob(digest) == "kept"
