"""Small steps the runtime's tests share (tests/scheduler, tests/backends).

They are module-level functions, so a Ray worker imports them by name instead of
unpickling a copy of a closure.
"""

from __future__ import annotations

import asyncio
from typing import Any

import counterpoint as cp


def run(graph: cp.Graph, **kwargs: Any) -> cp.RunResult:
    """``run_sync`` on a memory store unless the test names another."""
    kwargs.setdefault("store", "memory")
    return cp.run_sync(graph, **kwargs)


async def const(value: Any = 1) -> Any:
    return value


async def add(a: int, b: int) -> int:
    return a + b


async def sleep_then(seconds: float, value: Any = None) -> Any:
    await asyncio.sleep(seconds)
    return value
