"""Things a run opens once and closes when it ends: server processes, connections.

A :class:`Resources` holds async context managers that are entered lazily, at the
first :meth:`Resources.get` for their key, and exited together by
:meth:`Resources.close`. Each one is entered and exited in a task of its own (its
*keeper*), because the context managers this is for (an MCP client, built on anyio)
must be exited in the task that entered them, while the tasks that use them (node
attempts) come and go. The run closes its resources when it ends, on success, failure,
cancellation or a crash of a step alike, so nothing it opened outlives it.

Safe to call from many tasks of one event loop at once; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Hashable
from contextlib import AbstractAsyncContextManager
from typing import Any

_log = logging.getLogger(__name__)

CLOSE_SECONDS = 15.0
"""How long :meth:`Resources.close` waits for a resource to close before cancelling it
(an MCP stdio server gets a few seconds to exit, then is killed: well under this)."""


class ResourcesClosed(RuntimeError):
    """:meth:`Resources.get` after :meth:`Resources.close`: the owner has ended."""


class _Kept:
    """One resource and the task that holds it open."""

    def __init__(self, opener: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[Any] = loop.create_future()
        self.stop = asyncio.Event()
        self.task = loop.create_task(self._keep(opener))

    async def _keep(self, opener: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
        try:
            async with opener() as value:
                self.ready.set_result(value)
                await self.stop.wait()
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)
            elif not isinstance(exc, asyncio.CancelledError):
                _log.warning("a run resource failed while closing: %s", exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            if self.ready.done() and not self.ready.cancelled():
                self.ready.exception()  # retrieved: a failed open nobody awaited is no warning

    @property
    def broken(self) -> bool:
        """Whether the resource failed to open, or closed before it was asked to."""
        return self.task.done() and not self.stop.is_set()


class Resources:
    """Resources opened at first use and closed together (see the module docstring)."""

    def __init__(self) -> None:
        self._kept: dict[Hashable, _Kept] = {}
        self._closed = False

    async def get(self, key: Hashable,
                  opener: Callable[[], AbstractAsyncContextManager[Any]]) -> Any:
        """The value ``opener()`` entered for ``key``: opened by the first call, shared by
        the next ones until :meth:`close`.

        Raises what opening raised (the next call tries again), and
        :class:`ResourcesClosed` once closed. Cancelling a caller does not cancel the
        opening others wait for.
        """
        if self._closed:
            raise ResourcesClosed("the run that owns this resource has ended")
        kept = self._kept.get(key)
        if kept is None or kept.broken:
            kept = self._kept[key] = _Kept(opener)
        return await asyncio.shield(kept.ready)

    def __contains__(self, key: Hashable) -> bool:
        kept = self._kept.get(key)
        return kept is not None and not kept.broken

    async def close(self) -> None:
        """Close every resource (in parallel), waiting for each; idempotent.

        A resource that does not close within :data:`CLOSE_SECONDS` is cancelled.
        """
        self._closed = True
        kept, self._kept = list(self._kept.values()), {}
        if not kept:
            return
        for each in kept:
            each.stop.set()
        tasks = {each.task for each in kept}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CLOSE_SECONDS
        cancelled = False
        while tasks and loop.time() < deadline:
            # a cancelled caller still waits (boundedly): a half-closed server would leak
            try:
                _, tasks = await asyncio.wait(tasks, timeout=deadline - loop.time())
            except asyncio.CancelledError:
                cancelled = True
        for task in tasks:
            task.cancel()
        if tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait(tasks)
        if cancelled:
            raise asyncio.CancelledError
