"""The pure parts of parallel sampling (counterpoint.models.sampling): the vote, what a
deadline covers, what limited a downgrade, the seeds."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from counterpoint.models.call import Generation
from counterpoint.models.sampling import (
    choose,
    deadline_fit,
    downgrade,
    normalise,
    sampling_line,
    seeds,
    vote_key,
)
from counterpoint.models.types import Response, ToolCall, Usage


class Verdict(BaseModel):
    ok: bool


def _gen(text: str = "", output: Any = None, calls: tuple[ToolCall, ...] = ()
         ) -> Generation[Any]:
    return Generation(text=text, output=output, tool_calls=calls, usage=Usage(), model="m",
                      response=Response(text=text), calls=1)


def test_answers_are_compared_folded() -> None:
    assert normalise('  "Yes." ') == normalise("yes") == normalise("YES")
    assert normalise("New  York\n") == "new york"
    assert vote_key(_gen("x", output=Verdict(ok=True))) == vote_key(
        _gen("other text", output=Verdict(ok=True)))
    first = ToolCall(id="1", name="add", arguments={"a": 1, "b": 2})
    second = ToolCall(id="2", name="add", arguments={"b": 2, "a": 1})
    assert vote_key(_gen(calls=(first,))) == vote_key(_gen(calls=(second,)))


def test_the_majority_wins_and_a_tie_goes_to_the_earliest() -> None:
    assert choose([_gen("no"), _gen("yes"), _gen("Yes.")], "majority") == (1, 2)
    assert choose([_gen("b"), _gen("a"), _gen("a"), _gen("b")], "majority") == (0, 2)
    assert choose([_gen("short"), _gen("much longer"), _gen("longer")],
                  lambda g: len(g.text)) == (1, 1)


@pytest.mark.parametrize(("seconds", "latency", "concurrency", "fits"), [
    (None, 2.0, None, 5),  # no deadline
    (10.0, None, None, 5),  # latency not measured yet
    (10.0, 2.0, None, 5),  # all at once, one wave fits
    (10.0, 4.0, 2, 4),  # two waves of two
    (1.0, 4.0, 2, 1),  # not even one wave: one is still sent
    (100.0, 1.0, 1, 5),
])
def test_what_a_deadline_covers(seconds: float | None, latency: float | None,
                                concurrency: int | None, fits: int) -> None:
    assert deadline_fit(5, seconds=seconds, latency=latency, concurrency=concurrency) == fits


def test_a_downgrade_names_what_limited_it() -> None:
    assert downgrade(5, by_budget=5, by_deadline=5) == (5, None)
    assert downgrade(5, by_budget=3, by_deadline=4) == (3, "budget")
    assert downgrade(5, by_budget=5, by_deadline=2) == (2, "deadline")
    assert sampling_line({"sent": 3, "requested": 5, "downgraded_by": "budget",
                          "chosen": 0, "pick": "majority", "agree": 2, "answered": 3}) == \
        "3/5 sent (budget), majority 2/3"


def test_seeds_are_the_callers_or_distinct_and_repeatable() -> None:
    assert seeds(3, 7, None, "p") == [7, 8, 9]
    derived = seeds(5, None, None, "p")
    assert len(set(derived)) == 5 and derived == seeds(5, None, None, "p")
    assert derived != seeds(5, None, None, "q")
