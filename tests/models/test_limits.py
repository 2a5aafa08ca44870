"""The per-model rate limiter: even pacing, token budgets, pauses, concurrency, and
recovering from a provider's rate limit without a retry storm.

Pacing is checked on the limiter's reservations with an injected clock, so no test
sleeps or reads the wall clock; the storm is reproduced end to end against the
local OpenAI server's real rate limit.
"""

from __future__ import annotations

import asyncio
import itertools
import math

import pytest

from counterpoint.errors import UserError
from counterpoint.models import Model
from counterpoint.models.config import ModelConfig, ModelRegistry
from counterpoint.models.limits import RateLimiter, limiter_for
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.policy import Backoff
from counterpoint.testing import OpenAIServer


class Clock:
    """A clock tests move by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_requests_are_paced_evenly_not_in_bursts() -> None:
    limiter = RateLimiter(rpm=600, clock=Clock())  # one request every 0.1 s
    waits = [limiter._reserve(0).delay for _ in range(4)]  # four callers arrive at once
    assert waits[0] == 0.0
    assert all(abs(later - earlier - 0.1) < 1e-9 for earlier, later in itertools.pairwise(waits))


def test_slots_follow_each_other_not_the_time_a_sleeper_woke() -> None:
    clock = Clock()
    limiter = RateLimiter(rpm=600, clock=clock)
    limiter._reserve(0)
    second = limiter._reserve(0).delay
    clock.now += second + 0.05  # the second caller woke 50 ms late
    third = limiter._reserve(0).delay
    assert abs(third - 0.05) < 1e-9  # its slot counts from the second's, not from now


def test_token_budget_waits_for_refill_and_settles_with_real_usage() -> None:
    limiter = RateLimiter(tpm=6000, clock=Clock())  # 100 tokens/s, a bucket of 1000
    assert limiter._reserve(900).delay == 0.0
    other = RateLimiter(tpm=6000, clock=Clock())
    other._reserve(900)
    assert abs(other._reserve(300).delay - 2.0) < 1e-9  # 100 left, 200 more at 100/s
    limiter.settle(estimated=900, actual=100)  # the call used far less than reserved
    assert limiter._reserve(300).delay == 0.0


def test_a_pause_holds_every_caller() -> None:
    limiter = RateLimiter(rpm=6000, clock=Clock())
    limiter.pause(0.5)
    assert limiter._reserve(0).delay == 0.5
    assert limiter._paused()


def _storm(limiter: RateLimiter, clock: Clock, callers: int, retry_after: float) -> list[float]:
    """``callers`` requests at once; all but the first are rate limited. When do the
    rejected ones go again, if each asks after sleeping ``retry_after``?"""
    first = [limiter._reserve(0) for _ in range(callers)]
    clock.now += 0.01  # the answers arrive
    limiter.answered(first[0])
    for reservation in first[1:]:
        limiter.rejected(reservation, retry_after)
    clock.now += retry_after
    start = clock.now
    return [start + limiter._reserve(0).delay for _ in range(callers - 1)]


def test_callers_paused_by_a_rate_limit_are_released_one_at_a_time() -> None:
    clock = Clock()
    limiter = RateLimiter(clock=clock)  # no rpm configured: nothing paces by default
    starts = _storm(limiter, clock, callers=8, retry_after=1.0)
    assert starts[0] == clock.now
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    # released at the rate the server allows, not all at once when the pause ends;
    # seven simultaneous 429s are one signal, so the spacing does not compound
    assert all(1.0 <= gap <= 2.0 for gap in gaps), gaps


def test_the_spacing_fades_once_the_provider_answers_again() -> None:
    clock = Clock()
    limiter = RateLimiter(clock=clock)
    _storm(limiter, clock, callers=3, retry_after=1.0)
    clock.now += 10
    for _ in range(20):  # requests made after the rate limit, answered
        limiter.answered(limiter._reserve(0))
        clock.now += 0.001
    assert [limiter._reserve(0).delay for _ in range(3)] == [0.0, 0.0, 0.0]


def test_a_configured_rate_is_kept_as_the_floor_of_the_spacing() -> None:
    clock = Clock()
    limiter = RateLimiter(rpm=6, clock=clock)  # 10 s apart, more than the server asks
    starts = _storm(limiter, clock, callers=3, retry_after=1.0)
    assert starts[1] - starts[0] >= 10.0


async def test_concurrency_limit_is_held_across_the_slot() -> None:
    limiter = RateLimiter(max_concurrency=2)
    active = peak = 0

    async def call() -> None:
        nonlocal active, peak
        async with limiter.slot():
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            active -= 1

    await asyncio.gather(*(call() for _ in range(8)))
    assert peak == 2


def test_one_limiter_per_model_name_shared_by_everyone() -> None:
    a = limiter_for("shared-model", max_concurrency=4, rpm=60, tpm=None)
    assert limiter_for("shared-model", max_concurrency=4, rpm=60, tpm=None) is a
    assert limiter_for("other-model", max_concurrency=4, rpm=60, tpm=None) is not a


async def test_parallel_callers_recover_from_a_servers_rate_limit_without_a_storm() -> None:
    # The server allows one request every 0.2 s and says so in Retry-After; backoff is
    # shorter than that, so every rejected caller waits exactly what the server said.
    backoff = Backoff(initial=0.01, factor=2.0, maximum=0.05, jitter=0.0)
    with OpenAIServer(rate_limit_rpm=300, rate_limit_burst=1) as server:
        model = Model(OpenAIProvider("limited", "gpt-test", base_url=server.base_url),
                      cache=False, backoff=backoff)  # the default: 3 retries
        results = await asyncio.gather(*(model.generate(f"question {i}") for i in range(8)),
                                       return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, failures
    assert sorted(r.text for r in results if not isinstance(r, BaseException)) == \
        sorted(f"echo: question {i}" for i in range(8))


@pytest.mark.parametrize(("limits", "said"), [
    ({"max_concurrency": 0}, "max_concurrency must be >= 1, got 0; leave max_concurrency "
                             "unset for no limit"),
    ({"max_concurrency": True}, "max_concurrency must be a whole number >= 1, got True "
                                "(bool); leave max_concurrency unset for no limit"),
    ({"rpm": math.nan}, "rpm must be a finite number > 0, got nan; leave rpm unset for no limit"),
    ({"rpm": math.inf}, "rpm must be a finite number > 0, got inf; leave rpm unset for no limit"),
    ({"tpm": -1}, "tpm must be a finite number > 0, got -1; leave tpm unset for no limit"),
    ({"tpm": "1000"}, "tpm must be a finite number > 0, got '1000'; leave tpm unset for no "
                         "limit"),
])
def test_a_limit_that_limits_nothing_sensible_is_refused(limits: dict[str, object],
                                                        said: str) -> None:
    with pytest.raises(UserError) as caught:
        RateLimiter(**limits)  # type: ignore[arg-type]
    assert str(caught.value) == f"RateLimiter.{said}"
    options: dict[str, object] = {"max_concurrency": None, "rpm": None, "tpm": None, **limits}
    with pytest.raises(UserError) as caught:
        limiter_for("fast", **options)  # type: ignore[arg-type]
    assert str(caught.value) == f"model 'fast': {said}"


def test_a_models_own_bad_limit_is_refused_when_the_model_is_made() -> None:
    # Model(...) checks its own limits now (tests/models/test_model_options.py); before,
    # its limiter refused them at the first call
    config = ModelConfig(name="fast", provider="openai", model="m",
                         base_url="http://127.0.0.1:9/v1")
    with pytest.raises(UserError, match=r"^Model\(rpm=\.\.\.\) must be a finite number > 0, "
                                        r"got nan; leave it unset for no limit$"):
        Model("fast", registry=ModelRegistry({"fast": config}), rpm=math.nan, cache=False)
