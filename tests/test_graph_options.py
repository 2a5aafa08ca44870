"""g.add's node options (retries=, timeout=, resources=): a bad one is a GraphError with
the file:line of the g.add, the graph and the node, and what to write instead."""

from __future__ import annotations

import math
import re
import sys

import pytest

import counterpoint as cp
from counterpoint.ids import NodeId


def work(x: int = 0) -> int:
    return x


def here() -> str:
    return re.escape(__file__)


@pytest.mark.parametrize(("options", "says"), [
    ({"timeout": -1}, r"timeout must be > 0 seconds \(a number\), got -1; leave timeout unset "
                      r"for no limit"),
    ({"timeout": math.inf}, r"timeout must be > 0 seconds .* got inf"),
    ({"retries": True}, r"retries must be a whole number >= 0, got True"),
    ({"retries": -2}, r"retries must be >= 0, got -2"),
])
def test_a_bad_number_names_the_add_line(options: dict[str, object], says: str) -> None:
    g = cp.Graph("opts")
    with pytest.raises(cp.GraphError) as caught:
        g.add("a", work, **options)  # type: ignore[arg-type]
    assert re.match(rf"{here()}:\d+: graph 'opts', node 'a': {says}", str(caught.value)), \
        str(caught.value)


def test_the_line_named_is_the_add() -> None:
    g = cp.Graph("opts")
    line = sys._getframe().f_lineno + 2
    with pytest.raises(cp.GraphError) as caught:
        g.add("a", work, timeout=0)
    assert str(caught.value).startswith(f"{__file__}:{line}: graph 'opts', node 'a': timeout ")


def test_map_and_step_name_their_line_too() -> None:
    g = cp.Graph("opts")
    xs = g.add("xs", lambda: [1, 2])
    with pytest.raises(cp.GraphError, match=rf"^{here()}:\d+: graph 'opts', node 'm': "
                                            r"retries must be >= 0"):
        g.map("m", work, over=xs, retries=-1)
    with pytest.raises(cp.GraphError, match=rf"^{here()}:\d+: graph 'opts', node 'work': "
                                            r"timeout must be > 0"):
        g.step(timeout=-5)(work)


@pytest.mark.parametrize(("resources", "says"), [
    (["gpu"], r"resources takes a mapping of resource names to the units the node holds, "
              r"got list \['gpu'\]; write resources=\{'gpu': 1\}"),
    ({"gpu": 0}, r"resources\['gpu'\] must be >= 1, got 0"),
    ({"gpu": -1}, r"resources\['gpu'\] must be >= 1, got -1"),
    ({"gpu": 1.5}, r"resources\['gpu'\] must be a whole number >= 1, got 1.5"),
    ({"": 1}, r"resources names each resource by a non-empty string, got ''"),
    ({3: 1}, r"resources names each resource by a non-empty string, got 3"),
])
def test_bad_resources_name_the_add_line(resources: object, says: str) -> None:
    g = cp.Graph("opts")
    with pytest.raises(cp.GraphError, match=rf"^{here()}:\d+: graph 'opts', node 'a': {says}"):
        g.add("a", work, resources=resources)  # type: ignore[arg-type]


def test_good_options_reach_the_policy() -> None:
    g = cp.Graph("opts")
    g.add("a", work, retries=2, timeout=1.5, resources={"gpu": 1})
    policy = g.nodes[NodeId("a")].policy
    assert (policy.retries, policy.timeout, dict(policy.resources)) == (2, 1.5, {"gpu": 1})


def test_the_step_decorator_names_its_line_and_function() -> None:
    with pytest.raises(cp.GraphError, match=rf"^{here()}:\d+: @cp.step on {__name__}:work: "
                                            r"timeout must be > 0 seconds .* got -1; leave "
                                            r"timeout unset for no limit$"):
        cp.step(timeout=-1)(work)
    with pytest.raises(cp.GraphError, match=r"@cp.step on .*: resources takes a mapping"):
        cp.step(resources=["gpu"])(work)  # type: ignore[arg-type]
