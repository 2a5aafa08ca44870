"""Values kept per event loop, forgotten once their loop is closed.

HTTP clients' connection pools and the model slots' wait queues belong to the event loop
that made them, so counterpoint keeps one of each per loop. A
:class:`weakref.WeakKeyDictionary` keyed by the loop looks right and never forgets
anything: its values refer back to their loop (an open connection's transport, a waiter's
future), so the loop stays reachable from the dictionary itself. A process that runs
``asyncio.run`` once per request or per script step kept every loop it ever ran, with its
sockets and providers, and when one of them was collected at last while another loop ran,
the OpenAI SDK's client closed itself on the wrong loop ("Event loop is closed").

:class:`LoopLocal` holds its values strongly and drops those of closed loops each time it
meets a loop it has not seen, so a process keeps the values of the loops it still has.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["LoopLocal"]

T = TypeVar("T")


class LoopLocal(Generic[T]):
    """One value per event loop, made on its first use in that loop. Safe to use from
    several threads, each with its own loop."""

    __slots__ = ("_lock", "_values")

    def __init__(self) -> None:
        self._values: dict[asyncio.AbstractEventLoop, T] = {}
        self._lock = threading.Lock()

    def get(self, make: Callable[[], T], loop: asyncio.AbstractEventLoop | None = None) -> T:
        """The value of ``loop`` (default: the running loop); ``make()`` if it has none."""
        loop = loop or asyncio.get_running_loop()
        value = self._values.get(loop)
        if value is None:
            with self._lock:
                value = self._values.get(loop)
                if value is None:
                    for closed in [old for old in self._values if old.is_closed()]:
                        del self._values[closed]
                    value = self._values[loop] = make()
        return value
