"""The SQLite store's run index reads: records and ids from the ``runs`` table.

A part of :class:`~.sqlite.SQLiteStore`, which provides the reader connection (opened
without waiting for writers, ``None`` while the file does not exist) and its lock.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from ..errors import RunNotFound
from ..ids import RunId
from .index import RunRecord, record_from_row
from .schema import RUN_COLUMNS


class SQLiteIndex:
    """The :class:`~.index.RunIndex` reads of :class:`~.sqlite.SQLiteStore`."""

    path: Path
    _read_lock: threading.RLock
    _reader: sqlite3.Connection | None

    def _open_reader(self) -> sqlite3.Connection | None:
        raise NotImplementedError

    def run(self, run_id: RunId) -> RunRecord:
        with self._read_lock:
            reader = self._open_reader()
            row = None if reader is None else reader.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise self._not_found(run_id)
        return record_from_row(row)

    def runs(self, limit: int = 50) -> list[RunRecord]:
        return self._records("ORDER BY created_at DESC LIMIT ?", (limit,))

    def top_runs(self, limit: int = 50) -> list[RunRecord]:
        return self._records("WHERE parent IS NULL ORDER BY created_at DESC LIMIT ?", (limit,))

    def forks(self, run_id: RunId) -> list[RunRecord]:
        return self._records("WHERE fork_of = ? ORDER BY created_at", (run_id,))

    def sub_runs(self, run_id: RunId) -> list[RunRecord]:
        # the ids between "RUN/" and "RUN0" ("0" follows "/"): a range of the primary key
        return self._records("WHERE run_id > ? AND run_id < ? ORDER BY created_at",
                             (f"{run_id}/", f"{run_id}0"))

    def ids_containing(self, text: str) -> list[RunId]:
        with self._read_lock:
            reader = self._open_reader()
            rows = [] if reader is None else reader.execute(
                "SELECT run_id FROM runs WHERE instr(run_id, ?) > 0", (text,)).fetchall()
        return [RunId(r[0]) for r in rows]

    def _records(self, clauses: str, params: tuple[object, ...]) -> list[RunRecord]:
        with self._read_lock:
            reader = self._open_reader()
            if reader is None:
                return []
            rows = reader.execute(f"SELECT {RUN_COLUMNS} FROM runs {clauses}", params).fetchall()
        return [record_from_row(r) for r in rows]

    def _not_found(self, run_id: RunId) -> RunNotFound:
        if self._reader is None:
            return RunNotFound(f"run {run_id} not found in store {self.path} (it holds no "
                               "runs yet); pass --db PATH or set COUNTERPOINT_DB")
        return RunNotFound(f"run {run_id} not found in store {self.path}; list runs with "
                           "`counterpoint runs`")
