"""The execution-backend seam: where a node's callable runs.

A backend decides *where* a call executes, never *what* it means: it receives
the callable and its keyword arguments and returns the result or raises.
:class:`InProcessBackend` awaits coroutine functions on the run's event loop
and runs plain functions in a worker thread, so they never block the loop.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol


class Backend(Protocol):
    """Executes node callables. Must be safe to call concurrently from one event loop."""

    async def call(self, fn: Callable[..., Any], kwargs: dict[str, Any], *,
                   is_async: bool) -> Any:
        """Run ``fn(**kwargs)`` and return its result; cancellation must propagate."""
        ...


class InProcessBackend:
    """Runs async steps on the loop and sync steps in a thread pool of ``threads`` workers."""

    def __init__(self, threads: int | None = None) -> None:
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None

    async def call(self, fn: Callable[..., Any], kwargs: dict[str, Any], *,
                   is_async: bool) -> Any:
        if is_async:
            return await fn(**kwargs)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self._threads or 32,
                                            thread_name_prefix="counterpoint-step")
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._pool, functools.partial(fn, **kwargs))
        if inspect.isawaitable(result):
            return await result
        return result

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


DEFAULT_BACKEND = InProcessBackend()
"""The backend of runs that name none: one thread pool for the sync steps of the process."""
