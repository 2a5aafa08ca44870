"""A run's shared blackboard: versioned keys with per-key conflict policies, and work
queues whose items agents claim under leases.

Declare it on the graph (``Graph(name, board=Board(keys=..., queues=...))``); steps use
it through ``ctx.board`` (:mod:`~counterpoint.board.access`,
:mod:`~counterpoint.board.queue`). Every write, conflict and claim is an event of the
run's log, and the board is their projection (:mod:`~counterpoint.board.projection`):
after a crash it is exactly what was logged, and its state at any event can be read
back (:func:`board_at`).
"""

from __future__ import annotations

from ..errors import BoardConflict, ClaimLost
from .pool import pool
from .projection import BoardState, Conflict, Versioned, Write, fold
from .spec import Board, Key, WorkQueue
from .store import board_at, board_of

__all__ = ["Board", "BoardConflict", "BoardState", "ClaimLost", "Conflict", "Key",
           "Versioned", "WorkQueue", "Write", "board_at", "board_of", "fold", "pool"]
