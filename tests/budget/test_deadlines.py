"""Deadlines are absolute times recorded in the log (``run_created.deadline_at``): a
resumed run keeps the one it started with, and code running in it sees the time left
(``counterpoint.budget.remaining().seconds``). Time is a ManualClock: nothing sleeps."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.budget import remaining
from counterpoint.events import EventKind
from counterpoint.state import NodeStatus
from counterpoint.testing import ManualClock

START = 1_000_000.0


def _graph(started: asyncio.Event, seen: list[float | None]) -> cp.Graph:
    async def block() -> str:
        seen.append(remaining().seconds)
        started.set()
        await asyncio.Event().wait()  # until the deadline cancels it
        return "never"

    async def quick() -> str:
        return "kept"

    g = cp.Graph("deadlined")
    g.add("quick", quick)
    g.add("block", block)
    return g


async def test_the_deadline_is_recorded_once_and_a_resume_keeps_it(tmp_path: Path) -> None:
    clock = ManualClock(START)
    store = cp.SQLiteStore(tmp_path / "runs.db")
    started = asyncio.Event()
    seen: list[float | None] = []
    g = _graph(started, seen)
    with cp.use_clock(clock):
        running = asyncio.create_task(cp.run(g, store=store, run_id="R",
                                             options=cp.RunOptions(deadline=30)))
    await started.wait()
    assert seen == [30.0]
    clock.advance(20)  # not due: nothing stops
    running.cancel()  # the process going away in the middle of the run
    with pytest.raises(asyncio.CancelledError):
        await running
    await store.flush()
    created = store.events(cp.RunId("R"))[0]
    assert created.kind is EventKind.RUN_CREATED
    assert (created.data or {})["deadline_at"] == START + 30

    clock.advance(5)  # 25s after the start: 5s are left, not 30 again
    started.clear()
    with cp.use_clock(clock):
        handle = await cp.start_resume("R", store=store, graph=g)
    await started.wait()
    assert seen[-1] == pytest.approx(5.0)
    assert clock.advance(4) == 0
    assert clock.advance(1) == 1
    result = await handle.result()
    store.close()
    assert result.state.stop_reason == "deadline"
    assert result.nodes[cp.NodeId("quick")].status is NodeStatus.SUCCEEDED  # partial result kept
    assert result.outputs[cp.NodeId("quick")] == "kept"
    assert result.nodes[cp.NodeId("block")].status is NodeStatus.CANCELLED


async def test_a_spending_block_sees_the_nearest_of_its_own_and_the_run_deadline() -> None:
    clock = ManualClock(START)
    seen: list[float | None] = []

    async def agentish() -> None:
        with cp.budget.spending(where="agent a", deadline=100):
            seen.append(remaining().seconds)  # the run's 10s are nearer
        with cp.budget.spending(where="agent b", deadline=3):
            seen.append(remaining().seconds)

    g = cp.Graph("nested")
    g.add("work", agentish)
    with cp.use_clock(clock):
        result = await cp.run(g, store=cp.MemoryStore(), options=cp.RunOptions(deadline=10))
    assert result.ok
    assert seen == [10.0, 3.0]


FLOW = '''
import os
from pathlib import Path

import counterpoint as cp

HERE = Path(__file__).parent


async def quick() -> str:
    return "kept"


async def effect(ctx: cp.NodeContext, before: str) -> str:
    """An effect; the first time, its process dies once the log is durable."""
    with (HERE / "marks").open("a") as marks:
        marks.write(f"effect {ctx.attempt}\\n")
    if not (HERE / "died").exists():
        (HERE / "died").touch()
        await ctx.flush()
        os._exit(9)
    return "done"


graph = cp.Graph("late")
graph.add("effect", effect, before=graph.add("quick", quick))
'''


async def test_a_run_resumed_after_its_deadline_starts_no_step(tmp_path: Path) -> None:
    """The resume of a run whose deadline passed while no process ran it ends timed out
    without running a step: the node in flight at the crash ran again (its effect done
    after the deadline) before the deadline's timer, due at once, stopped the run."""
    import sys

    from support import run_cli
    (tmp_path / "late.py").write_text(FLOW)
    crashed = run_cli("run", "late.py", "-q", "--deadline", "600", "--db", "runs.db",
                      cwd=tmp_path)
    assert crashed.returncode == 9, crashed.stderr
    store = cp.SQLiteStore(tmp_path / "runs.db")
    [record] = store.runs()
    deadline_at = (store.events(record.run_id)[0].data or {})["deadline_at"]
    sys.path.insert(0, str(tmp_path))
    try:
        with cp.use_clock(ManualClock(deadline_at + 1)):  # the deadline passed meanwhile
            result = await cp.resume(record.run_id, store=store)
    finally:
        sys.path.remove(str(tmp_path))
        store.close()
    assert result.status is cp.RunStatus.TIMED_OUT
    assert result.outputs == {"quick": "kept"}
    assert result.nodes[cp.NodeId("effect")].status is NodeStatus.CANCELLED
    assert (tmp_path / "marks").read_text().splitlines() == ["effect 1"]
