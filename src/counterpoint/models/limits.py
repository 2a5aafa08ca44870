"""Per-model rate limits, shared by every node of every run in the process.

Three limits, each optional: concurrent requests, requests per minute and tokens
per minute. Requests are paced evenly (one every ``60 / rpm`` seconds) rather than
released in bursts, because a server that counts requests over a sliding window
answers a burst with 429s. Both rates are GCRA schedules: a caller reserves its
slot once, in arrival order, and sleeps once until it; slots follow each other
from the previous slot, not from when a sleeper happened to wake, so a late
wake-up costs no throughput and waiting callers cost nothing while they wait.
Tokens are reserved from an estimate (with 10 seconds' worth of burst) and the
difference is settled from the reported usage. A 429 with ``Retry-After`` pauses
every caller of that model, not only the one that got it.

The pacing state is plain numbers under a thread lock, so one limiter serves
every event loop of the process; only the concurrency semaphore is per loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class RateLimiter:
    """Limits for one model. Safe to use from any task, thread or event loop."""

    def __init__(self, *, max_concurrency: int | None = None, rpm: float | None = None,
                 tpm: float | None = None) -> None:
        self.max_concurrency = max_concurrency
        self.rpm = rpm
        self.tpm = tpm
        self._lock = threading.Lock()
        self._next_request = 0.0  # monotonic time the next request may go (GCRA)
        self._token_tat = 0.0  # when the tokens reserved so far are paid off (GCRA)
        self._paused_until = 0.0
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop,
                                                    asyncio.Semaphore] = \
            weakref.WeakKeyDictionary()
        self.waited = 0.0
        """Total seconds callers spent waiting for these limits (for metrics)."""

    @asynccontextmanager
    async def slot(self, tokens: int = 0) -> AsyncIterator[None]:
        """Hold one request slot; ``tokens`` is the call's estimated token count."""
        semaphore = self._semaphore()
        if semaphore is not None:
            await semaphore.acquire()
        try:
            while True:
                delay = self._reserve(tokens)
                if delay > 0:
                    self.waited += delay
                    await asyncio.sleep(delay)
                if not self._paused():
                    break  # a pause that began while we slept takes a new slot after it
            yield
        finally:
            if semaphore is not None:
                semaphore.release()

    def _semaphore(self) -> asyncio.Semaphore | None:
        if self.max_concurrency is None:
            return None
        loop = asyncio.get_running_loop()
        semaphore = self._semaphores.get(loop)
        if semaphore is None:
            semaphore = self._semaphores[loop] = asyncio.Semaphore(self.max_concurrency)
        return semaphore

    def _paused(self) -> bool:
        with self._lock:
            return time.monotonic() < self._paused_until

    def _reserve(self, tokens: int) -> float:
        """Reserve the earliest slot the limits allow; returns how long to wait for it."""
        with self._lock:
            now = time.monotonic()
            at = max(now, self._paused_until)
            if self.tpm:
                rate = self.tpm / 60
                # the bucket holds 10 s of tokens: a call may start once the schedule is
                # less than 10 s ahead; a call bigger than the bucket waits for a full one
                cost = min(tokens, rate * 10) / rate
                at = max(at, self._token_tat - 10.0 + cost)
            if self.rpm:
                at = max(at, self._next_request)
                self._next_request = at + 60 / self.rpm
            if self.tpm:
                self._token_tat = max(self._token_tat, at) + tokens / (self.tpm / 60)
            return at - now

    def settle(self, estimated: int, actual: int) -> None:
        """Correct the token schedule once the call's real usage is known."""
        if self.tpm and actual:
            with self._lock:
                self._token_tat += (actual - estimated) / (self.tpm / 60)

    def pause(self, seconds: float) -> None:
        """Hold every caller back for ``seconds`` (the provider said to wait)."""
        with self._lock:
            until = time.monotonic() + seconds
            self._paused_until = max(self._paused_until, until)
            self._next_request = max(self._next_request, until)


_LIMITERS: dict[str, RateLimiter] = {}
_REGISTRY_LOCK = threading.Lock()


def limiter_for(name: str, *, max_concurrency: int | None, rpm: float | None,
                tpm: float | None) -> RateLimiter:
    """The process-wide limiter of model ``name`` (created with these limits on first use)."""
    with _REGISTRY_LOCK:
        limiter = _LIMITERS.get(name)
        if limiter is None or (limiter.max_concurrency, limiter.rpm, limiter.tpm) != \
                (max_concurrency, rpm, tpm):
            limiter = _LIMITERS[name] = RateLimiter(max_concurrency=max_concurrency,
                                                    rpm=rpm, tpm=tpm)
        return limiter
