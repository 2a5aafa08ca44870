"""What one blackboard write does under its key's policy: pure conflict resolution.

:func:`decide` looks at the key's declaration, its current entry, the value written and
the version the writer based it on, and returns the events to log (a write, a conflict,
or both) and whether the writer is told with :class:`~counterpoint.BoardConflict`. It
reads no clock and changes nothing: the board changes only when those events are applied
(:mod:`counterpoint.board.projection`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import BoardConflict
from ..ids import NodeId
from .projection import Entry
from .spec import Key


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of a write: what to log, and whether the writer gets an error."""

    write: dict[str, Any] | None
    """``board_write`` data, if the write applies."""
    conflict: dict[str, Any] | None
    """``board_conflict`` data, if the write met a newer version or was refused."""
    refused: bool = False
    """Whether the writer is told with a :class:`~counterpoint.BoardConflict`."""


def decide(name: str, key: Key, entry: Entry | None, value: Any, read: int,
           writer: NodeId) -> Decision:
    """What writing ``value`` to key ``name``, based on version ``read``, does.

    Raises :class:`~counterpoint.BoardConflict` for a value the policy cannot combine
    (a ``sum`` of a non-number, a ``merge`` of a non-dict): a mistake of the step's.
    """
    version = entry.version if entry is not None else 0
    policy = key.name
    stale = read != version
    new = version + 1

    def conflict(outcome: str, message: str) -> dict[str, Any]:
        return {"key": name, "policy": policy, "outcome": outcome, "read": read,
                "version": version, "message": message}

    if policy in ("append", "merge", "sum", "reduce"):
        _check_combinable(name, policy, value)
        write: dict[str, Any] = {"key": name, "op": policy, "value": value,
                                 "version": new, "read": read}
        if policy == "reduce":
            assert callable(key.policy)
            current = entry.value if entry is not None else None
            write["result"] = key.policy(current, value)
        if stale:
            write["stale"] = True  # combined, so nothing was lost: no conflict to report
        return Decision(write, None)
    if policy == "error":
        if stale:
            return Decision(None, conflict(
                "raised", f"based on version {read}, but the key is at version {version}; "
                "read it again and write anew"), refused=True)
        return Decision({"key": name, "op": "set", "value": value, "version": new,
                         "read": read}, None)
    if policy == "first_wins":
        if version > 0:
            return Decision(None, conflict(
                "kept", f"already set at version {version}; the first write wins"))
        return Decision({"key": name, "op": "set", "value": value, "version": new,
                         "read": read}, None)
    if policy == "last_wins":
        write = {"key": name, "op": "set", "value": value, "version": new, "read": read}
        if not stale:
            return Decision(write, None)
        write["stale"] = True
        return Decision(write, conflict(
            "overwrote", f"overwrote version {version} while based on version {read}"))
    # owner_only
    owner = (entry.owner if entry is not None else None) or key.owner
    if owner is not None and owner != writer:
        return Decision(None, conflict(
            "refused", f"owned by node {owner!r}; node {writer!r} may not write it"),
            refused=True)
    write = {"key": name, "op": "set", "value": value, "version": new, "read": read}
    if entry is None or entry.owner is None:
        write["owner"] = owner or writer
    return Decision(write, None)


def _check_combinable(name: str, policy: str, value: Any) -> None:
    if policy == "sum" and (isinstance(value, bool) or not isinstance(value, int | float)
                            or (isinstance(value, float) and not math.isfinite(value))):
        raise BoardConflict(f"blackboard key {name!r} (policy sum) takes a finite number, "
                            f"got {value!r}; write a number, which is added to the key",
                            key=name, retryable=False)
    if policy == "merge" and not isinstance(value, dict):
        raise BoardConflict(f"blackboard key {name!r} (policy merge) takes a dict, got "
                            f"{type(value).__name__}; write a dict of the entries to merge "
                            "into the key", key=name, retryable=False)
