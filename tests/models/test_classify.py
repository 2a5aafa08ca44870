"""``Retry-After`` is read defensively: a header the provider got wrong never raises.

Seconds and HTTP dates are honoured (a date with an injected clock); a value that is
neither, a negative number or NaN is ignored; a huge one is capped.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator

import pytest

from counterpoint.errors import RateLimited
from counterpoint.models import classify

NOW = 1_700_000_000.0


def _clock() -> float:
    return NOW


@pytest.mark.parametrize("value", ["soon", "", "  ", "-5", "nan", "1.2.3", "Fri, 99 Foo"])
def test_an_unreadable_retry_after_is_ignored(value: str) -> None:
    assert classify.retry_after({"Retry-After": value}) is None
    error = classify.from_status("m", 429, "slow down", {"retry-after": value})
    assert isinstance(error, RateLimited) and error.retry_after is None


def test_seconds_and_milliseconds() -> None:
    assert classify.retry_after({"Retry-After": "2"}) == 2.0
    assert classify.retry_after({"retry-after": "0.25"}) == 0.25
    assert classify.retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert classify.retry_after({"retry-after-ms": "bogus", "retry-after": "3"}) == 3.0


@pytest.fixture
def far_from_gmt(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A local time zone that is not GMT: an HTTP date must never be read as local time."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("far_from_gmt")
def test_an_http_date_counts_from_now() -> None:
    date = email.utils.formatdate(NOW + 30, usegmt=True)
    assert classify.retry_after({"Retry-After": date}, now=_clock) == pytest.approx(30.0)
    past = email.utils.formatdate(NOW - 30, usegmt=True)
    assert classify.retry_after({"Retry-After": past}, now=_clock) == 0.0
    naive = email.utils.formatdate(NOW + 10).replace("-0000", "").strip()  # no zone: GMT
    assert classify.retry_after({"Retry-After": naive}, now=_clock) == pytest.approx(10.0)


def test_a_huge_retry_after_is_capped() -> None:
    assert classify.retry_after({"Retry-After": "86400"}) == classify.MAX_RETRY_AFTER
    assert classify.retry_after({"Retry-After": "inf"}) == classify.MAX_RETRY_AFTER
    far = email.utils.formatdate(NOW + 10 ** 7, usegmt=True)
    assert classify.retry_after({"Retry-After": far}, now=_clock) == classify.MAX_RETRY_AFTER
