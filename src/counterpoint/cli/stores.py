"""What the commands open: an existing run store, and the working directory as a place to
import graph modules from. Imports nothing heavy until called."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import RunNotFound, StoreError

if TYPE_CHECKING:
    from ..store import RunStore


def db_flag(db: str | None) -> str:
    """`` --db DB`` for a command line shown to the user (empty without ``db``), with a
    URL's password left out (the command then reads it from ``PGPASSWORD``)."""
    if not db:
        return ""
    import shlex

    from ..store.postgres_url import without_password
    return f" --db {shlex.quote(without_password(db))}"


def missing_file(location: str) -> bool:
    """Whether ``location`` names a SQLite file that does not exist (a database URL or
    ``memory`` is never missing: opening it says what is wrong, if anything)."""
    from ..store import is_file_location
    return is_file_location(location) and not Path(location).exists()


def open_existing(db: str | None, run_id: str | None = None) -> RunStore:
    """The store at ``db``, which must exist already (reading never creates one)."""
    from ..store import default_location, open_store
    location = db or default_location()
    if missing_file(location):
        if run_id is not None:
            raise RunNotFound(f"run {run_id} not found: there is no store at {location}; "
                              "pass --db PATH or set COUNTERPOINT_DB")
        raise StoreError(f"store {location} does not exist; pass --db PATH or set "
                         "COUNTERPOINT_DB")
    return open_store(location)


def open_for_writing(db: str | None, run_id: str | None = None) -> RunStore:
    """The store at ``db``, which must exist already and take writes: a command that
    records (an answer, a cancel, a fork, a delete) is refused before it writes anything
    to a store it could not finish writing to (:func:`check_writable`), and so is one
    that opens read-only all the same (it became read-only meanwhile)."""
    from ..store import default_location, paths
    location = db or default_location()
    if not missing_file(location):  # a missing one: open_existing says so
        check_writable(db)
    store = open_existing(db, run_id)
    if _opened_read_only(store):  # it became read-only since it was checked: never write
        store.close()
        path = Path(location)
        raise paths.error(path, paths.writing_problem(path) or
                          "it was opened read-only, so nothing can be recorded in it; "
                          f"check that it and its directory are writable {paths.ELSEWHERE}")
    return store


def _opened_read_only(store: RunStore) -> bool:
    """Whether ``store`` is a SQLite store read through a read-only connection (it cannot
    be written: see :mod:`counterpoint.store.sqlite_access`)."""
    from ..store import SharedStore, SQLiteStore
    inner = store.store if isinstance(store, SharedStore) else store
    return isinstance(inner, SQLiteStore) and inner.read_only


def check_writable(db: str | None) -> None:
    """Refuse, before anything is loaded or run, a store location a run could not be
    recorded in: a directory, a device, a read-only file or directory, a pseudo file
    system such as ``/proc``, or (for a location the user named, not the default
    ``.counterpoint/runs.db``) a directory that does not exist."""
    from ..store import DEFAULT_PATH, default_location, is_file_location, paths
    location = db or default_location()
    if not is_file_location(location):
        return
    path = Path(location)
    problem = paths.writing_problem(path, create_directories=location == str(DEFAULT_PATH))
    if problem is not None:
        raise paths.error(path, problem)


@contextlib.contextmanager
def closing_quietly_on_error(store: RunStore) -> Iterator[None]:
    """Close ``store`` when the block ends. When the block raises, a store that fails to
    close (it reports again the write failure the block's error already tells, and says
    less) does not replace that error."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(StoreError):
            store.close()
        raise
    store.close()


def importable_cwd() -> None:
    """Put the working directory on ``sys.path``: ``python -m`` does, the console script
    does not, and ``counterpoint run package.module`` should find local modules either way."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
