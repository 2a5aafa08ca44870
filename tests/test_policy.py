"""Policy and Backoff refuse numbers that make no sense, saying what to write instead."""

from __future__ import annotations

import math
import random

import pytest

import counterpoint as cp

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(("options", "says"), [
    ({"initial": NAN}, r"Backoff.initial must be a finite number >= 0, got nan"),
    ({"initial": -1}, r"Backoff.initial must be a finite number >= 0, got -1"),
    ({"initial": "1"}, r"Backoff.initial .* got '1'"),
    ({"factor": INF}, r"Backoff.factor must be a finite number > 0, got inf; .*factor=1 "
                      r"keeps it constant"),
    ({"factor": 0}, r"Backoff.factor must be a finite number > 0, got 0"),
    ({"maximum": True}, r"Backoff.maximum must be a finite number >= 0, got True"),
    ({"maximum": INF}, r"Backoff.maximum .* got inf; give the longest single delay"),
    ({"jitter": 5}, r"Backoff.jitter must be a finite number in \[0, 1\], got 5; .*0 for "
                    r"none, 1 for full jitter"),
    ({"jitter": -0.1}, r"Backoff.jitter .* got -0.1"),
])
def test_backoff_refuses_what_is_no_delay_schedule(options: dict[str, object],
                                                   says: str) -> None:
    with pytest.raises(cp.UserError, match=says):
        cp.Backoff(**options)  # type: ignore[arg-type]


def test_backoff_takes_the_edges_of_its_ranges() -> None:
    assert cp.Backoff(factor=0.5).factor == 0.5  # shrinking delays: odd, but a log may hold one
    backoff = cp.Backoff(initial=0, factor=1, maximum=0, jitter=1)
    assert backoff.delay(3, random.Random(0)) == 0.0
    assert cp.Backoff(jitter=0.0, factor=1.0, initial=0.25).delay(9, random.Random(0)) == 0.25


def test_a_late_attempts_delay_is_the_maximum_not_an_overflow() -> None:
    backoff = cp.Backoff(initial=0.1, factor=2.0, maximum=30.0, jitter=0.0)
    assert backoff.delay(2000, random.Random(0)) == 30.0  # 2.0 ** 1999 overflows a float


def test_policy_says_to_leave_timeout_unset_for_no_limit() -> None:
    with pytest.raises(cp.UserError, match=r"Policy.timeout must be > 0 seconds \(a number\), "
                                           r"got inf; leave timeout unset for no limit"):
        cp.Policy(timeout=INF)


def test_policy_takes_a_backoff_only() -> None:
    with pytest.raises(cp.UserError, match=r"Policy.backoff takes a cp.Backoff, got float 0.5; "
                                           r"write backoff=cp.Backoff\("):
        cp.Policy(backoff=0.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(("resources", "says"), [
    (["gpu"], r"Policy.resources takes a mapping of resource names to the units the node "
              r"holds, got list \['gpu'\]; write resources=\{'gpu': 1\}"),
    (("gpu", "db"), r"got tuple .*; write resources=\{'gpu': 1, 'db': 1\}"),
    ("gpu", r"got str 'gpu'; write resources=\{'gpu': 1\}"),
    ({"gpu": 0}, r"Policy.resources\['gpu'\] must be >= 1, got 0; .*leave the name out"),
    ({"gpu": -1}, r"Policy.resources\['gpu'\] must be >= 1, got -1"),
    ({"gpu": 1.5}, r"Policy.resources\['gpu'\] must be a whole number >= 1, got 1.5"),
    ({"gpu": True}, r"Policy.resources\['gpu'\] must be a whole number >= 1, got True"),
    ({"": 1}, r"Policy.resources names each resource by a non-empty string, got '' \(str\)"),
    ({3: 1}, r"Policy.resources names each resource by a non-empty string, got 3 \(int\)"),
])
def test_policy_resources_are_names_and_whole_units(resources: object, says: str) -> None:
    with pytest.raises(cp.UserError, match=says):
        cp.Policy(resources=resources)  # type: ignore[arg-type]


def test_policy_keeps_good_resources() -> None:
    assert dict(cp.Policy(resources={"gpu": 2, "db": 1}).resources) == {"gpu": 2, "db": 1}
