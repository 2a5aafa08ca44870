"""``ctx.board``: how a running step reads and writes its run's blackboard.

Reads return a :class:`~counterpoint.board.projection.Versioned` and remember the
version read; a write is based on the version its attempt last read of that key (or on
``read=``), and its key's policy decides what happens when the key has moved on since
(:mod:`counterpoint.board.policies`). Every write and every conflict is an event of the
node's attempt; the board is the projection of those events. Safe to call from async
steps and from sync steps' threads alike (:mod:`counterpoint.board.link`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import BoardConflict, PermissionDenied
from ..events import EventKind
from ..ids import NodeId
from ..permissions import write_refusal
from .link import Link, as_json, copy_json
from .policies import decide
from .projection import Conflict, Versioned, Write
from .queue import QueueAccess

if TYPE_CHECKING:
    from ..context import RunAccess

_log = logging.getLogger("counterpoint.board")


class BoardAccess:
    """The run's blackboard as one node attempt sees it (``ctx.board``)."""

    __slots__ = ("_link",)

    def __init__(self, execution: RunAccess, node: NodeId, attempt: int) -> None:
        self._link = Link(execution, node, attempt)

    def read(self, key: str) -> Versioned:
        """The key's value and version now (``version=0``: never written; the value is
        then the policy's initial one: ``[]``, ``{}``, ``0`` or ``None``).

        The value is a copy: change it and :meth:`write` it back. The version is
        remembered as what this attempt's next write of the key is based on.
        """
        return self._link.on_loop(lambda: self._read(key))

    def get(self, key: str) -> Any:
        """The key's value now (as :meth:`read`, without the version)."""
        return self.read(key).value

    def write(self, key: str, value: Any, *, read: int | None = None) -> Versioned:
        """Write ``value`` to ``key``, based on version ``read`` (default: the version this
        attempt last read of it, 0 if none). Returns the key as it is afterwards.

        Under ``error`` or ``owner_only``, a write the policy refuses raises
        :class:`~counterpoint.BoardConflict` (read again and retry); under
        ``first_wins`` a losing write returns the value that won. Either way the
        conflict is in the log. A key outside the calling agent's capabilities raises
        :class:`~counterpoint.PermissionDenied`.
        """
        refusal = write_refusal(key)  # in the caller's context: the agent it runs under
        data = as_json(value, lambda: f"{self._link.where}: blackboard key {key!r}")
        return self._link.on_loop(lambda: self._write(key, data, read, refusal))

    def update(self, key: str, fn: Callable[[Any], Any]) -> Versioned:
        """Write ``fn(current value)`` to ``key`` in one step no other write comes between
        (so it never meets a newer version). ``fn`` runs on the run's event loop: keep it
        quick and free of I/O."""
        refusal = write_refusal(key)

        def step() -> Versioned:
            current = self._read(key)
            data = as_json(fn(current.value),
                           lambda: f"{self._link.where}: blackboard key {key!r}")
            return self._write(key, data, current.version, refusal)

        return self._link.on_loop(step)

    def history(self, key: str) -> list[Write]:
        """Every write applied to ``key`` so far, oldest first."""
        def get() -> list[Write]:
            entry = self._link.board.entries.get(key)
            return list(entry.history) if entry is not None else []
        return self._link.on_loop(get)

    def conflicts(self) -> list[Conflict]:
        """Every conflict the board has recorded so far, oldest first."""
        return self._link.on_loop(lambda: list(self._link.board.conflicts))

    def snapshot(self) -> dict[str, Versioned]:
        """Every key's value (a copy) and version now."""
        return self._link.on_loop(lambda: {
            k: Versioned(copy_json(e.value), e.version)
            for k, e in self._link.board.entries.items()})

    def queue(self, name: str) -> QueueAccess:
        """The work queue ``name`` (declared in the graph's ``Board``, or with defaults)."""
        if not isinstance(name, str) or not name or "/" in name:
            raise BoardConflict(f"{self._link.where}: queue name {name!r} must be a "
                                "non-empty string without '/'", retryable=False)
        return QueueAccess(self._link, name)

    # ------------------------------------------------------------ on the loop
    def _read(self, key: str) -> Versioned:
        link = self._link
        board = link.board
        entry = board.entries.get(key)
        if entry is None:
            spec = link.spec.key(key)
            current = Versioned(spec.initial() if spec is not None else None, 0)
        else:
            current = Versioned(copy_json(entry.value), entry.version)
        board.reads[link.node, link.attempt, key] = current.version
        return current

    def _write(self, key: str, value: Any, read: int | None,
               refusal: tuple[str, str] | None) -> Versioned:
        link = self._link
        link.check_live()

        def where() -> str:
            return f"{link.where}: blackboard key {key!r}"

        if refusal is not None:
            role, why = refusal
            link.emit(EventKind.PERMISSION_DENIED, {"role": role, "what": "board_write",
                                                    "key": key, "reason": why})
            raise PermissionDenied(f"{where()}: refused: {why}")
        spec = link.spec.key(key)
        if spec is None:
            raise BoardConflict(f"{where()}: the graph's Board declares no such key (and no "
                                f"default); declared: {sorted(link.spec.keys)}", key=key,
                                retryable=False)
        board = link.board
        based = read if read is not None else board.reads.get((link.node, link.attempt, key), 0)
        entry = board.entries.get(key)
        decision = decide(key, spec, entry, value, based, link.node)
        if decision.conflict is not None:
            link.emit(EventKind.BOARD_CONFLICT, decision.conflict)
            if decision.conflict["outcome"] == "overwrote":
                _log.warning("%s (last_wins): %s", where(), decision.conflict["message"])
        if decision.refused:
            assert decision.conflict is not None
            raise BoardConflict(f"{where()} ({spec.name}): {decision.conflict['message']}",
                                key=key, read=based, version=decision.conflict["version"])
        if decision.write is not None:
            link.emit(EventKind.BOARD_WRITE, decision.write)
        entry = board.entries[key]  # a kept conflict has an entry: the first write made it
        board.reads[link.node, link.attempt, key] = entry.version
        return Versioned(copy_json(entry.value), entry.version)
