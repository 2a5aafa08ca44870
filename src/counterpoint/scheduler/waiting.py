"""A run's approvals desk: nodes that wait for people, and the answers that wake them.

A node's ``ctx.ask`` comes here. An approval already answered (in the log, or in the
store while no process ran the run) is answered at once and never asked again; else
``approval_requested`` is logged (the node is WAITING: it gives up its concurrency slot,
and other branches keep running), and the ask awaits a future. Nothing polls for it in
this process: the answer comes from the store's command poll (another process answered
it), from :meth:`ApprovalDesk.deliver` (this process answered it) or from the timeout's
timer, and every answer goes through :meth:`~counterpoint.store.CommandBus.answer_approval`
first, so the first of two answers wins in every case.

With :attr:`~counterpoint.RunOptions.detach_when_waiting`, a top-level run whose only
work left is waiting ends its execution without a trace in the log (a resume picks it
up, as after a crash); an answer resumes it (:mod:`counterpoint.answering`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import weakref
from typing import TYPE_CHECKING, Any, cast

from ..approval import (
    PENDING,
    WITHDRAWN,
    Answer,
    Approval,
    Clock,
    OnTimeout,
    Timer,
    approval_id,
    clock,
    digest_of,
    policy_data,
    project,
)
from ..errors import ApprovalAnswered, RunNotFound
from ..events import (
    APPROVAL_ANSWERED,
    APPROVAL_REQUESTED,
    APPROVAL_WITHDRAWN,
    Event,
    EventKind,
)
from ..ids import NodeId, RunId
from ..secrets import redact_data

if TYPE_CHECKING:
    from .execution import Execution

_log = logging.getLogger(__name__)


class ApprovalDesk:
    """The approvals of one run being executed (see the module docstring). Used on the
    run's event loop only."""

    __slots__ = ("_check_due", "_clock", "_execution", "_ordinals", "_timers", "_used", "_waiters",
                 "_watching", "detached", "records")

    def __init__(self, execution: Execution) -> None:
        # a proxy: the desk lives and dies with its execution (``execution.approvals``),
        # and a strong reference back would make every run a reference cycle that only
        # the cyclic collector frees (~30 objects per run: in a shard running thousands of
        # runs a second, its collections took ~17% of the loop's CPU)
        self._execution = cast("Execution", weakref.proxy(execution))
        self.records: dict[str, Approval] = {}
        """Every approval of the run so far, by id (the projection of the log)."""
        self._waiters: dict[str, asyncio.Future[Answer]] = {}
        self._timers: dict[str, Timer] = {}
        self._ordinals: dict[tuple[NodeId, int], int] = {}
        self._watching = False
        self._clock: Clock | None = None
        self._used: dict[str, dict[str, Any]] = {}
        """Approved tool calls made: approval id -> the call's ``tool_result`` data."""
        self._check_due = False
        self.detached = False
        """Whether the execution ended because all that was left was waiting."""

    def load(self, events: list[Event]) -> None:
        """Take the approvals of a resumed run from its log."""
        self.records = project(self._execution.run_id, events)
        for ev in events:
            if ev.kind is EventKind.TOOL_RESULT and ev.data and "approval" in ev.data:
                self._used[ev.data["approval"]] = ev.data

    def used(self, approval_id: str) -> dict[str, Any] | None:
        """The ``tool_result`` of the call ``approval_id`` allowed, once it was made."""
        return self._used.get(approval_id)

    def use(self, approval_id: str, result: dict[str, Any]) -> None:
        """The call ``approval_id`` allowed was made and gave ``result``."""
        self._used[approval_id] = result

    def start(self) -> None:
        """At the start of an execution: take the answers given while no process ran it."""
        self._clock = clock()
        if not self.records:
            return
        self._watch()
        for aid, data in self._execution.store.approval_answers(self._execution.run_id).items():
            self.deliver(aid, data)

    def stop(self) -> None:
        """At the end of an execution: no more answers or timeouts for it here."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._watching:
            self._execution.store.unwatch_answers(self._execution.run_id)
            self._watching = False

    def _watch(self) -> None:
        if not self._watching:
            self._watching = True
            ex = self._execution
            ex.store.watch_answers(ex.run_id, asyncio.get_running_loop(), self.deliver)

    # ------------------------------------------------------------------ asking
    async def ask(self, node: NodeId, attempt: int, question: str, payload: Any, *,
                  key: str | None, timeout: float | None,  # noqa: ASYNC109 (a policy)
                  on_timeout: OnTimeout,
                  kind: str = "ask", schema: dict[str, Any] | None = None) -> Answer:
        """Ask a person; returns their answer (see the module docstring)."""
        ex = self._execution
        if key is None:  # the n-th ask of this attempt: the same n when the step re-runs
            n = self._ordinals.get((node, attempt), 0) + 1
            self._ordinals[node, attempt] = n
            key = f"ask-{n}"
        digest = digest_of(question, payload)
        aid = approval_id(ex.run_id, node, key, digest)
        record = self.records.get(aid)
        if record is not None and record.answer is not None:
            return dataclasses.replace(record.answer, id=aid)  # answered: never asked again
        the_clock = self._clock or clock()
        policy = record.policy if record is not None else policy_data(timeout, on_timeout)
        deadline = record.deadline if record is not None else (
            the_clock.now() + timeout if timeout is not None else None)
        data: dict[str, Any] = {"id": aid, "question": question, "payload": payload,
                                "digest": digest, "kind": kind, "key": key}
        if policy is not None:
            data["policy"] = policy
            data["deadline"] = deadline
        if schema is not None:
            data["schema"] = schema
        if record is None:
            carried = await self._answered_before(node, key, digest)
            if carried is not None:  # its sub-graph node's earlier attempt was answered
                ex.emit(Event(APPROVAL_REQUESTED, time.time(), node, attempt,
                              data=redact_data({**data, "carried_from": carried[0]})))
                self.records[aid] = Approval(
                    id=aid, run_id=ex.run_id, node=node, attempt=attempt, question=question,
                    payload=payload, digest=digest, status=PENDING, requested_at=time.time(),
                    kind=kind, deadline=deadline, schema=schema, policy=policy)
                self.deliver(aid, carried[1].as_data(digest))
                return dataclasses.replace(carried[1], id=aid)
        self._watch()
        waiter: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._waiters[aid] = waiter
        ex.emit(Event(APPROVAL_REQUESTED, time.time(), node, attempt, data=redact_data(data)))
        if record is None:
            record = self.records[aid] = Approval(
                id=aid, run_id=ex.run_id, node=node, attempt=attempt, question=question,
                payload=payload, digest=digest, status=PENDING, requested_at=time.time(),
                kind=kind, deadline=deadline, schema=schema, policy=policy)
        else:
            record = self.records[aid] = dataclasses.replace(record, status=PENDING,
                                                             attempt=attempt)
        if record.deadline is not None:
            self._arm(aid, record.deadline)
        started = time.monotonic()
        try:
            await ex.flush()  # durable before anyone is told: the request can be answered
            answer = await waiter
            ex.waited(node, attempt, "approval", time.monotonic() - started)
        except asyncio.CancelledError:
            current = self.records.get(aid)
            if not self.detached and current is not None and current.status == PENDING:
                self.records[aid] = dataclasses.replace(current, status=WITHDRAWN)
                ex.emit(Event(APPROVAL_WITHDRAWN, time.time(), node, attempt,
                              data={"id": aid}))
            raise
        finally:
            self._waiters.pop(aid, None)
            timer = self._timers.pop(aid, None)
            if timer is not None:
                timer.cancel()
        return dataclasses.replace(answer, id=aid)

    async def _answered_before(self, node: NodeId, key: str, digest: str
                               ) -> tuple[str, Answer] | None:
        """In a sub-run that retries its sub-graph node (``run/node~N``), the approval the
        same ask (node, key, content) got answered in the sub-run of an earlier attempt of
        that node, and its answer: a retry does not ask people again what they answered,
        as a step's own retry does not. ``None`` anywhere else."""
        ex = self._execution
        base, tilde, tries = ex.run_id.rpartition("~")
        if not tilde or not tries.isdigit() or "/" not in base:
            return None
        await ex.store.flush()  # the earlier sub-run's last events may be on their way
        for n in range(int(tries) - 1, 0, -1):
            earlier = RunId(base if n == 1 else f"{base}~{n}")
            try:
                events = ex.store.events(earlier)
            except RunNotFound:
                continue
            aid = approval_id(earlier, node, key, digest)
            found = project(earlier, events, ex.store.approval_answers(earlier)).get(aid)
            if found is not None and found.answer is not None:
                return aid, found.answer
        return None

    # ------------------------------------------------------------------ answers
    def deliver(self, aid: str, data: dict[str, Any]) -> None:
        """``data``, the answer recorded in the store for approval ``aid``, reaches the
        run: logged and given to the ask awaiting it. An answer to an approval already
        answered, or bound to another digest, is ignored."""
        record = self.records.get(aid)
        ex = self._execution
        if record is None or record.status not in (PENDING, WITHDRAWN) \
                or ex.state.status.terminal:
            return
        if data.get("digest") != record.digest:
            _log.warning("run %s: an answer to approval %s was given for other content "
                         "(digest %s, asked %s); ignored", ex.run_id, aid, data.get("digest"),
                         record.digest)
            return
        answer = Answer.from_data(data)
        self.records[aid] = dataclasses.replace(
            record, status="approved" if answer.approved else "rejected", answer=answer,
            answered_at=time.time())
        ex.emit(Event(APPROVAL_ANSWERED, time.time(), record.node, record.attempt,
                      data={"id": aid, **answer.as_data(record.digest)}))
        waiter = self._waiters.get(aid)
        if waiter is not None and not waiter.done():
            waiter.set_result(answer)

    def _arm(self, aid: str, deadline: float) -> None:
        the_clock = self._clock or clock()
        delay = deadline - the_clock.now()
        if delay <= 0:  # passed already (while the run was detached or its process down):
            self._expire(aid)  # now, before the run detaches again for want of work
            return
        self._timers[aid] = the_clock.call_later(delay, lambda: self._expire(aid))

    def _expire(self, aid: str) -> None:
        """The timeout of ``aid`` passed: escalate it, or answer it by its policy."""
        self._timers.pop(aid, None)
        record = self.records.get(aid)
        ex = self._execution
        if record is None or record.status != PENDING or record.policy is None \
                or ex.state.status.terminal:
            return
        policy = record.policy
        the_clock = self._clock or clock()
        if policy.get("escalate") and record.assignee is None:
            after = policy.get("timeout")
            deadline = None if after is None else the_clock.now() + after
            self.records[aid] = dataclasses.replace(record, assignee=policy["escalate"],
                                                    deadline=deadline)
            ex.emit(Event(EventKind.APPROVAL_ESCALATED, time.time(), record.node,
                          record.attempt, data={"id": aid, "to": policy["escalate"],
                                                "deadline": deadline}))
            if deadline is not None:
                self._arm(aid, deadline)
            return
        waited = policy["after"] + (policy.get("timeout") or 0 if record.assignee else 0)
        answer = Answer(approved=policy["then"] == "approve", by="timeout", timed_out=True,
                        reason=f"no answer within {waited:g}s")
        data = {**answer.as_data(record.digest), "at": the_clock.now()}
        try:
            ex.store.answer_approval(ex.run_id, aid, data)
        except ApprovalAnswered:  # a person answered first: their answer stands
            data = ex.store.approval_answers(ex.run_id).get(aid, data)
        self.deliver(aid, data)

    # ------------------------------------------------------------------ detaching
    def idle_check(self) -> None:
        """After events while nodes wait: with ``detach_when_waiting``, look (once the loop
        has run what is ready now) whether the run has anything left but waiting. A
        sub-run's asks are looked at by its top-level run: the run tree detaches as one."""
        ex = self._execution
        if ex.parent is not None:
            members = ex._capacity.members  # the top-level run first
            root = members[0] if members else None
            if root is not None and root is not ex and ex.state.asking:
                root._tree_asks = True  # its events look again while this sub-run asks
                root.approvals.idle_check()
            return
        if self._check_due or not ex.options.detach_when_waiting or ex._loop is None:
            return
        self._check_due = True
        ex._loop.call_soon(self._detach_if_idle)

    def _detach_if_idle(self) -> None:
        """End the execution if nothing is left to do in the run tree but wait for people:
        the top-level run's and its running sub-runs' (no node running but graph nodes
        waiting for their sub-run, none ready or waiting to retry, some node asking)."""
        self._check_due = False
        ex = self._execution
        state = ex.state
        if self.detached or state.status.terminal or state.stop_reason:
            return
        members = ex._capacity.members
        tree = list(members) if ex in members else [ex]
        asking = [m for m in tree if m.state.asking]
        ex._tree_asks = any(m is not ex for m in asking)
        if not asking:
            return
        for m in tree:
            s = m.state
            if s.running > len(m._children) or s.ready or m._timers or s.stop_reason or any(
                    child._execution not in tree for child in m._children.values()):
                return  # (a sub-run just started has not joined the tree's capacity yet)
        for m in tree:  # the waiting asks are left pending, not withdrawn, as they end
            m.approvals.detached = True
            for queue in m._subscribers:  # these executions' events end here
                queue.put_nowait(None)
        done = ex._done
        if done is not None and not done.done():
            done.set_result(None)  # the waiting tasks are cancelled as the run ends

    def pending(self) -> list[Approval]:
        """The approvals waiting for an answer now."""
        return [r for r in self.records.values() if r.status == PENDING]
