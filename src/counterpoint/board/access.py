"""``ctx.board``: how a running step reads and writes its run's blackboard.

Reads return a :class:`~counterpoint.board.projection.Versioned` and remember the
version read; a write is based on the version its attempt last read of that key (or on
``read=``), and its key's policy decides what happens when the key has moved on since
(:mod:`counterpoint.board.policies`). Every write and every conflict is an event of the
node's attempt; the board is the projection of those events. Safe to call from async
steps and from sync steps' threads alike (:mod:`counterpoint.board.link`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import BoardConflict, PermissionDenied
from ..events import EventKind
from ..ids import NodeId
from ..permissions import write_refusal
from .link import Link, as_json, copy_json
from .policies import Decision, decide
from .projection import Conflict, Versioned, Write
from .queue import QueueAccess

if TYPE_CHECKING:
    from types import TracebackType

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
        data = as_json(value, functools.partial(self._where, key))
        return self._link.on_loop(lambda: self._write(key, data, read, refusal))

    def update(self, key: str, fn: Callable[[Any], Any]) -> Versioned:
        """Write ``fn(current value)`` to ``key`` in one step no other write comes between
        (so it never meets a newer version). ``fn`` runs on the run's event loop: keep it
        quick and free of I/O."""
        refusal = write_refusal(key)

        def step() -> Versioned:
            current = self._read(key)
            data = as_json(fn(current.value), functools.partial(self._where, key))
            return self._write(key, data, current.version, refusal)

        return self._link.on_loop(step)

    def commit(self, writes: Mapping[str, Any], *,
               read: Mapping[str, int] | None = None) -> dict[str, Versioned]:
        """Write several keys at once, only if no key the writes are based on has changed.

        ``read`` is the read set, key -> version (default: each written key at the
        version this attempt last read of it; :meth:`transaction` gathers it as you
        read). If any of them has moved on, nothing is written: one ``read_set``
        conflict naming the stale keys is logged and :class:`~counterpoint.BoardConflict`
        is raised
        (read again and retry). Otherwise each key's policy decides its write as in
        :meth:`write`, all or nothing: a write its policy refuses refuses the whole
        commit. Returns the written keys as they are after.
        """
        refusals = {key: write_refusal(key) for key in writes}
        data = {key: as_json(value, functools.partial(self._where, key))
                for key, value in writes.items()}
        basis = None if read is None else dict(read)
        return self._link.on_loop(lambda: self._commit(data, basis, refusals))

    def transaction(self) -> Transaction:
        """A read-set transaction: ``with ctx.board.transaction() as tx:`` read with
        ``tx.read``, stage writes with ``tx.write``; leaving the block commits them
        (:meth:`commit`) based on exactly what ``tx`` read."""
        return Transaction(self)

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

    def _where(self, key: str) -> str:
        return f"{self._link.where}: blackboard key {key!r}"

    def _decide(self, key: str, value: Any, read: int | None,
                refusal: tuple[str, str] | None) -> tuple[Decision, str]:
        """The decision on one write (and the key's policy), refusals logged and raised."""
        link = self._link
        if refusal is not None:
            role, why = refusal
            link.emit(EventKind.PERMISSION_DENIED, {"role": role, "what": "board_write",
                                                    "key": key, "reason": why})
            raise PermissionDenied(f"{self._where(key)}: refused: {why}")
        spec = link.spec.key(key)
        if spec is None:
            raise BoardConflict(f"{self._where(key)}: the graph's Board declares no such key "
                                f"(and no default); declared: {sorted(link.spec.keys)}",
                                key=key, retryable=False)
        board = link.board
        based = read if read is not None else board.reads.get((link.node, link.attempt, key), 0)
        try:
            decision = decide(key, spec, board.entries.get(key), value, based, link.node)
        except BoardConflict as exc:  # a value the policy cannot combine: say where
            raise BoardConflict(f"{link.where}: {exc}", key=key, retryable=False) from None
        if decision.refused:
            assert decision.conflict is not None
            link.emit(EventKind.BOARD_CONFLICT, decision.conflict)
            raise BoardConflict(f"{self._where(key)} ({spec.name}): "
                                f"{decision.conflict['message']}", key=key, read=based,
                                version=decision.conflict["version"])
        return decision, spec.name

    def _apply(self, key: str, decision: Decision, reads: dict[str, int] | None) -> Versioned:
        """Log what ``decision`` says; returns the key as it is after."""
        link = self._link
        if decision.conflict is not None:
            link.emit(EventKind.BOARD_CONFLICT, decision.conflict)
            if decision.conflict["outcome"] == "overwrote":
                _log.warning("%s (last_wins): %s", self._where(key),
                             decision.conflict["message"])
        if decision.write is not None:
            link.emit(EventKind.BOARD_WRITE, decision.write if reads is None
                      else {**decision.write, "reads": reads})
        entry = link.board.entries[key]  # a kept conflict has an entry: the first write's
        link.board.reads[link.node, link.attempt, key] = entry.version
        return Versioned(copy_json(entry.value), entry.version)

    def _write(self, key: str, value: Any, read: int | None,
               refusal: tuple[str, str] | None) -> Versioned:
        self._link.check_live()
        decision, _ = self._decide(key, value, read, refusal)
        return self._apply(key, decision, None)

    def _commit(self, writes: dict[str, Any], read: dict[str, int] | None,
                refusals: dict[str, tuple[str, str] | None]) -> dict[str, Versioned]:
        link = self._link
        link.check_live()
        board = link.board
        if read is None:  # each written key, at the version this attempt last read
            read = {k: board.reads.get((link.node, link.attempt, k), 0) for k in writes}
        stale = {}
        for key, version in read.items():
            entry = board.entries.get(key)
            current = entry.version if entry is not None else 0
            if current != version:
                stale[key] = (version, current)
        if stale:  # one conflict for the commit, on its first stale key, naming them all
            first, (version, current) = next(iter(stale.items()))
            message = (f"the commit of {sorted(writes)} was based on version {version}, but "
                       f"the key is at version {current} (stale: {sorted(stale)}); nothing "
                       "was written; read again and commit anew")
            link.emit(EventKind.BOARD_CONFLICT, {
                "key": first, "policy": "read_set", "outcome": "raised", "read": version,
                "version": current, "message": message,
                "stale": {k: list(v) for k, v in stale.items()}})
            raise BoardConflict(f"{self._where(first)}: {message}", key=first, read=version,
                                version=current)
        decisions = [(key, self._decide(key, value, read.get(key), refusals[key])[0])
                     for key, value in writes.items()]  # all decided before any is logged
        return {key: self._apply(key, decision, read) for key, decision in decisions}


class Transaction:
    """Reads and staged writes committed together, based on what was read (see
    :meth:`BoardAccess.transaction`). Not for use from two threads at once."""

    __slots__ = ("_access", "reads", "writes")

    def __init__(self, access: BoardAccess) -> None:
        self._access = access
        self.reads: dict[str, int] = {}
        """Key -> the version this transaction read: its read set."""
        self.writes: dict[str, Any] = {}
        """Key -> the value staged for it."""

    def read(self, key: str) -> Versioned:
        """The key now (a staged write is not visible here); joins the read set."""
        current = self._access.read(key)
        self.reads.setdefault(key, current.version)
        return current

    def write(self, key: str, value: Any) -> None:
        """Stage ``value`` for ``key``; nothing is written before :meth:`commit`."""
        self.writes[key] = value

    def commit(self) -> dict[str, Versioned]:
        """Write the staged values if nothing read has changed since (else
        :class:`~counterpoint.BoardConflict`, and nothing is written)."""
        writes, self.writes = self.writes, {}
        return self._access.commit(writes, read=self.reads) if writes else {}

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            self.commit()
