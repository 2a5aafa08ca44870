"""``ManualClock``: a clock for approvals' timeouts that moves only when told to.

Install it with :func:`counterpoint.use_clock` around the start of a run; then
:meth:`ManualClock.advance` moves time on and runs (on the run's event loop) the
timeouts that fell due, so a test of a timeout policy never sleeps.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable


class _Timer:
    __slots__ = ("callback", "cancelled", "loop")

    def __init__(self, callback: Callable[[], None], loop: asyncio.AbstractEventLoop) -> None:
        self.callback = callback
        self.loop = loop
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A :class:`~counterpoint.approval.Clock` whose time moves only by :meth:`advance`."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self._now = start
        self._due: list[tuple[float, int, _Timer]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(callback, asyncio.get_running_loop())
        heapq.heappush(self._due, (self._now + max(delay, 0.0), next(self._order), timer))
        return timer

    @property
    def timers(self) -> int:
        """Timers set and not yet due or cancelled."""
        return sum(1 for _, _, t in self._due if not t.cancelled)

    def advance(self, seconds: float) -> int:
        """Move time on by ``seconds``; the timers that fall due run on their loops (soon,
        not in this call). Returns how many fell due."""
        self._now += seconds
        fired = 0
        while self._due and self._due[0][0] <= self._now:
            _, _, timer = heapq.heappop(self._due)
            if not timer.cancelled:
                fired += 1
                timer.loop.call_soon_threadsafe(timer.callback)
        return fired
