"""Timeout policies of approvals (reject, approve, escalate), on a manual clock."""

from __future__ import annotations

from typing import Any

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.testing import ManualClock

from .helpers import until_pending


def _gate(**ask: Any) -> cp.Graph:
    g = cp.Graph("timed")

    async def gate(ctx: cp.NodeContext) -> dict[str, Any]:
        answer = await ctx.ask("deploy?", {"env": "prod"}, **ask)
        return {"approved": answer.approved, "by": answer.by, "reason": answer.reason,
                "timed_out": answer.timed_out}
    g.add("gate", gate)
    return g


async def _run_until_timers(clock: ManualClock, graph: cp.Graph,
                            store: cp.MemoryStore) -> cp.RunHandle:
    with cp.use_clock(clock):
        handle = await cp.start(graph, store=store)
    await until_pending(handle, 1)
    assert clock.timers == 1
    return handle


async def test_an_unanswered_approval_is_rejected_after_its_timeout() -> None:
    clock, store = ManualClock(), cp.MemoryStore()
    handle = await _run_until_timers(clock, _gate(timeout=60), store)
    assert clock.advance(59) == 0  # not yet due
    assert clock.advance(1) == 1
    result = await handle.result()
    assert result.outputs["gate"] == {"approved": False, "by": "timeout",
                                      "reason": "no answer within 60s", "timed_out": True}
    [approval] = cp.approvals(store, result.run_id)
    assert approval.status == "rejected" and approval.answer is not None
    assert approval.answer.timed_out


async def test_a_timeout_can_approve() -> None:
    clock, store = ManualClock(), cp.MemoryStore()
    handle = await _run_until_timers(clock, _gate(timeout=5, on_timeout="approve"), store)
    clock.advance(5)
    result = await handle.result()
    assert result.outputs["gate"]["approved"] is True


async def test_an_escalated_approval_waits_for_its_new_owner_then_applies_its_policy() -> None:
    clock, store = ManualClock(), cp.MemoryStore()
    escalate = cp.Escalate(to="lead", timeout=30, then="approve")
    handle = await _run_until_timers(clock, _gate(timeout=10, on_timeout=escalate), store)
    clock.advance(10)
    async for event in handle.events():  # the escalation is logged, then it waits again
        if event.kind is EventKind.APPROVAL_ESCALATED:
            assert event.data is not None and event.data["to"] == "lead"
            break
    [pending] = [a for a in handle.approvals() if a.status == "pending"]
    assert pending.assignee == "lead" and clock.timers == 1
    clock.advance(30)
    result = await handle.result()
    assert result.outputs["gate"] == {"approved": True, "by": "timeout",
                                      "reason": "no answer within 40s", "timed_out": True}


async def test_a_person_who_answers_first_wins_over_the_timeout() -> None:
    clock, store = ManualClock(), cp.MemoryStore()
    handle = await _run_until_timers(clock, _gate(timeout=60), store)
    [pending] = handle.approvals()
    handle.approve(pending.id, by="ana")
    result = await handle.result()
    assert clock.timers == 0  # the answer cancelled the timeout
    assert clock.advance(60) == 0
    assert result.outputs["gate"]["by"] == "ana"


async def test_a_bad_timeout_policy_fails_the_node_saying_what_is_wrong() -> None:
    result = await cp.run(_gate(timeout=5, on_timeout="maybe"), store=cp.MemoryStore())
    assert result.status is cp.RunStatus.FAILED
    error = result.state.nodes[cp.NodeId("gate")].error or {}
    assert "on_timeout must be 'reject', 'approve' or Escalate(to=...)" in str(error)


async def test_a_timeout_that_passed_while_the_run_was_detached_applies_on_its_resume(
        ) -> None:
    store = cp.MemoryStore()
    graph = _gate(timeout=60)
    with cp.use_clock(ManualClock()):  # its deadline is long past on the wall clock
        first = await cp.run(graph, store=store,
                             options=cp.RunOptions(detach_when_waiting=True))
    assert first.status is cp.RunStatus.RUNNING and list(first.state.asking) == ["gate"]
    resumed = await cp.resume(first.run_id, store=store, graph=graph)
    assert resumed.status is cp.RunStatus.SUCCEEDED, list(resumed.state.asking)
    assert resumed.outputs["gate"] == {"approved": False, "by": "timeout",
                                       "reason": "no answer within 60s", "timed_out": True}
