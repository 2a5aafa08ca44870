"""Shared fixtures: every store implementation, and a clean working directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from counterpoint.store import MemoryStore, RunStore, SQLiteStore


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    """Each store implementation in turn (the conformance suite runs on all of them)."""
    the_store: RunStore = MemoryStore() if request.param == "memory" \
        else SQLiteStore(tmp_path / "runs.db")
    yield the_store
    the_store.close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteStore]:
    the_store = SQLiteStore(tmp_path / "runs.db")
    yield the_store
    the_store.close()
