"""The store package's public names, and each store filling every role."""

from __future__ import annotations

import counterpoint.store as store_package
from counterpoint.store import (
    AnswerBox,
    BlobStore,
    CommandBus,
    EventLog,
    MemoryStore,
    ResponseCache,
    RunDeletion,
    RunIndex,
    RunStore,
    SharedStore,
    SQLiteStore,
    StepEstimates,
)
from counterpoint.store.postgres import PostgresStore

ROLES = (EventLog, RunIndex, BlobStore, ResponseCache, StepEstimates, CommandBus, AnswerBox,
         RunDeletion)


def test_public_names_are_pinned() -> None:
    assert sorted(store_package.__all__) == sorted([
        "DEFAULT_PATH", "ENV_VAR", "AnswerBox", "BlobStore", "CommandBus", "Deletion",
        "EventLog", "ForkPoint", "MemoryStore", "ResponseCache", "RunDeletion", "RunIndex",
        "RunRecord", "RunStore", "SQLiteStore", "SharedStore", "StepEstimates",
        "close_idle_stores", "default_location", "is_file_location", "open_store", "prune"])
    for name in store_package.__all__:
        assert hasattr(store_package, name), name


def test_every_store_fills_every_role() -> None:
    for implementation in (MemoryStore, SQLiteStore, SharedStore, PostgresStore):
        assert issubclass(implementation, RunStore)
        for role in ROLES:
            assert issubclass(implementation, role), (implementation, role)


def test_each_role_is_small() -> None:
    """A fake of one role implements a handful of methods, not the whole store."""
    sizes = {role.__name__: len(role.__abstractmethods__) for role in ROLES}
    assert sizes == {"EventLog": 4, "RunIndex": 4, "BlobStore": 2, "ResponseCache": 2,
                     "StepEstimates": 2, "CommandBus": 4, "AnswerBox": 4,
                     "RunDeletion": 1}
    assert RunStore.__abstractmethods__ == frozenset().union(
        *(role.__abstractmethods__ for role in ROLES), {"close"})
