"""An Agent's counts, deadline and temperature are checked as every option's numbers
are (counterpoint.checks): a bool, NaN, infinity or a negative is one UserError naming
the agent and the option."""

from __future__ import annotations

import math
from typing import Any

import pytest

from counterpoint.agents import Agent
from counterpoint.errors import UserError


@pytest.mark.parametrize(("option", "value", "said"), [
    ("max_turns", True, "max_turns must be a whole number >= 1, got True (bool)"),
    ("max_turns", 2.5, "max_turns must be a whole number >= 1, got 2.5 (float)"),
    ("max_turns", math.nan, "max_turns must be a whole number >= 1, got nan (float)"),
    ("max_turns", 0, "max_turns must be >= 1, got 0"),
    ("samples", True, "samples must be a whole number >= 1, got True (bool)"),
    ("max_tokens", True, "max_tokens must be a whole number >= 1, got True (bool)"),
    ("turn_tokens", 2.5, "turn_tokens must be a whole number >= 1, got 2.5 (float)"),
    ("deadline", math.inf, "deadline must be > 0 seconds (a number), got inf"),
    ("deadline", True, "deadline must be > 0 seconds (a number), got True"),
    ("temperature", math.nan, "temperature must be a finite number >= 0, got nan"),
    ("temperature", -1, "temperature must be a finite number >= 0, got -1"),
    ("temperature", "hot", "temperature must be a finite number >= 0, got 'hot'"),
])
def test_a_bad_number_is_refused_naming_the_agent(option: str, value: Any, said: str) -> None:
    with pytest.raises(UserError) as caught:
        Agent("writer", model="local:smollm2", **{option: value})
    assert str(caught.value) == f"agent writer: {said}"


def test_good_numbers_are_kept() -> None:
    agent = Agent("writer", model="local:smollm2", max_turns=2, max_tokens=100,
                  turn_tokens=50, deadline=1.5, temperature=0.7, samples=2)
    assert (agent.max_turns, agent.temperature) == (2, 0.7)
