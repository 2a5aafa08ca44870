"""Per-model rate limits, shared by every node of every run in the process.

Three limits, each optional: concurrent requests, requests per minute and tokens
per minute. Requests are paced evenly (one every ``60 / rpm`` seconds) rather than
released in bursts, because a server that counts requests over a sliding window
answers a burst with 429s. Both rates are GCRA schedules: a caller reserves its
slot once, in arrival order, and sleeps once until it; slots follow each other
from the previous slot, not from when a sleeper happened to wake, so a late
wake-up costs no throughput and waiting callers cost nothing while they wait.
Tokens are reserved from an estimate (with 10 seconds' worth of burst) and the
difference is settled from the reported usage.

A rate-limited answer (429) pauses every caller of that model until its
``Retry-After``, and then paces them even when no ``rpm`` is configured: callers
are released one at a time, ``SPACING_MARGIN`` times the ``Retry-After`` apart (the
server's own estimate of when one more request passes), so the callers a pause
held back do not all retry at the same instant and fail together. Simultaneous
429s are one signal: only a request made under the current spacing widens it
(doubling, up to ``MAX_SPACING``); each request answered under it halves it, until
the spacing is gone.

The pacing state is plain numbers under a thread lock, so one limiter serves
every event loop of the process; only the concurrency slots are per loop. Who gets a
free slot when calls wait for one is :mod:`.queueing`'s business: by default the
program decides (least estimated work left across workflows, then critical path), not
arrival.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from .. import checks
from ..context import call_owner, record_wait
from ..errors import RateLimited
from ..loop_local import LoopLocal
from .queueing import QueueOrder, SlotQueue

SPACING_MARGIN = 1.25
"""Requests after a 429 are spaced this many times its ``Retry-After`` apart."""
DEFAULT_SPACING = 0.1
"""Spacing after a 429 that says nothing about when to retry, in seconds."""
MAX_SPACING = 10.0
"""The widest spacing a run of 429s can make, in seconds."""
MIN_SPACING = 0.001
"""A spacing halved below this is dropped."""


def check_limits(max_concurrency: object, rpm: object, tpm: object, prefix: str) -> None:
    """Refuse a limit that limits nothing sensible (0, a negative, NaN, infinity, ``True``,
    a string), each named after ``prefix`` (``RateLimiter.``, ``model 'fast': ``): ``None``
    is no limit, and the message says so."""
    if max_concurrency is not None:
        checks.whole(max_concurrency, f"{prefix}max_concurrency", least=1,
                     fix="leave max_concurrency unset for no limit")
    for key, rate in (("rpm", rpm), ("tpm", tpm)):
        if rate is not None:
            checks.number(rate, f"{prefix}{key}", above=True,
                          fix=f"leave {key} unset for no limit")


@dataclass(frozen=True, slots=True)
class Reservation:
    """A request slot: how long to wait for it, and the pacing it was given under."""

    delay: float
    """Seconds from the reservation until the request may go."""
    epoch: int
    """How many times the spacing had widened when the slot was reserved."""


class RateLimiter:
    """Limits for one model. Safe to use from any task, thread or event loop.

    ``clock`` gives monotonic seconds (injectable so pacing can be tested without
    waiting).
    """

    def __init__(self, *, max_concurrency: int | None = None, rpm: float | None = None,
                 tpm: float | None = None, order: QueueOrder = "program",
                 clock: Callable[[], float] = time.monotonic) -> None:
        check_limits(max_concurrency, rpm, tpm, "RateLimiter.")
        self.max_concurrency = max_concurrency
        self.order = order
        """How calls waiting for a concurrent slot are served (see :mod:`.queueing`)."""
        self.rpm = rpm
        self.tpm = tpm
        self._clock = clock
        self._lock = threading.Lock()
        self._next_request = 0.0  # monotonic time the next request may go (GCRA)
        self._token_tat = 0.0  # when the tokens reserved so far are paid off (GCRA)
        self._paused_until = 0.0
        self._spacing = 0.0  # seconds between requests learned from 429s (0: none)
        self._epoch = 0  # times the spacing widened: tells a fresh 429 from a stale one
        self._queues: LoopLocal[SlotQueue] = LoopLocal()
        self.waited = 0.0
        """Total seconds callers spent waiting for these limits (for metrics)."""

    @asynccontextmanager
    async def slot(self, tokens: int = 0) -> AsyncIterator[Reservation]:
        """Hold one request slot; ``tokens`` is the call's estimated token count.

        A :class:`~counterpoint.errors.RateLimited` raised inside the block pauses and
        paces every caller (see the module docstring); leaving it normally counts as
        an answer.
        """
        queue = self._queue()
        owner = granted = None
        waited = False
        if queue is not None:
            owner = call_owner()
            if waited := queue.busy():  # every slot is taken: the wait is the node's, not work
                asked = time.perf_counter()
                granted = await queue.acquire(owner)
                record_wait("model", granted - asked)
            else:
                granted = await queue.acquire(owner)
        try:
            while True:
                reservation = self._reserve(tokens)
                if reservation.delay > 0:
                    self.waited += reservation.delay
                    record_wait("model", reservation.delay)
                    await asyncio.sleep(reservation.delay)
                if not self._paused():
                    break  # a pause that began while we slept takes a new slot after it
            try:
                yield reservation
            except RateLimited as exc:
                self.rejected(reservation, exc.retry_after)
                raise
            self.answered(reservation)
        finally:
            if queue is not None and granted is not None:
                queue.release(owner, granted, waited=waited)

    def _queue(self) -> SlotQueue | None:
        if self.max_concurrency is None:
            return None
        size, order = self.max_concurrency, self.order
        return self._queues.get(lambda: SlotQueue(size, order))

    def _paused(self) -> bool:
        with self._lock:
            return self._clock() < self._paused_until

    def _reserve(self, tokens: int) -> Reservation:
        """Reserve the earliest slot the limits allow."""
        with self._lock:
            now = self._clock()
            at = max(now, self._paused_until)
            if self.tpm:
                rate = self.tpm / 60
                # the bucket holds 10 s of tokens: a call may start once the schedule is
                # less than 10 s ahead; a call bigger than the bucket waits for a full one
                cost = min(tokens, rate * 10) / rate
                at = max(at, self._token_tat - 10.0 + cost)
            spacing = max(60 / self.rpm if self.rpm else 0.0, self._spacing)
            if spacing:
                at = max(at, self._next_request)
                self._next_request = at + spacing
            if self.tpm:
                self._token_tat = max(self._token_tat, at) + tokens / (self.tpm / 60)
            return Reservation(at - now, self._epoch)

    def settle(self, estimated: int, actual: int) -> None:
        """Correct the token schedule once the call's real usage is known."""
        if self.tpm and actual:
            with self._lock:
                self._token_tat += (actual - estimated) / (self.tpm / 60)

    def pause(self, seconds: float) -> None:
        """Hold every caller back for ``seconds`` (the provider said to wait)."""
        with self._lock:
            self._pause(seconds)

    def _pause(self, seconds: float) -> None:
        until = self._clock() + seconds
        self._paused_until = max(self._paused_until, until)
        self._next_request = max(self._next_request, until)

    def rejected(self, reservation: Reservation, retry_after: float | None) -> None:
        """The request made in ``reservation`` was rate limited: pause, and pace.

        Only a request reserved under the current spacing widens it: the other
        requests that were in flight with it carry the same news.
        """
        with self._lock:
            if retry_after:
                self._pause(retry_after)
            if reservation.epoch == self._epoch:
                fresh = retry_after * SPACING_MARGIN if retry_after else DEFAULT_SPACING
                self._spacing = min(MAX_SPACING, max(self._spacing * 2, fresh))
                self._epoch += 1

    def answered(self, reservation: Reservation) -> None:
        """The request made in ``reservation`` was answered: narrow the spacing."""
        with self._lock:
            if self._spacing and reservation.epoch == self._epoch:
                half = self._spacing / 2
                self._spacing = half if half >= MIN_SPACING else 0.0


_LIMITERS: dict[str, RateLimiter] = {}
_OWNED: weakref.WeakKeyDictionary[object, RateLimiter] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()


def limiter_for(name: str, *, max_concurrency: int | None, rpm: float | None,
                tpm: float | None, order: QueueOrder = "program",
                owner: object | None = None) -> RateLimiter:
    """The process-wide limiter of model ``name`` (created with these limits on first use).

    With ``owner`` (a provider object), the limiter belongs to that object and is
    dropped with it instead of being kept by name.
    """
    check_limits(max_concurrency, rpm, tpm, f"model {name.partition('|')[0]!r}: ")
    with _REGISTRY_LOCK:
        limiter = _LIMITERS.get(name) if owner is None else _OWNED.get(owner)
        if limiter is None or (limiter.max_concurrency, limiter.rpm, limiter.tpm,
                               limiter.order) != (max_concurrency, rpm, tpm, order):
            limiter = RateLimiter(max_concurrency=max_concurrency, rpm=rpm, tpm=tpm,
                                  order=order)
            if owner is None:
                _LIMITERS[name] = limiter
            else:
                _OWNED[owner] = limiter
        return limiter
