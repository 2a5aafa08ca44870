"""The run-index role, on every store, and claims made by real processes at once
(:mod:`counterpoint.store.index`)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.errors import RunClaimed
from counterpoint.events import Event, EventKind
from counterpoint.ids import RunId
from counterpoint.store import RunStore, SQLiteStore
from counterpoint.store.owners import process_token

from .helpers import (
    HOST,
    RUN,
    created,
    ended,
    finished,
    node_event,
    owned_by_a_process,
    python,
    write_lock_held,
)


def _sleeper() -> subprocess.Popen[bytes]:
    """A live process to claim runs for (it reads until its input closes)."""
    return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)


def _kill(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)


class TestRunIndex:
    def test_run_index_follows_the_log(self, store: RunStore) -> None:
        store.append(RUN, created(at=1.0))
        other = RunId("r-other")
        store.append(other, created(at=2.0, graph="h"))
        store.append(RUN, finished(2))
        store.flush_sync()
        assert [r.run_id for r in store.runs()] == [other, RUN]
        assert [r.run_id for r in store.runs(limit=1)] == [other]
        record = store.run(RUN)
        assert record.status == "succeeded" and record.graph == "g"
        assert record.source == {"file": "x.py"}
        assert record.owner_pid == os.getpid() and record.owner_host == HOST
        assert record.claimed_at is None
        assert store.run(other).status == "running"

    def test_unknown_run_is_a_clear_error(self, store: RunStore) -> None:
        with pytest.raises(cp.RunNotFound, match="run r-missing not found"):
            store.run(RunId("r-missing"))
        with pytest.raises(cp.RunNotFound, match="run r-missing not found"):
            store.claim(RunId("r-missing"), pid=os.getpid(), host=HOST)

    def test_a_process_claims_a_run_it_owns(self, store: RunStore) -> None:
        store.append(RUN, created())
        store.flush_sync()
        store.claim(RUN, pid=os.getpid(), host=HOST)
        store.claim(RUN, pid=os.getpid(), host=HOST)  # again: still its own
        record = store.run(RUN)
        assert (record.owner_pid, record.owner_host) == (os.getpid(), HOST)
        assert record.claimed_at is not None

    def test_a_run_is_refused_to_another_process_while_its_owner_lives(
            self, store: RunStore) -> None:
        store.append(RUN, created())
        store.flush_sync()
        other = _sleeper()
        try:
            with pytest.raises(RunClaimed,
                               match=rf"run {RUN} is still running in process {os.getpid()} "
                                     rf"on {HOST}; wait .* `counterpoint cancel {RUN}`"):
                store.claim(RUN, pid=other.pid, host=HOST)
            assert store.run(RUN).owner_pid == os.getpid()  # the refusal changed nothing
            store.claim(RUN, pid=os.getpid(), host=HOST)  # this process resumes it
            with pytest.raises(RunClaimed, match=rf"run {RUN} is being resumed by process "
                                                    rf"{os.getpid()} on {HOST}"):
                store.claim(RUN, pid=other.pid, host=HOST)
        finally:
            _kill(other)

    def test_a_released_claim_puts_the_owner_back(self, store: RunStore) -> None:
        store.append(RUN, created())
        store.flush_sync()
        before = store.run(RUN)
        store.claim(RUN, pid=os.getpid(), host=HOST)
        store.release(RUN, pid=os.getpid() + 1, host=HOST, previous=before)  # not its claim
        assert store.run(RUN).claimed_at is not None
        store.release(RUN, pid=os.getpid(), host=HOST, previous=before)
        after = store.run(RUN)
        assert (after.owner_pid, after.owner_host, after.owner_token, after.claimed_at) == (
            before.owner_pid, before.owner_host, before.owner_token, None)
        store.release(RUN, pid=os.getpid(), host=HOST, previous=before)  # idempotent
        assert store.run(RUN) == after

    def test_a_claim_from_another_host_is_refused(self, store: RunStore) -> None:
        store.append(RUN, created())
        store.flush_sync()
        with pytest.raises(RunClaimed, match=rf"process {os.getpid()} on {HOST}, which "
                                                r"cannot be checked from elsewhere"):
            store.claim(RUN, pid=os.getpid(), host="elsewhere")

    def test_a_finished_run_is_left_as_it_is(self, store: RunStore) -> None:
        store.append(RUN, created())
        store.append(RUN, finished(2))
        store.flush_sync()
        before = store.run(RUN)
        other = _sleeper()
        try:
            store.claim(RUN, pid=other.pid, host=HOST)
        finally:
            _kill(other)
        assert store.run(RUN) == before  # nothing to take over


def test_a_run_whose_owner_process_was_killed_can_be_claimed(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    owner = owned_by_a_process(path, RUN)
    store = SQLiteStore(path)
    try:
        assert store.run(RUN).owner_pid == owner.pid
        with pytest.raises(RunClaimed, match=rf"run {RUN} is still running in process "
                                                rf"{owner.pid} on {HOST}"):
            store.claim(RUN, pid=os.getpid(), host=HOST)
        _kill(owner)
        store.claim(RUN, pid=os.getpid(), host=HOST)
        assert store.run(RUN).owner_pid == os.getpid()
    finally:
        store.close()


_CLAIMANT = """
import os, socket, sys
from counterpoint.errors import RunClaimed
from counterpoint.store import SQLiteStore
store = SQLiteStore(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()  # the start signal, sent to every claimant at once
try:
    store.claim(sys.argv[2], pid=os.getpid(), host=socket.gethostname())
    print("won", flush=True)
except RunClaimed as exc:
    print("lost", exc, flush=True)
sys.stdin.read()  # the winner lives on (owning the run) until every claim is made
store.close()
"""


@pytest.mark.parametrize("claimants", [2, 4])
def test_processes_claiming_a_run_at_the_same_moment_exactly_one_wins(
        tmp_path: Path, claimants: int) -> None:
    """Defect 1: two ``counterpoint resume RUN`` started at once both ran the run."""
    path = tmp_path / "runs.db"
    _kill(owned_by_a_process(path, RUN))  # interrupted: its owner was killed
    procs = [python(_CLAIMANT, str(path), RUN) for _ in range(claimants)]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n", proc.communicate(timeout=60)
        for proc in procs:  # go
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        answers = []
        for proc in procs:
            assert proc.stdout is not None
            answers.append(proc.stdout.readline())
    finally:
        results = [ended(proc) for proc in procs]
    assert all(code == 0 for code, _, _ in results), results
    winners = [proc.pid for proc, answer in zip(procs, answers, strict=True)
               if answer == "won\n"]
    assert len(winners) == 1, answers
    for answer in answers:
        if answer != "won\n":
            assert answer.startswith(f"lost run {RUN} is being resumed by process "
                                     f"{winners[0]} on {HOST}"), answer
    store = SQLiteStore(path)
    assert store.run(RUN).owner_pid == winners[0]
    store.close()


def test_a_pid_given_to_another_process_does_not_keep_a_run_claimed(tmp_path: Path) -> None:
    """The owner recorded before a reboot has the pid of a process alive now: its token
    (boot id and start time) tells them apart."""
    path = tmp_path / "runs.db"
    _kill(owned_by_a_process(path, RUN))
    store = SQLiteStore(path)
    other = _sleeper()
    try:
        store.claim(RUN, pid=other.pid, host=HOST)
        token = store.run(RUN).owner_token
        assert token is not None and token == process_token(other.pid)
        conn = sqlite3.connect(path)  # what the row held before the reboot
        conn.execute("UPDATE runs SET owner_token = ? WHERE run_id = ?",
                     ("an-earlier-boot/12345", RUN))
        conn.commit()
        conn.close()
        store.claim(RUN, pid=os.getpid(), host=HOST)
        assert store.run(RUN).owner_pid == os.getpid()
    finally:
        _kill(other)
        store.close()


def test_a_run_owned_on_another_host_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _kill(owned_by_a_process(path, RUN))
    conn = sqlite3.connect(path)  # as a process on another host sharing the file left it
    conn.execute("UPDATE runs SET owner_host = 'elsewhere' WHERE run_id = ?", (RUN,))
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    try:
        with pytest.raises(RunClaimed, match=rf"on elsewhere, which cannot be checked from "
                                                rf"{HOST}; resume it there"):
            store.claim(RUN, pid=os.getpid(), host=HOST)
    finally:
        store.close()


def test_a_claim_sees_what_the_store_appended_before_it(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        store.append(RUN, created())
        store.claim(RUN, pid=os.getpid(), host=HOST)  # no flush of our own
        assert store.run(RUN).claimed_at is not None
    finally:
        store.close()


def test_the_process_that_resumes_a_claimed_run_stays_its_owner(tmp_path: Path) -> None:
    """The writer records the store's process (and its token) with each status change."""
    path = tmp_path / "runs.db"
    _kill(owned_by_a_process(path, RUN))
    store = SQLiteStore(path)
    try:
        store.claim(RUN, pid=os.getpid(), host=HOST)
        store.append(RUN, Event(EventKind.RUN_RESUMED, 2.0, seq=2))
        store.append(RUN, node_event(3))
        store.flush_sync()
        record = store.run(RUN)
        assert (record.status, record.owner_pid, record.owner_host) == \
            ("running", os.getpid(), HOST)
        assert record.owner_token == process_token(os.getpid())
    finally:
        store.close()


def test_a_claim_waits_for_the_write_lock_then_says_the_store_is_locked(
        tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path, busy_timeout=0.2)
    store.append(RUN, created())
    store.flush_sync()
    try:
        with write_lock_held(path), pytest.raises(cp.StoreLocked,
                                                  match=rf"store {path}: .*locked"):
            store.claim(RUN, pid=os.getpid(), host=HOST)
        store.claim(RUN, pid=os.getpid(), host=HOST)  # usable again once the lock is gone
    finally:
        store.close()
