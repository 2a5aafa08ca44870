"""counterpoint.checks: every user-facing number check refuses a bool, NaN, infinity
and a value below its bound, with one wording."""

from __future__ import annotations

import math
from typing import Any

import pytest

from counterpoint.checks import flag, number, seconds, whole
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


def test_a_fix_ends_the_message_with_what_to_write() -> None:
    with pytest.raises(UserError, match=r"^x must be a finite number > 0, got inf; leave x "
                                        r"unset for no limit$"):
        number(math.inf, "x", above=True, fix="leave x unset for no limit")
    with pytest.raises(UserError, match=r"^n must be >= 1, got 0; leave n unset$"):
        whole(0, "n", least=1, fix="leave n unset")
    with pytest.raises(UserError, match=r"^t must be > 0 seconds \(a number\), got inf; no$"):
        seconds(math.inf, "t", fix="no")


@pytest.mark.parametrize("value", [1, 0, "yes", None])
def test_flag_refuses_what_is_not_a_bool(value: Any) -> None:
    with pytest.raises(UserError, match=r"^f must be True or False, got "):
        flag(value, "f")
    flag(True, "f")
    flag(False, "f")
