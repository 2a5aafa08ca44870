"""The execution-backend seam: where a node's callable runs.

A backend decides *where* a call executes, never *what* it means: it receives
the callable and its keyword arguments and returns the result or raises.
:class:`InProcessBackend` awaits coroutine functions on the run's event loop
and runs plain functions in a worker thread, so they never block the loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from .context import record_wait

THREAD_WAIT_FLOOR = 0.001
"""Seconds a sync step must wait for a worker thread before the wait is recorded (shorter
waits are the pool's own hand-over, not a shortage of threads)."""


class Backend(Protocol):
    """Executes node callables. Must be safe to call concurrently from one event loop."""

    async def call(self, fn: Callable[..., Any], kwargs: dict[str, Any], *,
                   is_async: bool) -> Any:
        """Run ``fn(**kwargs)`` and return its result; cancellation must propagate."""
        ...


def default_threads() -> int:
    """Worker threads for sync steps: ``$COUNTERPOINT_THREADS``, else 32."""
    value = os.environ.get("COUNTERPOINT_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else 32


class InProcessBackend:
    """Runs async steps on the loop and sync steps in a thread pool of ``threads`` workers
    (default :func:`default_threads`).

    A sync step that waits for a free worker records the wait (``thread``) in its node's
    timings, so a run short of threads shows it instead of counting the wait as running.
    """

    def __init__(self, threads: int | None = None) -> None:
        if threads is not None and threads < 1:
            raise ValueError(f"InProcessBackend needs at least one thread, got {threads}")
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @property
    def threads(self) -> int:
        """How many worker threads sync steps share."""
        return self._threads or default_threads()

    async def call(self, fn: Callable[..., Any], kwargs: dict[str, Any], *,
                   is_async: bool) -> Any:
        if is_async:
            return await fn(**kwargs)
        pool = self._pool
        if pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=self.threads,
                                                    thread_name_prefix="counterpoint-step")
                pool = self._pool
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()  # the step sees its node, as an async one does
        began: list[float] = []

        def job() -> Any:
            began.append(time.perf_counter())
            return context.run(fn, **kwargs)

        submitted = time.perf_counter()
        result = await loop.run_in_executor(pool, job)
        if began and began[0] - submitted >= THREAD_WAIT_FLOOR:
            record_wait("thread", began[0] - submitted)
        if inspect.isawaitable(result):
            return await result
        return result

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


DEFAULT_BACKEND = InProcessBackend()
"""The backend of runs that name none: one thread pool for the sync steps of the process."""
