"""How people answer approvals: list them, approve, reject, from any process.

An answer is recorded in the store first (:meth:`~counterpoint.store.CommandBus.answer_approval`,
durable, the first answer wins), bound to the digest of what was asked. A live run takes
it from there at once (in its process: :meth:`~counterpoint.RunHandle.approve`) or at its
store's next command poll (another process); a run whose process ended takes it when it
is resumed (``counterpoint approve`` resumes it unless told not to).
"""

from __future__ import annotations

import time
from typing import Any

from .approval import PENDING, WITHDRAWN, Answer, Approval, project
from .errors import ApprovalAnswered, ApprovalError, ApprovalNotFound
from .ids import RunId
from .store import RunStore, open_store

SCAN_LIMIT = 10_000
"""Most runs searched for an approval given by id alone."""
FINISHED_LIMIT = 200
"""Most finished runs searched, to say why an approval of one takes no answer."""


def approvals(store: RunStore | str | None = None, run_id: str | None = None
              ) -> list[Approval]:
    """Every approval of ``run_id``, or of every unfinished run if it is ``None``, oldest
    first (with the answers recorded but not yet taken by their run: ``delivered=False``).
    """
    with _opened(store) as the_store:
        if run_id is not None:
            return list(_of_run(the_store, RunId(run_id)).values())
        found: list[Approval] = []
        for record in the_store.runs(limit=SCAN_LIMIT):
            if record.status == "running":
                found.extend(_of_run(the_store, record.run_id).values())
        return sorted(found, key=lambda a: a.requested_at)


def approve(store: RunStore | str | None, approval_id: str, *, edit: Any = None,
            by: str | None = None, reason: str | None = None) -> Approval:
    """Approve ``approval_id``; ``edit`` replaces its payload (a tool call's arguments,
    checked against the tool's schema). Returns the approval as now answered. Raises
    :class:`~counterpoint.ApprovalNotFound` or :class:`~counterpoint.ApprovalAnswered`."""
    return answer(store, approval_id, Answer(approved=True, by=by, reason=reason, edit=edit))


def reject(store: RunStore | str | None, approval_id: str, reason: str | None = None, *,
           by: str | None = None) -> Approval:
    """Reject ``approval_id`` (the step, or the model for a tool call, is told ``reason``)."""
    return answer(store, approval_id, Answer(approved=False, by=by, reason=reason))


def answer(store: RunStore | str | None, approval_id: str, given: Answer) -> Approval:
    """Record ``given`` as the answer to ``approval_id`` (see :func:`approve`)."""
    with _opened(store) as the_store:
        found = find(the_store, approval_id)
        record_answer(the_store, found, given)
        return _of_run(the_store, found.run_id)[approval_id]


def record_answer(store: RunStore, approval: Approval, given: Answer) -> dict[str, Any]:
    """Check ``given`` against ``approval`` (pending, edit valid) and record it in
    ``store``; returns the answer as recorded."""
    if approval.status not in (PENDING, WITHDRAWN):
        by = f" by {approval.answer.by}" if approval.answer and approval.answer.by else ""
        raise ApprovalAnswered(f"approval {approval.id} (run {approval.run_id}, node "
                               f"{approval.node!r}) was {approval.status}{by} already; the "
                               "first answer stands")
    if given.edit is not None:
        check_edit(approval, given.edit)
    data = {**given.as_data(approval.digest), "at": time.time()}
    store.answer_approval(approval.run_id, approval.id, data)
    return data


def find(store: RunStore, approval_id: str) -> Approval:
    """The approval ``approval_id`` in an unfinished run of ``store``. One of a finished
    run (among the latest :data:`FINISHED_LIMIT`) is named in the error: it takes no
    answer any more."""
    records = store.runs(limit=SCAN_LIMIT)
    for record in records:
        if record.status == "running":
            found = _of_run(store, record.run_id).get(approval_id)
            if found is not None:
                return found
    for record in [r for r in records if r.status != "running"][:FINISHED_LIMIT]:
        found = _of_run(store, record.run_id).get(approval_id)
        if found is not None:
            raise _too_late(found, record.status)
    raise ApprovalNotFound(f"no approval {approval_id} in store {store.location}; list the "
                           "pending ones with `counterpoint approvals`")


_ENDED = {"cancelled": "was cancelled", "timed_out": "timed out (its deadline passed)"}
"""How a run's end is said, where its status alone does not read as a sentence."""


def _too_late(approval: Approval, run_status: str) -> ApprovalError:
    """The error for an answer to ``approval`` of a run that ended (``run_status``)."""
    where = f"approval {approval.id} (run {approval.run_id}, node {approval.node!r})"
    ended = _ENDED.get(run_status, run_status)
    if approval.answer is not None:
        by = f" by {approval.answer.by}" if approval.answer.by else ""
        return ApprovalAnswered(f"{where} was {approval.status}{by} already, and its run "
                                f"{ended}; nothing waits for another answer")
    # pending, or withdrawn when the run ended: nobody answered it, so "was pending
    # already" would say nothing true
    return ApprovalError(f"{where} takes no answer: its run {ended} before it was "
                         "answered, and nothing waits for it; a new run of the graph asks "
                         "again")


def check_edit(approval: Approval, edit: Any) -> None:
    """Raise :class:`~counterpoint.ApprovalError` if ``edit`` does not follow the schema
    of ``approval``'s payload (a tool call's arguments)."""
    if approval.schema is None:
        return
    import jsonschema
    problems = sorted(jsonschema.Draft202012Validator(approval.schema).iter_errors(edit),
                      key=lambda e: list(e.path))
    if problems:
        first = problems[0]
        where = "/".join(str(p) for p in first.path) or "(root)"
        tool = approval.payload.get("tool") if isinstance(approval.payload, dict) else None
        raise ApprovalError(f"approval {approval.id}: the edited arguments do not follow the "
                            f"schema of tool {tool}: {where}: {first.message}; fix the JSON "
                            "and approve again")


def _of_run(store: RunStore, run_id: RunId) -> dict[str, Approval]:
    return project(run_id, store.events(run_id), store.approval_answers(run_id))


class _opened:
    """The store given, or one opened (and closed) for the call."""

    def __init__(self, store: RunStore | str | None) -> None:
        self._given = store if isinstance(store, RunStore) else None
        self._location = None if isinstance(store, RunStore) else store
        self._opened: RunStore | None = None

    def __enter__(self) -> RunStore:
        if self._given is not None:
            return self._given
        self._opened = open_store(self._location)
        return self._opened

    def __exit__(self, *exc: object) -> None:
        if self._opened is not None:
            self._opened.close()

