"""An asyncio event loop whose timers fire on time, for processes counterpoint owns.

asyncio's default loop on Linux waits with ``epoll_wait``, whose timeout is in whole
milliseconds: every wait for a timer is rounded *up* to the next millisecond, so each
``asyncio.sleep`` (a node's ``timeout``, a retry's backoff, a step that waits) ends on
average about 0.5 ms late, plus the kernel's wake-up latency. On a graph whose critical
path is a chain of short steps those half-milliseconds add up: on a layered DAG of 500
nodes of 1-20 ms each they were about 6% of the makespan, for hand-written asyncio as
for any scheduler running on it.

:class:`PreciseSelector` waits for the same epoll descriptor with ``select``, whose timeout
has microsecond resolution, then collects the events with a non-blocking ``epoll_wait``.
It costs one more system call per wait and changes nothing else: the loop is the
standard :class:`asyncio.SelectorEventLoop`, with every socket, pipe and subprocess
feature it has. Elsewhere (kqueue on macOS and BSD has nanosecond timeouts) the loop
is the platform's default.

counterpoint uses :func:`new_event_loop` where it owns the loop: the ``counterpoint``
command line and :func:`counterpoint.run_sync`. Code that runs workflows in its own
loop can create it the same way (``asyncio.Runner(loop_factory=cp.new_event_loop)``, or
``asyncio.set_event_loop_policy(cp.EventLoopPolicy())`` before ``asyncio.run``).
Set ``COUNTERPOINT_LOOP=default`` to use asyncio's default loop everywhere.
"""

from __future__ import annotations

import asyncio
import os
import select
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["EventLoopPolicy", "PreciseSelector", "new_event_loop", "run"]

_SELECT_LIMIT = 1024
"""``select`` takes descriptors below FD_SETSIZE only (1024 on Linux)."""


if hasattr(selectors, "EpollSelector"):

    class PreciseSelector(selectors.EpollSelector):
        """An epoll selector that waits with microsecond resolution (see the module)."""

        def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
            if timeout is not None and timeout > 0:
                fd = self.fileno()
                if fd < _SELECT_LIMIT:  # until the epoll fd is readable (an event) or timeout
                    select.select((fd,), (), (), timeout)  # (retried on EINTR: PEP 475)
                    timeout = 0
            return super().select(timeout)

else:  # pragma: no cover - kqueue and the others already wait precisely
    PreciseSelector = None  # type: ignore[assignment,misc]


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop with precise timers where the platform needs it (see the module);
    asyncio's default loop if ``COUNTERPOINT_LOOP=default`` or on other platforms."""
    if PreciseSelector is None or \
            os.environ.get("COUNTERPOINT_LOOP", "").strip().lower() == "default":
        return asyncio.new_event_loop()
    return asyncio.SelectorEventLoop(PreciseSelector())


def run(main: Coroutine[Any, Any, T]) -> T:
    """:func:`asyncio.run` on a loop from :func:`new_event_loop`."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)


class EventLoopPolicy(asyncio.DefaultEventLoopPolicy):
    """The default policy, with loops from :func:`new_event_loop` (for ``asyncio.run``)."""

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return new_event_loop()
