"""Every store implementation, for the role conformance suites; no shared store is left
open from one test to the next."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from counterpoint.store import MemoryStore, RunStore, SQLiteStore, close_idle_stores, open_store


@pytest.fixture(params=["memory", "sqlite", "sqlite-thread", "shared", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    """Each store implementation in turn: the memory store, a SQLite store (with its
    writer process, and committing in a thread), a handle on a shared SQLite store (what
    ``open_store(path)`` gives) and a PostgreSQL store."""
    the_store: RunStore
    if request.param == "memory":
        the_store = MemoryStore()
    elif request.param == "sqlite":
        the_store = SQLiteStore(tmp_path / "runs.db")
    elif request.param == "sqlite-thread":  # commits in its own thread, no writer process
        the_store = SQLiteStore(tmp_path / "runs.db", writer="thread")
    elif request.param == "shared":
        the_store = open_store(tmp_path / "shared.db")
    else:  # a fresh database on the session's real PostgreSQL server
        server = request.getfixturevalue("postgres_server")
        the_store = open_store(server.create_database())
    yield the_store
    the_store.close()


@pytest.fixture(autouse=True)
def _no_shared_store_outlives_its_test() -> Iterator[None]:
    yield
    close_idle_stores()
