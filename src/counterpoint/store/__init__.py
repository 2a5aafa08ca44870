"""Run stores: where the event log lives. ``open_store`` picks one from a path or option."""

from __future__ import annotations

import os
from pathlib import Path

from .base import RunRecord, RunStore
from .memory import MemoryStore
from .sqlite import SQLiteStore

DEFAULT_PATH = Path(".counterpoint") / "runs.db"
ENV_VAR = "COUNTERPOINT_DB"

__all__ = ["DEFAULT_PATH", "ENV_VAR", "MemoryStore", "RunRecord", "RunStore", "SQLiteStore",
           "default_location", "open_store"]


def default_location() -> str:
    """``$COUNTERPOINT_DB`` if set, else ``.counterpoint/runs.db`` under the working directory."""
    return os.environ.get(ENV_VAR) or str(DEFAULT_PATH)


def open_store(location: str | os.PathLike[str] | None = None) -> RunStore:
    """Open the store at ``location`` (a path, or ``memory`` / ``:memory:``)."""
    where = str(location) if location is not None else default_location()
    if where in ("memory", ":memory:"):
        return MemoryStore()
    return SQLiteStore(where)
