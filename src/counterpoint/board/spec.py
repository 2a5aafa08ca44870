"""What a run's blackboard holds: its keys, each with a conflict policy, and its queues.

A :class:`Board` is a declaration, given to a graph (``Graph(name, board=Board(...))``).
Nothing here touches a run: :mod:`counterpoint.board.policies` decides what a write does
under a key's policy, :mod:`counterpoint.board.projection` folds the log into the board.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import UserError

PolicyName = Literal["error", "append", "merge", "sum", "first_wins", "last_wins",
                     "owner_only"]
POLICIES: tuple[str, ...] = ("error", "append", "merge", "sum", "first_wins", "last_wins",
                             "owner_only")
REDUCERS = frozenset({"append", "merge", "sum"})
"""Policies under which concurrent writes combine instead of conflicting."""
INITIAL: Mapping[str, Callable[[], Any]] = {"append": list, "merge": dict, "sum": int}
"""The value of a key nobody wrote yet, by policy (``None`` for the others)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Key:
    """One blackboard key and what happens when writes to it meet.

    ``policy``:

    * ``"error"`` (the default): a write must be based on the key's current version
      (the version the writer last read); a stale one raises
      :class:`~counterpoint.BoardConflict` and is not applied;
    * ``"append"`` / ``"merge"`` / ``"sum"``: writes combine (append an item, merge a
      dict's keys, add a number), so none is ever lost; a callable ``(current, value) ->
      new`` is a reducer of your own (the log records its result);
    * ``"first_wins"``: the first write sets the value; later ones are recorded as
      conflicts and leave it;
    * ``"last_wins"``: every write applies; one based on a stale read also logs a warning
      and a conflict event;
    * ``"owner_only"``: only ``owner`` (else the first node that writes it) may write.
    """

    policy: PolicyName | Callable[[Any, Any], Any] = "error"
    owner: str | None = None
    """The node that owns an ``owner_only`` key (default: its first writer)."""
    description: str = ""

    def __post_init__(self) -> None:
        if not callable(self.policy) and self.policy not in POLICIES:
            raise UserError(f"blackboard key policy {self.policy!r} is unknown; use one of "
                            f"{', '.join(POLICIES)} or a reducer function (current, value)")
        if self.owner is not None and self.policy != "owner_only":
            raise UserError(f"a blackboard key with policy {self.policy!r} has owner="
                            f"{self.owner!r}; owners apply to policy='owner_only' only")

    @property
    def name(self) -> str:
        """The policy's name (``reduce`` for a reducer function)."""
        return self.policy if isinstance(self.policy, str) else "reduce"

    def initial(self) -> Any:
        """The key's value before its first write."""
        make = INITIAL.get(self.name)
        return make() if make is not None else None


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkQueue:
    """A blackboard work queue: items put by any node, claimed under a lease by workers.

    ``lease`` is the default lease in seconds (``None``: the claim lasts as long as the
    claiming attempt runs). ``verify(payload, result)`` checks a result before it is
    recorded: return ``False`` or a message to refuse it (the claim stays held).
    """

    lease: float | None = None
    verify: Callable[[Any, Any], bool | str | None] | None = field(default=None, repr=False)
    description: str = ""

    def __post_init__(self) -> None:
        if self.lease is not None and not self.lease > 0:
            raise UserError(f"a work queue's lease must be > 0 seconds, got {self.lease!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class Board:
    """The declaration of a run's blackboard: ``Board(keys={"count": Key(policy="sum")})``.

    A key not in ``keys`` gets ``default`` (optimistic ``error`` policy), or is refused
    when ``default`` is ``None``. ``clock`` gives the time leases are measured in
    (seconds; tests pass a deterministic one).
    """

    keys: Mapping[str, Key] = field(default_factory=dict)
    queues: Mapping[str, WorkQueue] = field(default_factory=dict)
    default: Key | None = field(default_factory=Key)
    """The policy of keys not declared in ``keys``; ``None`` refuses them."""
    clock: Callable[[], float] = field(default=time.time, repr=False)

    def __post_init__(self) -> None:
        for name in (*self.keys, *self.queues):
            if not isinstance(name, str) or not name or "/" in name:
                raise UserError(f"blackboard name {name!r} must be a non-empty string "
                                "without '/'")
        for name, key in self.keys.items():
            if not isinstance(key, Key):
                raise UserError(f"blackboard key {name!r}: expected counterpoint.Key(...), "
                                f"got {key!r}")
        for name, queue in self.queues.items():
            if not isinstance(queue, WorkQueue):
                raise UserError(f"blackboard queue {name!r}: expected "
                                f"counterpoint.WorkQueue(...), got {queue!r}")

    def key(self, name: str) -> Key | None:
        """The declaration of key ``name`` (``None``: refused)."""
        return self.keys.get(name, self.default)

    def queue(self, name: str) -> WorkQueue:
        """The declaration of queue ``name`` (undeclared queues get the defaults)."""
        return self.queues.get(name) or _DEFAULT_QUEUE


_DEFAULT_QUEUE = WorkQueue()
NO_BOARD = Board()
"""The board of a graph that declares none: every key under the ``error`` policy."""
