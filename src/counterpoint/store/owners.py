"""Who owns a run: process identities that survive pid reuse, and whether they still run.

A run's owner is the process that runs it, recorded in the run index as a pid, a host
name and a *token*. The token tells a live process from an unrelated one that was given
the same pid later (after the owner died, or after a reboot): on Linux it is the boot id
and the process's start time in clock ticks since boot (``/proc/PID/stat``, field 22),
which together never repeat. Where ``/proc`` is missing the token is ``None`` and the
pid alone decides.

:func:`refusal` is the claim rule both stores apply (inside their own transaction).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from ..errors import RunClaimed
from .index import RunIndex, RunRecord

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_STARTTIME = 19
"""Index of ``starttime`` (field 22 of ``/proc/PID/stat``) among the fields after the
command name, which may itself hold spaces and parentheses."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Owner:
    """A process that may own a run."""

    pid: int
    host: str
    token: str | None = None
    """:func:`process_token` of ``pid`` when it was recorded (``None``: unknown)."""


def process_alive(pid: int | None) -> bool:
    """Whether a process with this id exists on this host (a zombie counts as ended)."""
    if pid is None or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, and belongs to another user
        pass
    stat = _stat(pid)
    return stat is None or stat[0] != "Z"


def process_token(pid: int) -> str | None:
    """An id of process ``pid`` that no later process with the same pid shares, or
    ``None`` where it cannot be read (no such process, or no ``/proc``)."""
    stat = _stat(pid)
    boot = _boot_id()
    if stat is None or boot is None or len(stat) <= _STARTTIME:
        return None
    return f"{boot}/{stat[_STARTTIME]}"


_this: Owner | None = None


def this_process() -> Owner:
    """The calling process as an owner (computed once per process, and again after a
    fork: a child is another owner)."""
    global _this
    pid = os.getpid()
    if _this is None or _this.pid != pid:
        _this = Owner(pid=pid, host=socket.gethostname(), token=process_token(pid))
    return _this


def owner_alive(owner: Owner) -> bool:
    """Whether ``owner`` still runs. An owner on another host is assumed alive: its
    process cannot be checked from here."""
    if owner.host != socket.gethostname():
        return True
    if not process_alive(owner.pid):
        return False
    if owner.token is None:
        return True
    now = process_token(owner.pid)
    return now is None or now == owner.token  # another token: the pid was given again


def owner_of(record: RunRecord) -> Owner | None:
    """The owner the run index records for a run (``None`` if it records none)."""
    if record.owner_pid is None:
        return None
    return Owner(pid=record.owner_pid, host=record.owner_host or socket.gethostname(),
                 token=record.owner_token)


def tree_root(store: RunIndex, record: RunRecord) -> RunRecord:
    """The top-level run of ``record``'s run tree (``record`` itself when it is not a
    sub-run): the run whose process runs, claims and resumes the whole tree."""
    while record.parent is not None:
        record = store.run(record.parent)
    return record


def run_owner_alive(record: RunRecord) -> bool:
    """Whether the process that owns (or last ran) ``record`` still runs: what
    ``runtime.owner_alive`` answers, with the owner's token checked too."""
    owner = owner_of(record)
    return owner is not None and owner_alive(owner)


def claimant(pid: int, host: str) -> Owner:
    """The owner a claim by ``pid`` on ``host`` records (its token read if it is local)."""
    if pid == os.getpid() and host == socket.gethostname():
        return this_process()
    token = process_token(pid) if host == socket.gethostname() else None
    return Owner(pid=pid, host=host, token=token)


def refusal(run_id: str, *, status: str, owner: Owner | None, claimed: bool,
            by: Owner) -> str | None:
    """Why ``by`` may not take over ``run_id`` now, or ``None`` if it may.

    A run may be taken over when it is not finished (``status`` is ``"running"``) and
    its owner is unknown, is ``by`` itself, or no longer runs. ``claimed`` says whether
    the owner took the run over by a claim (it is resuming it) rather than started it.
    A finished run is never refused (there is nothing to take over: the caller finds it
    finished). Pure but for the liveness check of ``owner``.
    """
    if status != "running" or owner is None:
        return None
    if owner.pid == by.pid and owner.host == by.host:
        return None  # the same process (or its pid given again: the owner is gone then)
    if not owner_alive(owner):
        return None
    doing = "is being resumed by" if claimed else "is still running in"
    where = f"process {owner.pid} on {owner.host}"
    if owner.host != by.host:
        return (f"run {run_id} {doing} {where}, which cannot be checked from "
                f"{by.host}; resume it there, or cancel it with `counterpoint cancel "
                f"{run_id}`")
    return (f"run {run_id} {doing} {where}; wait for it to finish, or cancel it with "
            f"`counterpoint cancel {run_id}`")


CLAIM_COLUMNS = "status, owner_pid, owner_host, owner_token, claimed_at"
"""The run-index columns a claim reads, in the order :func:`check_claim` takes them."""


def check_claim(run_id: str, row: tuple[Any, ...], by: Owner) -> bool:
    """Raise :class:`RunClaimed` if ``by`` may not take over ``run_id``, whose run-index
    row (:data:`CLAIM_COLUMNS`) is ``row``; else whether the claim is to be recorded (the
    run is not finished)."""
    status, owner_pid, owner_host, owner_token, claimed_at = row
    owner = None if owner_pid is None else Owner(pid=owner_pid, host=owner_host or by.host,
                                                 token=owner_token)
    refused = refusal(run_id, status=status, owner=owner, claimed=claimed_at is not None,
                      by=by)
    if refused is not None:
        raise RunClaimed(refused)
    return bool(status == "running")


def release_update(table: str, mark: str) -> str:
    """The statement that puts back a run's owner as it was before a claim by a process
    that could not use it (:meth:`.RunIndex.release`), with ``mark`` for each parameter
    of :func:`release_values`."""
    return (f"UPDATE {table} SET owner_pid = {mark}, owner_host = {mark}, "
            f"owner_token = {mark}, claimed_at = {mark} "
            f"WHERE run_id = {mark} AND owner_pid = {mark} AND owner_host = {mark}")


def release_values(run_id: str, pid: int, host: str, previous: RunRecord) -> tuple[Any, ...]:
    """The parameters of :func:`release_update`."""
    return (previous.owner_pid, previous.owner_host, previous.owner_token,
            previous.claimed_at, run_id, pid, host)


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


_boot: list[str | None] = []


def _boot_id() -> str | None:
    if not _boot:
        try:
            with open(_BOOT_ID, encoding="ascii") as boot:
                _boot.append(boot.read().strip() or None)
        except OSError:
            _boot.append(None)
    return _boot[0]
