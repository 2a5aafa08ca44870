"""A node's attempts: what sync steps are told when cancelled, and fallbacks' outcomes."""

from __future__ import annotations

import asyncio
import threading
import time

import counterpoint as cp
from counterpoint.events import EventKind


def test_a_sync_step_sees_its_timeout_through_its_context_and_stops() -> None:
    """Regression: a timed-out sync step's thread ran on with no way to know."""
    stopped = threading.Event()

    def patient(ctx: cp.NodeContext) -> str:
        while not ctx.cancelled:
            time.sleep(0.005)  # one piece of work, then the cooperative check
        stopped.set()
        return "gave up"

    g = cp.Graph("timeout")
    g.add("slow", patient, timeout=0.05)
    result = cp.run_sync(g, store="memory")
    assert result.nodes["slow"].status is cp.NodeStatus.FAILED
    assert "timeout" in str(result.nodes["slow"].error)
    assert stopped.wait(timeout=10), "the step's thread never saw its attempt end"


def test_check_cancelled_raises_in_a_cancelled_sync_step() -> None:
    seen: list[BaseException] = []
    started, ended = threading.Event(), threading.Event()

    def worker(ctx: cp.NodeContext) -> None:
        started.set()
        try:
            while True:
                ctx.check_cancelled()
                time.sleep(0.005)
        except cp.Cancelled as exc:
            seen.append(exc)
            ended.set()

    async def scenario() -> cp.RunResult:
        g = cp.Graph("cancel")
        g.add("w", worker)
        handle = await cp.start(g, store="memory")
        await asyncio.to_thread(started.wait, 10)
        handle.cancel()
        return await handle.result()

    result = asyncio.run(scenario())
    assert result.status is cp.RunStatus.CANCELLED
    assert ended.wait(timeout=10), "the step never saw its attempt cancelled"
    assert "was cancelled" in str(seen[0])


def test_a_failing_fallback_is_a_public_error_and_not_a_retry() -> None:
    """Regression: a failing fallback showed the private _FallbackFailed and counted as
    a retry in the metrics."""
    async def broken() -> int:
        raise ValueError("primary down")

    async def also_broken() -> int:
        raise RuntimeError("fallback down")

    g = cp.Graph("fallback")
    g.add("n", broken, fallback=also_broken)
    store = cp.MemoryStore()
    result = cp.run_sync(g, store=store)
    node = result.nodes["n"]
    assert node.status is cp.NodeStatus.FAILED
    assert node.error is not None and node.error["type"] == "FallbackFailed"
    assert issubclass(cp.FallbackFailed, cp.CounterpointError)
    assert result.metrics.retries == 0
    failed = [e for e in store.events(result.run_id) if e.kind is EventKind.NODE_FAILED]
    assert [e.data["type"] for e in failed if e.data] == ["ValueError", "FallbackFailed"]
