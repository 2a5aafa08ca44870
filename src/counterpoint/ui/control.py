"""What the page's buttons do: cancel a run, resume an interrupted one, approve or
reject what a node asks, as the ``counterpoint cancel``, ``resume``, ``approve`` and
``reject`` commands do."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..answering import approvals, find, record_answer
from ..approval import Answer
from ..errors import ApprovalError, ApprovalNotFound, StoreError
from ..events import EventKind
from ..exits import WAITING
from ..history import mark_cancelled, shown_status
from ..ids import RunId
from ..state import RunStatus
from ..store import RunStore, is_file_location, paths
from ..store.owners import run_owner_alive, tree_root

RESUME_SETTLE_SECONDS = 5.0
"""How long a resume request waits for the new process to take the run over (or fail)."""
LOG_POLL_SECONDS = 0.25
"""How often, once the run is claimed, the log is read for the resumed process's start."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """What a control did, for the page: an HTTP status and one line saying what happened."""

    status: int
    message: str
    pid: int | None = None


def cancel(store: RunStore, run_id: RunId) -> Outcome:
    """Ask the run's process to cancel it, or end it for good if that process died.

    Returns at once: the page sees the run end in its stream.
    """
    record = store.run(run_id)
    if record.status != RunStatus.RUNNING:
        return Outcome(status=409, message=f"run {run_id} already finished: {record.status}")
    refused = read_only(store, f"cancel run {run_id}")
    if refused is not None:
        return refused
    try:
        if run_owner_alive(record):
            store.request_cancel(run_id)
            return Outcome(status=202, message=f"cancel of run {run_id} requested from "
                                               f"process {record.owner_pid}")
        mark_cancelled(store, run_id)
    except StoreError as exc:  # e.g. the store became read-only since it was looked at
        return Outcome(status=409, message=f"cannot cancel run {run_id}: {exc}")
    return Outcome(status=200, message=f"run {run_id} cancelled: its process "
                                       f"({record.owner_pid}) was no longer running; it can "
                                       "no longer be resumed")


def resume(store: RunStore, run_id: RunId, *, cwd: Path,
           settle: float = RESUME_SETTLE_SECONDS) -> Outcome:
    """Start ``counterpoint resume RUN_ID`` as a detached process in ``cwd`` (where the
    run's graph must be importable from, as for the command), and wait until it has
    taken the run over, or has failed (its error line is the message)."""
    record = store.run(run_id)
    if shown_status(record) != "interrupted":
        return Outcome(status=409, message=f"run {run_id} is {shown_status(record)}: only an "
                                           "interrupted run (its process died) can be resumed")
    if store.location in ("memory", ":memory:"):
        return Outcome(status=409, message="a run in an in-memory store cannot be resumed "
                                           "by another process")
    refused = read_only(store, f"resume run {run_id}")
    if refused is not None:
        return refused
    argv = [sys.executable, "-m", "counterpoint.cli", "resume", run_id, "--quiet"]
    # the store goes in the environment, not on the command line that `ps` shows: a
    # PostgreSQL store's location hides the password its URL may hold; its url does not
    env = {**os.environ, "COUNTERPOINT_DB": str(getattr(store, "url", store.location)),
           "PYTHONPATH": os.pathsep.join(
               p for p in (str(Path(__file__).resolve().parents[2]),
                           os.environ.get("PYTHONPATH")) if p)}
    resumed_before = _resumed_by(store, run_id)
    with tempfile.TemporaryFile(mode="w+") as errors:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=errors, env=env,
                                start_new_session=True)
        until = time.monotonic() + settle
        next_read = 0.0
        while time.monotonic() < until:
            code = proc.poll()
            if code == WAITING:  # it went on to the same wait, and ended to wait there
                asking = [a.id for a in approvals(store, run_id) if a.status == "pending"]
                return Outcome(status=202, message=f"run {run_id} resumed in process "
                                                   f"{proc.pid}, and waits again for "
                                                   f"approval(s) ({', '.join(asking)}): "
                                                   "answer them to go on")
            if code is not None and code != 0:
                errors.seek(0)
                lines = [line for line in errors.read().splitlines() if line.strip()]
                return Outcome(status=409, message=lines[-1] if lines else
                               f"`counterpoint resume {run_id}` exited with code {code}")
            now = store.run(run_id)
            started = False
            if now.owner_pid == proc.pid and time.monotonic() >= next_read:
                next_read = time.monotonic() + LOG_POLL_SECONDS
                started = proc.pid in _resumed_by(store, run_id)[len(resumed_before):]
            if code == 0 or started or now.status != RunStatus.RUNNING:
                return Outcome(status=202, message=f"run {run_id} resumed in process "
                                                   f"{proc.pid}", pid=proc.pid)
            time.sleep(0.05)  # a process elsewhere: nothing to wait on but its record
    return Outcome(status=202, message=f"resuming run {run_id} in process {proc.pid}",
                   pid=proc.pid)


ANSWER_BODY = 'send {"approved": true} or {"approved": false, "reason": "why"} as JSON'
"""What an answer's request body holds."""


def answer(store: RunStore, run_id: RunId, approval_id: str, body: object, *,
           cwd: Path) -> Outcome:
    """Approve or reject ``approval_id``, asked by a node of ``run_id``, as ``counterpoint
    approve`` / ``reject`` do: the answer is recorded (the first one stands); the run's
    live process takes it, and a run whose process ended to wait is resumed in ``cwd``.
    ``body`` is the request's JSON: ``approved`` and, to reject, ``reason``."""
    approved = body.get("approved") if isinstance(body, dict) else None
    reason = body.get("reason") if isinstance(body, dict) else None
    if not isinstance(approved, bool) or not isinstance(reason, str | None):
        return Outcome(status=400, message=f"answer to {approval_id}: {ANSWER_BODY}")
    reason = (reason or "").strip() or None
    if not approved and reason is None:
        return Outcome(status=400, message=f"reject {approval_id}: say why in the reason (the "
                                           "step, or the model for a tool call, is told it)")
    refused = read_only(store, f"answer approval {approval_id}")
    if refused is not None:
        return refused
    try:
        asked = find(store, approval_id)
        if asked.run_id != run_id:
            raise ApprovalNotFound(f"approval {approval_id} is not one of run {run_id} (it is "
                                   f"of run {asked.run_id})")
        record_answer(store, asked, Answer(approved=approved, by="web view", reason=reason))
    except ApprovalNotFound as exc:
        return Outcome(status=404, message=str(exc))
    except (ApprovalError, StoreError) as exc:  # answered already: the first answer stands
        return Outcome(status=409, message=str(exc))
    done = f"{'approved' if approved else 'rejected'} {approval_id} (node {asked.node!r})"
    root = tree_root(store, store.run(run_id))  # a sub-run goes on with its run tree
    if run_owner_alive(root):
        return Outcome(status=200, message=f"{done}; process {root.owner_pid} continues the "
                                           "run")
    resumed = resume(store, root.run_id, cwd=cwd)
    return Outcome(status=200 if resumed.status < 400 else resumed.status,
                   message=f"{done}; {resumed.message}", pid=resumed.pid)


def read_only(store: RunStore, action: str) -> Outcome | None:
    """403 if ``store`` is a file that cannot be written (a read-only folder or mount,
    an immutable file: the web view still reads it, see
    :mod:`counterpoint.store.sqlite_access`), so ``action`` would record nothing; else
    ``None``. The same check as the commands that write (``check_writable``)."""
    if not is_file_location(store.location):
        return None
    path = Path(store.location)
    problem = paths.writing_problem(path)
    if problem is None:
        return None
    return Outcome(status=403, message=f"cannot {action}: store {path}: {problem} (this "
                                       "page can only show its runs)")


def _resumed_by(store: RunStore, run_id: RunId) -> list[int | None]:
    """The pid of each ``run_resumed`` event in the run's log, in order."""
    return [(e.data or {}).get("pid") for e in store.events(run_id)
            if e.kind is EventKind.RUN_RESUMED]
