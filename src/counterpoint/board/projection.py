"""The blackboard as the projection of a run's board events: keys, histories, queues.

:func:`apply` is the only way a :class:`BoardState` changes, and it is pure: folding a
run's log through it (:func:`fold`) rebuilds the board exactly as it stood, at the end
or at any event (:func:`board_at`). The scheduler calls it from
:func:`~counterpoint.transitions.evolve`, so the live board and a resumed run's board
are the same fold of the same log.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..events import (
    BOARD_EVENTS,
    Event,
    EventKind,
)
from ..ids import NodeId

if TYPE_CHECKING:
    from ..state import RunState

ItemStatus = Literal["open", "claimed", "done"]


@dataclass(frozen=True, slots=True)
class Versioned:
    """A key's value and the version it has (0: never written)."""

    value: Any
    version: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Write:
    """One write applied to a key, as the log recorded it."""

    seq: int
    version: int
    """The key's version after this write."""
    node: NodeId | None
    attempt: int
    op: str
    """``set``, ``append``, ``merge``, ``sum`` or ``reduce``."""
    value: Any
    """What was written (for a reducer policy: the item, delta or dict merged in)."""
    read: int | None
    """The version the write was based on."""
    stale: bool = False
    """Whether the key had moved on since that read (``last_wins``, reducers)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Conflict:
    """A write that met a newer version, or that a policy refused."""

    seq: int
    key: str
    """The key, or ``queue/item`` for a refused work-queue result."""
    node: NodeId | None
    attempt: int
    policy: str
    outcome: str
    """``raised`` (error), ``kept`` (first_wins), ``overwrote`` (last_wins), ``refused``
    (owner_only) or ``rejected`` (a work-queue result that failed its check)."""
    read: int | None
    version: int
    message: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Denial:
    """A call outside an agent's capabilities, refused before it ran."""

    seq: int
    node: NodeId | None
    attempt: int
    role: str
    what: str
    """``tool``, ``args``, ``side_effects`` or ``board_write``."""
    reason: str


@dataclass(slots=True)
class Entry:
    """One key of the board."""

    value: Any
    version: int = 0
    owner: NodeId | None = None
    history: list[Write] = field(default_factory=list)
    conflicts: int = 0


@dataclass(slots=True)
class Item:
    """One work-queue item and who holds it."""

    id: str
    payload: Any
    status: ItemStatus = "open"
    holder: tuple[NodeId, int] | None = None
    """The (node, attempt) holding the claim, while claimed (or that completed it)."""
    claim: int = 0
    """Claims taken on the item so far: the current claim's number."""
    lease_until: float | None = None
    result: Any = None
    expired: int = 0
    """Claims on the item that expired (their holder ended, or their lease ran out)."""


@dataclass(slots=True)
class QueueState:
    """One work queue: its items in the order they were put, and the open ones."""

    items: dict[str, Item] = field(default_factory=dict)
    open: dict[str, None] = field(default_factory=dict)
    """Open items, oldest first (an ordered set: claims take the first)."""
    claimed: dict[str, None] = field(default_factory=dict)
    """Items claimed now (what an expiry sweep looks at)."""

    def counts(self) -> dict[str, int]:
        """How many items are open, claimed and done."""
        out = {"open": 0, "claimed": 0, "done": 0}
        for item in self.items.values():
            out[item.status] += 1
        return out


@dataclass(slots=True)
class BoardState:
    """A run's blackboard: the projection of its board events."""

    entries: dict[str, Entry] = field(default_factory=dict)
    queues: dict[str, QueueState] = field(default_factory=dict)
    conflicts: list[Conflict] = field(default_factory=list)
    denied: list[Denial] = field(default_factory=list)
    """Calls refused by agents' capabilities (``permission_denied`` events)."""
    reads: dict[tuple[NodeId, int, str], int] = field(default_factory=dict)
    """(node, attempt, key) -> the version that attempt last read (not from the log: a
    write defaults to being based on it)."""
    puts: dict[tuple[NodeId, int, str], int] = field(default_factory=dict)
    """(node, attempt, queue) -> items that attempt put (names the next one; not from the
    log, so a re-run attempt names its items as the first one did)."""

    def get(self, key: str) -> Versioned | None:
        entry = self.entries.get(key)
        return None if entry is None else Versioned(entry.value, entry.version)

    def queue(self, name: str) -> QueueState:
        queue = self.queues.get(name)
        if queue is None:
            queue = self.queues[name] = QueueState()
        return queue

    def values(self) -> dict[str, Any]:
        """Every key's current value."""
        return {k: e.value for k, e in self.entries.items()}


def apply_to(state: RunState, event: Event) -> None:
    """Apply a board event to ``state``'s board (created by the first)."""
    board = state.board
    if board is None:
        board = state.board = BoardState()
    apply(board, event)


def apply(board: BoardState, event: Event) -> None:
    """Apply one board event. Pure and deterministic: the only way a board changes."""
    data = event.data or {}
    kind = event.kind
    if kind is EventKind.BOARD_WRITE:
        _write(board, event, data)
    elif kind is EventKind.BOARD_CONFLICT:
        key = str(data["key"])
        board.conflicts.append(Conflict(
            seq=event.seq, key=key, node=event.node, attempt=event.attempt,
            policy=str(data.get("policy", "")), outcome=str(data.get("outcome", "")),
            read=data.get("read"), version=int(data.get("version", 0)),
            message=str(data.get("message", ""))))
        entry = board.entries.get(key)
        if entry is not None:
            entry.conflicts += 1
    elif kind is EventKind.PERMISSION_DENIED:
        board.denied.append(Denial(seq=event.seq, node=event.node, attempt=event.attempt,
                                   role=str(data.get("role", "")),
                                   what=str(data.get("what", "")),
                                   reason=str(data.get("reason", ""))))
    else:
        _queue_event(board, event, data)


def _write(board: BoardState, event: Event, data: dict[str, Any]) -> None:
    key = str(data["key"])
    op = str(data["op"])
    value = data.get("value")
    entry = board.entries.get(key)
    if entry is None:
        initial: Any = [] if op == "append" else {} if op == "merge" else \
            0 if op == "sum" else None
        entry = board.entries[key] = Entry(initial)
    if op == "append":
        entry.value.append(value)
    elif op == "merge":
        entry.value.update(value)
    elif op == "sum":
        entry.value = entry.value + value
    elif op == "reduce":  # a copy: appends and merges change the value in place, and the
        entry.value = copy.deepcopy(data.get("result"))  # event's data must stay as logged
    else:
        entry.value = copy.deepcopy(value)
    entry.version = int(data["version"])
    if "owner" in data:
        entry.owner = NodeId(str(data["owner"]))
    entry.history.append(Write(seq=event.seq, version=entry.version, node=event.node,
                               attempt=event.attempt, op=op, value=value,
                               read=data.get("read"), stale=bool(data.get("stale"))))


def _queue_event(board: BoardState, event: Event, data: dict[str, Any]) -> None:
    queue = board.queue(str(data["queue"]))
    item_id = str(data["item"])
    kind = event.kind
    if kind is EventKind.QUEUE_PUT:
        if item_id not in queue.items:
            queue.items[item_id] = Item(item_id, data.get("payload"))
            queue.open[item_id] = None
        return
    item = queue.items[item_id]
    if kind is EventKind.CLAIM_TAKEN:
        assert event.node is not None
        item.status = "claimed"
        item.holder = (event.node, event.attempt)
        item.claim = int(data["claim"])
        item.lease_until = data.get("lease_until")
        queue.open.pop(item_id, None)
        queue.claimed[item_id] = None
    elif kind is EventKind.CLAIM_DONE:
        item.status = "done"
        item.result = data.get("result")
        item.lease_until = None
        queue.claimed.pop(item_id, None)
    elif kind in (EventKind.CLAIM_RELEASED, EventKind.CLAIM_EXPIRED):
        item.status = "open"
        item.holder = None
        item.lease_until = None
        if kind is EventKind.CLAIM_EXPIRED:
            item.expired += 1
        queue.claimed.pop(item_id, None)
        queue.open[item_id] = None


def fold(events: Iterable[Event], *, until: int | None = None) -> BoardState:
    """The board after ``events`` (a run's log), up to and including event ``until``."""
    board = BoardState()
    for ev in events:
        if until is not None and ev.seq > until:
            break
        if ev.kind in BOARD_EVENTS:
            apply(board, ev)
    return board
