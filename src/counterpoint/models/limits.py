"""Per-model rate limits, shared by every node of every run in the process.

Three limits, each optional: concurrent requests, requests per minute and tokens
per minute. Requests are paced evenly (one every ``60 / rpm`` seconds, GCRA) rather
than released in bursts, because a server that counts requests over a sliding
window answers a burst with 429s. Tokens are reserved up front from an estimate
and the difference is settled from the reported usage. A 429 with ``Retry-After``
pauses every caller of that model, not only the one that got it.

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
        self._tokens = tpm / 60 * 10 if tpm else 0.0  # a bucket holding 10 s of tokens
        self._tokens_at = time.monotonic()
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
                if delay <= 0:
                    break
                self.waited += delay
                await asyncio.sleep(delay)
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

    def _reserve(self, tokens: int) -> float:
        """Take a request (and ``tokens``) now if the limits allow; else how long to wait."""
        with self._lock:
            now = time.monotonic()
            if now < self._paused_until:
                return self._paused_until - now
            if self.tpm:
                rate = self.tpm / 60
                self._tokens = min(rate * 10, self._tokens + (now - self._tokens_at) * rate)
                self._tokens_at = now
                need = min(tokens, rate * 10)  # a call bigger than the bucket waits for a full one
                if self._tokens < need:
                    return (need - self._tokens) / rate
            if self.rpm:
                if now < self._next_request:
                    return self._next_request - now
                self._next_request = max(now, self._next_request) + 60 / self.rpm
            if self.tpm:
                self._tokens -= tokens
            return 0.0

    def settle(self, estimated: int, actual: int) -> None:
        """Correct the token bucket once the call's real usage is known."""
        if self.tpm and actual:
            with self._lock:
                self._tokens += estimated - actual

    def pause(self, seconds: float) -> None:
        """Hold every caller back for ``seconds`` (the provider said to wait)."""
        with self._lock:
            self._paused_until = max(self._paused_until, time.monotonic() + seconds)


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
