"""Where a step failed (counterpoint.failures): the innermost frame of the user's code is
recorded in the node_failed event, not counterpoint's, the standard library's or an
installed library's."""

from __future__ import annotations

import inspect
import json

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.failures import failure_location


def _parse(text: str) -> object:
    return json.loads(text)  # raises inside the standard library's json


def bad_json(text: str) -> object:
    return _parse(text)


def _line_of(fn: object, needle: str) -> int:
    lines, first = inspect.getsourcelines(fn)  # type: ignore[arg-type]
    return first + next(i for i, line in enumerate(lines) if needle in line)


def test_the_innermost_user_frame_is_chosen_over_the_standard_librarys() -> None:
    try:
        bad_json("{not json")
    except ValueError as exc:
        where = failure_location(exc)
    assert where == {"file": __file__, "line": _line_of(_parse, "json.loads"),
                     "function": "_parse"}


def test_an_error_raised_from_the_users_error_points_at_the_users_code() -> None:
    try:
        try:
            bad_json("[")
        except ValueError as inner:
            raise cp.errors.NodeFailed("could not read it") from inner
    except cp.errors.NodeFailed as exc:
        where = failure_location(exc)
    assert where is not None
    # the raise above is user code too, and the innermost frame of the outer error
    assert where["function"] == "test_an_error_raised_from_the_users_error_points_at_the_" \
        "users_code"


def test_no_user_frame_means_no_location() -> None:
    try:
        json.loads("{")
    except ValueError as exc:
        assert exc.__traceback__ is not None
        tb = exc.__traceback__.tb_next  # drop this test's own frame: only json's remain
        assert failure_location(exc.with_traceback(tb)) is None


def test_the_node_failed_event_records_the_location_of_every_attempt() -> None:
    g = cp.Graph("fails")
    g.add("read", bad_json, text="{", retries=1)
    store = cp.MemoryStore()
    result = cp.run_sync(g, store=store)
    assert result.status.value == "failed"
    failed = [e for e in store.events(result.run_id) if e.kind is EventKind.NODE_FAILED]
    assert len(failed) == 2
    for event in failed:
        assert event.data is not None
        assert event.data["location"] == {"file": __file__, "line": _line_of(_parse, "json."),
                                          "function": "_parse"}
        assert "in _parse" in event.data["traceback"] and len(event.data["traceback"]) <= 4000
