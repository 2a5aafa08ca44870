"""The per-model rate limiter: even pacing, token budgets, pauses, concurrency."""

from __future__ import annotations

import asyncio
import itertools
import time

from counterpoint.models.limits import RateLimiter, limiter_for


def test_requests_are_paced_evenly_not_in_bursts() -> None:
    limiter = RateLimiter(rpm=600)  # one request every 0.1 s
    waits = [limiter._reserve(0) for _ in range(4)]  # four callers arrive at once
    assert waits[0] == 0.0
    for earlier, later in itertools.pairwise(waits):
        assert 0.05 < later - earlier <= 0.1  # each reserved the slot after the last one


def test_slots_follow_each_other_not_the_time_a_sleeper_woke() -> None:
    limiter = RateLimiter(rpm=600)
    limiter._reserve(0)
    second = limiter._reserve(0)
    time.sleep(second + 0.05)  # woke 50 ms late
    third = limiter._reserve(0)
    assert third <= 0.1 - 0.04  # its slot counts from the second's, not from now


def test_token_budget_waits_for_refill_and_settles_with_real_usage() -> None:
    limiter = RateLimiter(tpm=6000)  # 100 tokens/s, a bucket of 10 s = 1000 tokens
    assert limiter._reserve(900) == 0.0
    other = RateLimiter(tpm=6000)
    other._reserve(900)
    assert 1.0 < other._reserve(300) <= 2.0  # 100 left: needs 200 more, at 100 tokens/s
    limiter.settle(estimated=900, actual=100)  # the call used far less than reserved
    assert limiter._reserve(300) == 0.0


def test_a_pause_holds_every_caller() -> None:
    limiter = RateLimiter(rpm=6000)
    limiter.pause(0.5)
    assert 0 < limiter._reserve(0) <= 0.5
    assert limiter._paused()


async def test_concurrency_limit_and_pacing_together() -> None:
    limiter = RateLimiter(max_concurrency=2, rpm=1200)  # 0.05 s apart, two at a time
    active = peak = 0
    starts: list[float] = []

    async def call() -> None:
        nonlocal active, peak
        async with limiter.slot():
            starts.append(time.monotonic())
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.02)
            active -= 1

    await asyncio.gather(*(call() for _ in range(8)))
    assert peak <= 2
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert min(gaps) >= 0.045  # never faster than the limit


def test_one_limiter_per_model_name_shared_by_everyone() -> None:
    a = limiter_for("shared-model", max_concurrency=4, rpm=60, tpm=None)
    assert limiter_for("shared-model", max_concurrency=4, rpm=60, tpm=None) is a
    assert limiter_for("other-model", max_concurrency=4, rpm=60, tpm=None) is not a
