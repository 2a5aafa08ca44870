"""A recorded run's blackboard read back from its store, at its end or at any event."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from ..ids import RunId
from .projection import BoardState, Versioned, fold

if TYPE_CHECKING:
    from ..store import RunStore


def board_of(store: RunStore, run: RunId | str, *, until: int | None = None) -> BoardState:
    """Run ``run``'s board as its log in ``store`` has it (up to event ``until``)."""
    return fold(store.events(RunId(run)), until=until)


def board_at(store: RunStore, run: RunId | str, key: str, seq: int) -> Versioned:
    """Key ``key`` of run ``run``'s board as it stood right after event ``seq``
    (``version=0``, value ``None``: not written by then)."""
    entry = board_of(store, run, until=seq).entries.get(key)
    if entry is None:
        return Versioned(None, 0)
    return Versioned(copy.deepcopy(entry.value), entry.version)
