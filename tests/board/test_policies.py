"""The pure parts: what a write does under each policy (``decide``), and the projection
that folds board events into a board (``apply``/``fold``), without a run."""

from __future__ import annotations

import pytest

import counterpoint as cp
from counterpoint.board import fold
from counterpoint.board.policies import decide
from counterpoint.board.projection import BoardState, Entry, apply
from counterpoint.events import Event, EventKind
from counterpoint.ids import NodeId

A, B = NodeId("a"), NodeId("b")


def _entry(value: object, version: int, owner: NodeId | None = None) -> Entry:
    return Entry(value, version, owner)


@pytest.mark.parametrize(("policy", "read", "write", "conflict", "refused"), [
    ("error", 2, True, None, False),
    ("error", 1, False, "raised", True),
    ("first_wins", 2, False, "kept", False),
    ("last_wins", 2, True, None, False),
    ("last_wins", 0, True, "overwrote", False),
    ("sum", 0, True, None, False),
    ("append", 1, True, None, False),
])
def test_a_write_to_a_key_at_version_2(policy: str, read: int, write: bool,
                                       conflict: str | None, refused: bool) -> None:
    value: object = 5 if policy == "sum" else "x"
    current = _entry(7 if policy == "sum" else ["p"] if policy == "append" else "old", 2)
    decision = decide("k", cp.Key(policy=policy), current, value,  # type: ignore[arg-type]
                      read, A)
    assert (decision.write is not None, decision.refused) == (write, refused)
    assert (decision.conflict or {}).get("outcome") == conflict
    if decision.write is not None:
        assert decision.write["version"] == 3 and decision.write["read"] == read
        assert decision.write.get("stale", False) == (read != 2)


def test_owner_only_records_the_first_writer_and_refuses_the_others() -> None:
    key = cp.Key(policy="owner_only")
    first = decide("k", key, None, 1, 0, A)
    assert first.write is not None and first.write["owner"] == "a"
    assert decide("k", key, _entry(1, 1, A), 2, 1, A).write is not None
    other = decide("k", key, _entry(1, 1, A), 2, 1, B)
    assert other.refused and other.write is None and other.conflict is not None
    assert other.conflict["outcome"] == "refused"


def test_a_reducer_function_logs_its_result_so_the_log_alone_replays_it() -> None:
    key = cp.Key(policy=lambda current, value: max(current or 0, value))
    decision = decide("best", key, _entry(4, 1), 9, 0, A)
    assert decision.write is not None and decision.write["result"] == 9
    board = BoardState()
    for seq, value in enumerate((3, 9), start=1):
        apply(board, Event(EventKind.BOARD_WRITE, 0.0, A, 1, seq=seq, data={
            "key": "best", "op": "reduce", "value": value, "result": value,
            "version": seq, "read": seq - 1}))
    assert board.get("best") == cp.Versioned(9, 2)


def test_folding_stops_at_the_asked_event_and_never_changes_the_logged_data() -> None:
    events = [Event(EventKind.BOARD_WRITE, 0.0, A, 1, seq=1, data={
                  "key": "cfg", "op": "set", "value": {"x": 1}, "version": 1, "read": 0}),
              Event(EventKind.BOARD_WRITE, 0.0, A, 1, seq=2, data={
                  "key": "cfg", "op": "merge", "value": {"y": 2}, "version": 2, "read": 1})]
    assert fold(events, until=1).values() == {"cfg": {"x": 1}}
    assert fold(events).values() == {"cfg": {"x": 1, "y": 2}}
    assert events[0].data is not None and events[0].data["value"] == {"x": 1}
