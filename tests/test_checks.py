"""counterpoint.checks: every user-facing number check refuses a bool, NaN, infinity
and a value below its bound, with one wording."""

from __future__ import annotations

import math
from typing import Any

import pytest

from counterpoint.checks import number, seconds, whole
from counterpoint.errors import UserError


@pytest.mark.parametrize("value", [True, False, "3", 2.5, None])
def test_whole_refuses_what_is_not_an_int(value: Any) -> None:
    with pytest.raises(UserError, match=r"^n must be a whole number >= 1, got "):
        whole(value, "n", least=1)


@pytest.mark.parametrize("value", [True, "5", 0, -1, math.nan, math.inf, -math.inf])
def test_seconds_refuses_what_is_not_a_finite_positive_number(value: Any) -> None:
    with pytest.raises(UserError, match=r"^t must be > 0 seconds \(a number\), got "):
        seconds(value, "t")


@pytest.mark.parametrize("value", [True, "0.5", -0.1, math.nan, math.inf, -math.inf, None])
def test_number_refuses_bool_nan_inf_and_negatives(value: Any) -> None:
    with pytest.raises(UserError, match=r"^x must be a finite number >= 0, got "):
        number(value, "x")


def test_number_bounds_are_said_as_checked() -> None:
    with pytest.raises(UserError, match=r"^r must be a finite number in \(0, 1\], got 0$"):
        number(0, "r", above=True, most=1)
    with pytest.raises(UserError, match=r"^r must be a finite number > 0, got 0.0$"):
        number(0.0, "r", above=True)
    for fine in (0, 0.5, 1):
        number(fine, "r", most=1)
    whole(3, "n", least=1)
    seconds(0.5, "t")
