"""Typed identities used across the runtime."""

from __future__ import annotations

import itertools
import os
import time
from typing import NewType

RunId = NewType("RunId", str)
"""Identifies one run in a store, e.g. ``r-20261129-235959-3f9a1c07d2e4``."""

NodeId = NewType("NodeId", str)
"""Identifies a node within a run's graph; stable across resumes."""

_SERIAL_BITS = 48


def parents(run_id: str) -> list[str]:
    """The ids of the runs that ``run_id`` is a sub-run of, outermost first (``R`` and
    ``R/a`` for ``R/a/b``): a sub-run's id is its parent's, ``/``, and its node."""
    return [run_id[:i] for i, c in enumerate(run_id) if c == "/"]


class _RunIds:
    """Run ids of this process: a random 48-bit start drawn per process, then counting up.

    Ids made in one second by one process share their prefix and count up, so they sort in
    the order they were made and the store adds each run's rows at the end of its indexes
    instead of at random places (random ids made SQLite's inserts markedly slower).
    Processes stay apart by their random starts (two overlap only if one start falls
    within the other's runs of the same second); a forked child draws a start of its own.
    """

    def __init__(self) -> None:
        self._second = -1
        self._stamp = ""
        self.reseed()

    def reseed(self) -> None:
        self._serial = itertools.count(int.from_bytes(os.urandom(6), "big"))

    def next(self) -> RunId:
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
        serial = next(self._serial) & ((1 << _SERIAL_BITS) - 1)
        return RunId(f"r-{self._stamp}-{serial:012x}")


_RUN_IDS = _RunIds()
os.register_at_fork(after_in_child=_RUN_IDS.reseed)


def new_run_id() -> RunId:
    """A fresh run id: sortable by creation time, unique across processes."""
    return _RUN_IDS.next()
