"""Run stores: where the event log lives. ``open_store`` picks one from a path or option.

The store's roles (:mod:`.base`) are :class:`EventLog`, :class:`RunIndex`,
:class:`BlobStore`, :class:`ResponseCache`, :class:`StepEstimates`, :class:`CommandBus`,
:class:`AnswerBox` and :class:`RunDeletion`; :class:`RunStore` is all of them.
:class:`MemoryStore` keeps everything in memory, :class:`SQLiteStore` in one SQLite file, and a
:class:`SharedStore` is a handle on the one :class:`SQLiteStore` of a file that
``open_store`` shares within a process (:mod:`.shared`).
"""

from __future__ import annotations

import os
from pathlib import Path

from .base import (
    AnswerBox,
    BlobStore,
    CommandBus,
    Deletion,
    EventLog,
    ForkPoint,
    ResponseCache,
    RunDeletion,
    RunIndex,
    RunRecord,
    RunStore,
    StepEstimates,
)
from .deletion import prune
from .memory import MemoryStore
from .shared import SharedStore, close_idle_stores, open_shared
from .sqlite import SQLiteStore

DEFAULT_PATH = Path(".counterpoint") / "runs.db"
ENV_VAR = "COUNTERPOINT_DB"

__all__ = ["DEFAULT_PATH", "ENV_VAR", "AnswerBox", "BlobStore", "CommandBus", "Deletion",
           "EventLog", "ForkPoint", "MemoryStore", "ResponseCache", "RunDeletion", "RunIndex",
           "RunRecord", "RunStore", "SQLiteStore", "SharedStore", "StepEstimates",
           "close_idle_stores", "default_location", "is_file_location", "open_store", "prune"]


def default_location() -> str:
    """``$COUNTERPOINT_DB`` if set, else ``.counterpoint/runs.db`` under the working
    directory. A value of blanks counts as unset, as an empty one does (it named a store
    file called `` `` in the working directory)."""
    return (os.environ.get(ENV_VAR) or "").strip() or str(DEFAULT_PATH)


def is_file_location(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a SQLite file (not ``memory`` nor a database URL)."""
    where = str(location)
    return where not in ("memory", ":memory:") and "://" not in where


def open_store(location: str | os.PathLike[str] | None = None) -> RunStore:
    """Open the store at ``location`` (a path, ``memory`` / ``:memory:``, or a
    ``postgresql://`` URL: a :class:`~.postgres.PostgresStore`, which needs the
    ``postgres`` extra).

    A path gives a handle on the process's shared store of that file (see
    :mod:`.shared`): close it when done. Opening reads only; the file and its
    directories are created by the first write.
    """
    where = str(location) if location is not None else default_location()
    if where in ("memory", ":memory:"):
        return MemoryStore()
    if where.startswith(("postgresql://", "postgres://")):
        return _open_postgres(where)
    if "://" in where:
        _unknown_scheme(where)
    return open_shared(where)


def _unknown_scheme(where: str) -> None:
    """Refuse a URL of another scheme: taken as a path, ``postgresql:/`` typos made folders
    named after the URL, its password included, and a SQLite file nobody asked for."""
    from ..errors import StoreError
    from .postgres_url import redact

    scheme = where.split("://", 1)[0]
    raise StoreError(f"store {redact(where)}: {scheme + '://'!r} is not a store this "
                     "counterpoint opens; give a postgresql:// (or postgres://) URL, a file "
                     "path or 'memory'")


def _open_postgres(url: str) -> RunStore:
    """A :class:`~.postgres.PostgresStore` on ``url``, or a clear error without psycopg."""
    try:
        from .postgres import PostgresStore
    except ImportError as exc:
        from ..errors import StoreError
        from .postgres_url import redact

        raise StoreError(f"store {redact(url)}: PostgreSQL stores need psycopg ({exc}); "
                         "install them with `pip install 'counterpoint[postgres]'`") from None
    return PostgresStore(url)
