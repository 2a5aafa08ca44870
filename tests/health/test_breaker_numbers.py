"""BreakerOptions' numbers are checked as every option's are (counterpoint.checks): a
bool, NaN, infinity or a value out of range is named by its key, all in one error."""

from __future__ import annotations

import math
from typing import Any

import pytest

from counterpoint.errors import UserError
from counterpoint.health.breaker import BreakerOptions


@pytest.mark.parametrize(("options", "said"), [
    ({"failures": True}, "failures must be a whole number >= 1, got True (bool)"),
    ({"failures": 2.5}, "failures must be a whole number >= 1, got 2.5 (float)"),
    ({"error_rate": math.nan}, "error_rate must be a finite number in (0, 1], got nan"),
    ({"slow_rate": True}, "slow_rate must be a finite number in (0, 1], got True"),
    ({"slow_call": math.nan}, "slow_call must be > 0 seconds (a number), got nan"),
    ({"open_for": math.inf}, "open_for must be a finite number >= 0, got inf"),
    ({"open_for": -1}, "open_for must be a finite number >= 0, got -1"),
    ({"probes": 0}, "probes must be >= 1, got 0"),
    ({"window": 5, "min_calls": 10}, "need window >= 1 and 1 <= min_calls <= window, got "
                                     "window=5, min_calls=10"),
])
def test_a_bad_setting_is_named(options: dict[str, Any], said: str) -> None:
    with pytest.raises(UserError) as caught:
        BreakerOptions(**options)
    assert str(caught.value) == f"BreakerOptions: {said}"


def test_every_bad_setting_is_named_at_once() -> None:
    with pytest.raises(UserError) as caught:
        BreakerOptions(failures=0, open_for=math.nan)
    assert str(caught.value) == ("BreakerOptions: failures must be >= 1, got 0; open_for "
                                 "must be a finite number >= 0, got nan")
