"""Approvals: what a node asked a person, and what they answered, as data.

A step calls ``await ctx.ask(question, payload)`` (an agent does it before a tool declared
``@tool(approval=True)``): the node is WAITING until the answer comes. This module holds
the records and the pure parts: the approval's id and digest, the timeout policies, and
:func:`project`, which rebuilds every approval of a run from its log. The scheduler's
:mod:`~counterpoint.scheduler.waiting` does the waiting; :mod:`counterpoint.answering`
is how people answer.

An approval's id is derived from the run, the node, the ask's key (its ordinal among the
node's asks, or the tool call's key) and the digest of what is asked: a re-run of the
step (after a crash, or a retry) asks with the same id and finds the recorded answer
instead of asking again, while an ask about different content is a new approval. An
answer is bound to the digest it was given for, and is used by that ask only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .errors import UserError
from .events import (
    APPROVALS,
    Event,
    EventKind,
)
from .ids import NodeId, RunId

PENDING = "pending"
APPROVED = "approved"
REJECTED = "rejected"
WITHDRAWN = "withdrawn"


@dataclass(frozen=True, kw_only=True)
class Escalate:
    """A timeout policy: after the timeout, hand the approval to ``to`` (a person or a
    team, shown in ``counterpoint approvals``), who has ``timeout`` more seconds (``None``:
    no limit) before ``then`` applies."""

    to: str
    timeout: float | None = None
    then: Literal["reject", "approve"] = "reject"


OnTimeout = Literal["reject", "approve"] | Escalate
"""What happens to an approval nobody answered in time."""


@dataclass(frozen=True, kw_only=True)
class Answer:
    """What a person (or a timeout policy) answered."""

    approved: bool
    by: str | None = None
    reason: str | None = None
    edit: Any = None
    """A replacement payload (for a tool call: its arguments), or ``None``."""
    timed_out: bool = False
    id: str | None = field(default=None, compare=False)
    """The approval answered (set on what an ask returns; not part of the record)."""

    def as_data(self, digest: str) -> dict[str, Any]:
        data: dict[str, Any] = {"approved": self.approved, "digest": digest}
        for name in ("by", "reason", "edit"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        if self.timed_out:
            data["timed_out"] = True
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Answer:
        return cls(approved=bool(data["approved"]), by=data.get("by"),
                   reason=data.get("reason"), edit=data.get("edit"),
                   timed_out=bool(data.get("timed_out")))


@dataclass(frozen=True, kw_only=True)
class Approval:
    """One approval of a run, as its log (and the store's answers) tell it."""

    id: str
    run_id: RunId
    node: NodeId
    attempt: int
    """The attempt that asked last."""
    question: str
    payload: Any
    digest: str
    """SHA-256 of the question and payload: what an answer is bound to."""
    status: str
    """``pending``, ``approved``, ``rejected`` or ``withdrawn``."""
    requested_at: float
    kind: str = "ask"
    """``ask`` (a step's ``ctx.ask``) or ``tool`` (a tool call needing approval)."""
    deadline: float | None = None
    """When the timeout policy applies (seconds since the epoch), if there is one."""
    assignee: str | None = None
    """Whom it was escalated to, if it was."""
    answer: Answer | None = None
    answered_at: float | None = None
    delivered: bool = True
    """Whether the answer is in the run's log (``False``: recorded in the store, the run
    takes it when it runs next)."""
    schema: dict[str, Any] | None = None
    """For a tool call: the JSON schema an edited payload must follow."""
    policy: dict[str, Any] | None = None
    """The timeout policy as recorded (:func:`policy_data`), if there is one."""


def digest_of(question: str, payload: Any) -> str:
    """The digest an answer is bound to: of the question and the payload, as JSON.

    Raises :class:`~counterpoint.UserError` if the payload cannot be logged as JSON: the
    request would not be durable, and a re-run would ask about other content.
    """
    from . import codec
    from .errors import OutputNotSerializable
    try:
        codec.encode(payload)
    except OutputNotSerializable as exc:
        cause = exc.__cause__ or exc
        raise UserError(f"ctx.ask({question!r}): the payload cannot be stored as JSON "
                        f"({cause}); give JSON data (a dict, a list, text, numbers), a "
                        "dataclass or a pydantic model") from None
    body = json.dumps([question, payload], sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def approval_id(run_id: RunId, node: NodeId, key: str, digest: str) -> str:
    """The stable id of the ask ``key`` of ``node`` about content ``digest``."""
    body = f"{run_id}\x00{node}\x00{key}\x00{digest}"
    return "ap-" + hashlib.sha256(body.encode()).hexdigest()[:12]


def policy_data(timeout: float | None, on_timeout: OnTimeout) -> dict[str, Any] | None:
    """The timeout policy as recorded in ``approval_requested``."""
    if not isinstance(on_timeout, Escalate) and on_timeout not in ("reject", "approve"):
        raise UserError(f"on_timeout must be 'reject', 'approve' or Escalate(to=...), got "
                        f"{on_timeout!r}")
    if timeout is None:
        return None
    if timeout < 0:
        raise UserError(f"an approval's timeout must be >= 0 seconds, got {timeout}")
    if isinstance(on_timeout, Escalate):
        return {"after": timeout, "escalate": on_timeout.to, "then": on_timeout.then,
                "timeout": on_timeout.timeout}
    return {"after": timeout, "then": on_timeout}


def project(run_id: RunId, events: Iterable[Event],
            answers: dict[str, dict[str, Any]] | None = None) -> dict[str, Approval]:
    """Every approval of a run from its events, in the order asked; ``answers`` (the
    store's, :meth:`~counterpoint.store.CommandBus.approval_answers`) adds those
    recorded but not yet in the log. Pure."""
    found: dict[str, dict[str, Any]] = {}
    for ev in events:
        if ev.kind not in APPROVALS:
            continue
        data = ev.data or {}
        aid = data["id"]
        if ev.kind is EventKind.APPROVAL_REQUESTED:
            entry = found.get(aid)
            if entry is None:
                found[aid] = entry = {
                    "id": aid, "run_id": run_id, "node": ev.node, "question": data["question"],
                    "payload": data.get("payload"), "digest": data["digest"],
                    "status": PENDING, "requested_at": ev.at, "kind": data.get("kind", "ask"),
                    "deadline": data.get("deadline"), "schema": data.get("schema"),
                    "policy": data.get("policy")}
            elif entry["status"] == WITHDRAWN:
                entry["status"] = PENDING
            entry["attempt"] = ev.attempt
        elif aid not in found:
            continue
        elif ev.kind is EventKind.APPROVAL_ANSWERED:
            answer = Answer.from_data(data)
            found[aid].update(status=APPROVED if answer.approved else REJECTED, answer=answer,
                              answered_at=ev.at)
        elif ev.kind is EventKind.APPROVAL_ESCALATED:
            found[aid].update(assignee=data.get("to"), deadline=data.get("deadline"))
        elif found[aid]["status"] == PENDING:  # withdrawn
            found[aid]["status"] = WITHDRAWN
    for aid, data in (answers or {}).items():
        entry = found.get(aid)
        if entry is not None and entry["status"] in (PENDING, WITHDRAWN) \
                and data.get("digest") == entry["digest"]:
            answer = Answer.from_data(data)
            entry.update(status=APPROVED if answer.approved else REJECTED, answer=answer,
                         answered_at=data.get("at"), delivered=False)
    return {aid: Approval(**entry) for aid, entry in found.items()}


class Ledger(Protocol):
    """A run's approvals as a running step uses them (the scheduler's desk)."""

    async def ask(self, node: NodeId, attempt: int, question: str, payload: Any, *,
                  key: str | None, timeout: float | None,  # noqa: ASYNC109 (a policy)
                  on_timeout: OnTimeout, kind: str = "ask",
                  schema: dict[str, Any] | None = None) -> Answer:
        """Wait for the answer to ``question`` about ``payload``; see ``NodeContext.ask``."""

    def used(self, approval_id: str) -> dict[str, Any] | None:
        """The ``tool_result`` data of the call ``approval_id`` allowed, once made."""

    def use(self, approval_id: str, result: dict[str, Any]) -> None:
        """The call ``approval_id`` allowed was made and gave ``result``."""


# ------------------------------------------------------------------ the clock
class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Time as the approvals' timeouts see it: the seam tests replace."""

    def now(self) -> float:
        """Seconds since the epoch."""

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Call ``callback`` on the running event loop after ``delay`` seconds."""


class WallClock:
    """The real clock: ``time.time`` and the event loop's timers."""

    def now(self) -> float:
        return time.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        import asyncio
        return asyncio.get_running_loop().call_later(max(delay, 0.0), callback)


_CLOCK: ContextVar[Clock | None] = ContextVar("counterpoint_approval_clock", default=None)


def clock() -> Clock:
    """The clock approvals use in the calling context (the wall clock unless
    :func:`use_clock` set another)."""
    return _CLOCK.get() or WallClock()


@contextlib.contextmanager
def use_clock(replacement: Clock) -> Iterator[Clock]:
    """Use ``replacement`` for approvals' timeouts in runs started inside the block
    (a run's tasks keep the context they were started in)."""
    token = _CLOCK.set(replacement)
    try:
        yield replacement
    finally:
        _CLOCK.reset(token)
