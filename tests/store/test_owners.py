"""Run owners: process identities that survive pid reuse, and the claim rule
(:mod:`counterpoint.store.owners`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from counterpoint.ids import RunId
from counterpoint.store import RunRecord, owners
from counterpoint.store.owners import Owner, refusal

from .helpers import HOST

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that ran and was killed and reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    return proc.pid


def test_process_alive(dead_pid: int) -> None:
    assert owners.process_alive(os.getpid())
    assert not owners.process_alive(dead_pid)
    assert not owners.process_alive(None)
    assert not owners.process_alive(0)


@linux_only
def test_a_zombie_is_not_alive() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped yet
    try:
        assert not owners.process_alive(proc.pid)
    finally:
        proc.wait(timeout=60)


@linux_only
def test_a_token_is_stable_for_a_process_and_differs_between_processes() -> None:
    mine = owners.process_token(os.getpid())
    assert mine is not None and mine == owners.process_token(os.getpid())
    assert owners.this_process() == Owner(pid=os.getpid(), host=HOST, token=mine)
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        theirs = owners.process_token(other.pid)
        assert theirs is not None and theirs != mine
        assert owners.owner_alive(Owner(pid=other.pid, host=HOST, token=theirs))
        assert not owners.owner_alive(Owner(pid=other.pid, host=HOST, token="old-boot/1"))
        assert owners.owner_alive(Owner(pid=other.pid, host=HOST))  # no token: the pid says
    finally:
        other.communicate(timeout=60)


def test_the_claim_rule(dead_pid: int) -> None:
    me = owners.this_process()
    alive = Owner(pid=os.getpid(), host=HOST, token=me.token)
    someone = Owner(pid=dead_pid, host=HOST)
    assert refusal("r", status="running", owner=None, claimed=False, by=someone) is None
    assert refusal("r", status="running", owner=alive, claimed=False, by=me) is None
    assert refusal("r", status="succeeded", owner=alive, claimed=False, by=someone) is None
    assert refusal("r", status="running", owner=someone, claimed=True, by=me) is None
    assert refusal("r", status="running", owner=alive, claimed=False, by=someone) == (
        f"run r is still running in process {os.getpid()} on {HOST}; wait for it to "
        "finish, or cancel it with `counterpoint cancel r`")
    assert refusal("r", status="running", owner=alive, claimed=True, by=someone) == (
        f"run r is being resumed by process {os.getpid()} on {HOST}; wait for it to "
        "finish, or cancel it with `counterpoint cancel r`")
    remote = Owner(pid=dead_pid, host="elsewhere")
    assert refusal("r", status="running", owner=remote, claimed=False, by=me) == (
        f"run r is still running in process {dead_pid} on elsewhere, which cannot be "
        f"checked from {HOST}; resume it there, or cancel it with `counterpoint cancel r`")


def test_a_recorded_owner_is_alive_while_its_process_runs(dead_pid: int) -> None:
    def record(pid: int | None, token: str | None = None) -> RunRecord:
        return RunRecord(run_id=RunId("r"), graph="g", status="running", created_at=0.0,
                         updated_at=0.0, owner_pid=pid, owner_host=HOST, owner_token=token)

    me = owners.this_process()
    assert owners.run_owner_alive(record(me.pid, me.token))
    assert not owners.run_owner_alive(record(dead_pid))
    assert not owners.run_owner_alive(record(None))
    assert owners.owner_of(record(None)) is None
    assert owners.owner_of(record(7, "t")) == Owner(pid=7, host=HOST, token="t")
