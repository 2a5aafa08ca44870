"""The deletion role, on every store (:mod:`counterpoint.store.deletion`), and pruning."""

from __future__ import annotations

import hashlib
import os
import signal
import time
from pathlib import Path

import pytest

from counterpoint.errors import RunClaimed, RunNotFound, UserError
from counterpoint.events import Event, EventKind
from counterpoint.ids import NodeId, RunId
from counterpoint.store import MemoryStore, RunStore, SQLiteStore, prune
from counterpoint.store.deletion import digests

from .helpers import created, finished, owned_by_a_process

BIG = "x" * 5000
"""A value large enough to be stored as a blob (over BLOB_THRESHOLD)."""


def _success(seq: int, value: str, node: str = "n") -> Event:
    return Event(EventKind.NODE_SUCCEEDED, float(seq), NodeId(node), 1, None, value, seq=seq)


def _model_call(seq: int, request: str, response: str) -> Event:
    return Event(EventKind.MODEL_CALL, float(seq), NodeId("n"), 1,
                 {"model": "m", "request": request, "response": response}, seq=seq)


def _finished_run(store: RunStore, run_id: str, *extra: Event, parent: str | None = None,
                  at: float = 1.0) -> RunId:
    rid = RunId(run_id)
    first = created(at=at)
    if parent is not None:
        first = Event(EventKind.RUN_CREATED, at, data={**(first.data or {}), "parent": parent},
                      seq=1)
    store.append_many(rid, [first, *extra, finished(len(extra) + 2, at=at + 1)])
    store.flush_sync()
    return rid


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class TestRunDeletion:
    def test_a_run_goes_with_its_sub_runs_and_leaves_the_others(self, store: RunStore) -> None:
        gone = _finished_run(store, "r-gone", _success(2, '"a"'))
        _finished_run(store, "r-gone/sub", _success(2, '"b"'), parent="r-gone")
        kept = _finished_run(store, "r-kept", _success(2, '"c"'))
        done = store.delete_runs([gone])
        assert done.runs == ("r-gone", "r-gone/sub")
        assert done.events == 6
        for rid in done.runs:
            with pytest.raises(RunNotFound):
                store.run(rid)
            with pytest.raises(RunNotFound):
                store.events(rid)
        assert [r.run_id for r in store.runs()] == [kept]
        assert [e.value for e in store.events(kept)][1] == '"c"'

    def test_an_unknown_run_deletes_nothing(self, store: RunStore) -> None:
        kept = _finished_run(store, "r-kept")
        with pytest.raises(RunNotFound, match="r-nope"):
            store.delete_runs([kept, RunId("r-nope")])
        assert store.run(kept).run_id == kept  # all or nothing

    def test_a_live_run_is_refused_and_nothing_is_deleted(self, store: RunStore) -> None:
        done = _finished_run(store, "r-done")
        live = RunId("r-live")
        store.append(live, created())  # this process owns it, and it has not finished
        store.flush_sync()
        with pytest.raises(RunClaimed, match=r"r-live is still running in process \d+.*"
                                             r"counterpoint cancel r-live"):
            store.delete_runs([done, live])
        assert store.run(done).status == "succeeded"
        assert store.run(live).status == "running"

    def test_a_sub_run_alone_is_refused(self, store: RunStore) -> None:
        _finished_run(store, "r-root")
        sub = _finished_run(store, "r-root/sub", parent="r-root")
        with pytest.raises(UserError, match=r"sub-run of r-root.*delete the root run r-root"):
            store.delete_runs([sub])
        assert store.run(sub).run_id == sub

    def test_nothing_named_deletes_nothing(self, store: RunStore) -> None:
        kept = _finished_run(store, "r-kept")
        assert store.delete_runs([]).runs == ()
        assert store.run(kept).run_id == kept


class TestBlobsOfDeletedRuns:
    def test_a_blob_only_deleted_runs_used_goes(self, store: RunStore) -> None:
        gone = _finished_run(store, "r-gone", _success(2, f'"{BIG}1"'),
                             _model_call(3, store.put_blob("request 1"),
                                         store.put_blob("response 1")))
        in_values = 0 if isinstance(store, MemoryStore) else 1  # it keeps values in the events
        assert store.delete_runs([gone], blob_grace=0).blobs == 2 + in_values
        for text in (f'"{BIG}1"', "request 1", "response 1"):
            assert store.blob(_digest(text)) is None

    def test_a_blob_another_run_refers_to_stays(self, store: RunStore) -> None:
        shared, prompt = f'"{BIG}2"', store.put_blob("a prompt both runs sent")
        gone = _finished_run(store, "r-gone", _success(2, shared),
                             _model_call(3, prompt, store.put_blob("answer")))
        kept = _finished_run(store, "r-kept", _success(2, shared),
                             _model_call(3, prompt, store.put_blob("answer 2")))
        assert store.delete_runs([gone], blob_grace=0).blobs == 1  # "answer" only
        assert store.blob(prompt) == "a prompt both runs sent"
        assert store.events(kept)[1].value == shared
        assert store.blob(_digest("answer")) is None

    def test_a_blob_stored_lately_stays_though_nothing_refers_to_it_yet(
            self, store: RunStore) -> None:
        gone = _finished_run(store, "r-gone", _success(2, f'"{BIG}3"'))
        pending = store.put_blob("for an event not written yet")
        store.flush_sync()
        assert store.delete_runs([gone]).blobs == 0  # the default grace: an hour
        assert store.blob(pending) == "for an event not written yet"
        assert store.events  # the store still works
        assert store.delete_runs([], blob_grace=0).blobs == 0  # nothing named: no sweep

    def test_a_later_run_stores_again_a_blob_deleted_with_an_earlier_one(
            self, store: RunStore) -> None:
        """The same store object that sent a blob for a deleted run sends it again for
        the next run that needs it: its events never refer to a blob that is gone."""
        value = f'"{BIG}4"'
        gone = _finished_run(store, "r-gone", _success(2, value))
        assert store.delete_runs([gone], blob_grace=0).blobs == (
            0 if isinstance(store, MemoryStore) else 1)
        again = _finished_run(store, "r-again", _success(2, value))
        assert store.events(again)[1].value == value
        reopened = _reopened(store)
        if reopened is not None:  # from the file, not this store's memory
            assert reopened.events(again)[1].value == value
            reopened.close()


class TestPrune:
    def test_by_age_keep_and_status(self, store: RunStore) -> None:
        old_ok = _finished_run(store, "r-1", at=100.0)
        old_failed = RunId("r-2")
        store.append_many(old_failed, [created(at=200.0), finished(2, "failed", at=201.0)])
        _finished_run(store, "r-3", at=300.0)
        store.flush_sync()
        now = 1000.0
        assert prune(store, older_than=750.0, now=now, dry_run=True).runs == ("r-2", "r-1")
        assert prune(store, older_than=750.0, statuses=["failed"], now=now,
                     dry_run=True).runs == ("r-2",)
        assert prune(store, keep=2, dry_run=True).runs == ("r-1",)
        assert [r.run_id for r in store.runs()] == ["r-3", "r-2", "r-1"]  # dry runs
        assert prune(store, older_than=750.0, keep=2, now=now).runs == (old_ok,)
        assert [r.run_id for r in store.runs()] == ["r-3", "r-2"]
        assert prune(store, older_than=750.0, keep=1, now=now).runs == (old_failed,)

    def test_a_running_run_is_never_pruned(self, store: RunStore) -> None:
        store.append(RunId("r-live"), created(at=1.0))
        store.flush_sync()
        assert prune(store, older_than=0, statuses=["running"]).runs == ()
        assert store.run(RunId("r-live")).status == "running"

    @pytest.mark.parametrize(("kwargs", "message"), [
        ({"keep": -1}, "keep must be 0 or more"),
        ({"older_than": -5.0}, "older_than must be 0 seconds or more"),
        ({"statuses": ["done"]}, "unknown run status done"),
    ])
    def test_bad_arguments_are_clear_errors(self, store: RunStore, kwargs: dict[str, object],
                                            message: str) -> None:
        with pytest.raises(UserError, match=message):
            prune(store, **kwargs)  # type: ignore[arg-type]


def test_an_interrupted_run_can_be_deleted(tmp_path: Path) -> None:
    """A run whose process died will not finish: it may be deleted (and pruned as
    ``running`` when asked for)."""
    path = tmp_path / "runs.db"
    owner = owned_by_a_process(path, RunId("r-orphan"))
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait(timeout=60)
    store = SQLiteStore(path)
    try:
        assert store.run(RunId("r-orphan")).status == "running"
        assert prune(store, older_than=0, statuses=["running"], now=time.time() + 1).runs == (
            "r-orphan",)
        assert store.runs() == []
    finally:
        store.close()


def test_a_live_run_of_another_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    owner = owned_by_a_process(path, RunId("r-theirs"))
    store = SQLiteStore(path)
    try:
        with pytest.raises(RunClaimed, match=f"still running in process {owner.pid}"):
            store.delete_runs([RunId("r-theirs")])
    finally:
        store.close()
        owner.communicate(timeout=60)
    assert SQLiteStore(path).run(RunId("r-theirs")).status == "running"


def test_digests_find_blob_names_wherever_they_are() -> None:
    name = _digest("t")
    assert digests([f'[[2,"model_call",null,1,1.0,{{"request":"{name}"}},null,null]]',
                    None, ""]) == {name}
    assert digests(["no digest here", "abc" * 30, "abc" * 21]) == set()  # 90, 63 hex digits


def _reopened(store: RunStore) -> SQLiteStore | None:
    from .helpers import sqlite_of
    sqlite = sqlite_of(store)
    return None if sqlite is None else SQLiteStore(sqlite.path)
