"""A recorded run's blackboard read back from its store, at its end or at any event."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from ..ids import RunId
from .projection import BoardState, Versioned, fold

if TYPE_CHECKING:
    from ..store import RunStore


def board_of(store: RunStore | str | None, run: RunId | str, *,
             until: int | None = None) -> BoardState:
    """Run ``run``'s board as its log in ``store`` has it (up to event ``until``);
    ``store`` is a store, or where one is (a path or URL; ``None``: the default), opened
    for the call, as :func:`counterpoint.approvals` takes it."""
    from ..store import RunStore, open_store
    if isinstance(store, RunStore):
        return fold(store.events(RunId(run)), until=until)
    opened = open_store(store)
    try:
        return fold(opened.events(RunId(run)), until=until)
    finally:
        opened.close()


def board_at(store: RunStore | str | None, run: RunId | str, key: str,
             seq: int) -> Versioned:
    """Key ``key`` of run ``run``'s board as it stood right after event ``seq``
    (``version=0``, value ``None``: not written by then); ``store`` as for
    :func:`board_of`."""
    entry = board_of(store, run, until=seq).entries.get(key)
    if entry is None:
        return Versioned(None, 0)
    return Versioned(copy.deepcopy(entry.value), entry.version)
