"""Waiting on what a run records (never on the clock), for the approvals tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import counterpoint as cp
from counterpoint.approval import Approval

DEADLINE = 30.0


async def until_pending(handle: cp.RunHandle, count: int) -> list[Approval]:
    """Wait (on the run's own events) until ``count`` approvals are pending."""
    def pending() -> list[Approval]:
        return [a for a in handle.approvals() if a.status == "pending"]

    if len(pending()) >= count:
        return pending()
    async with asyncio.timeout(DEADLINE):
        async for _ in handle.events():
            if len(pending()) >= count:
                return pending()
    raise AssertionError(f"the run ended with {len(pending())} pending, not {count}")


def poll_store(db: Path | str, predicate: Callable[[list[Approval]], bool],
               what: str) -> list[Approval]:
    """Poll the store at ``db`` (another process writes it) until ``predicate`` holds for
    its approvals, with a deadline."""
    until = time.monotonic() + DEADLINE
    while True:
        found = cp.approvals(str(db)) if Path(db).exists() else []
        if predicate(found):
            return found
        if time.monotonic() > until:
            raise AssertionError(f"timed out waiting for {what}; approvals: {found}")
        time.sleep(0.05)
