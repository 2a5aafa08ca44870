"""Adding a function as a node with a decorator: ``@g.step`` and ``@g.step("id")`` do it;
``@g.add`` (or ``g.add("id")`` with no function) says so, instead of a raw TypeError."""

from __future__ import annotations

import re
import sys

import pytest

import counterpoint as cp
from counterpoint.ids import NodeId


def test_add_used_as_a_decorator_says_to_use_step() -> None:
    g = cp.Graph("deco")
    line = sys._getframe().f_lineno + 3
    with pytest.raises(cp.GraphError) as caught:

        @g.add  # type: ignore[arg-type]
        def fetch() -> int:
            return 1

    message = str(caught.value)
    assert message.startswith(f"{__file__}:{line}: graph 'deco': g.add got function fetch "
                              "where the node id goes"), message
    assert "use @g.step (or @g.step('fetch')) to add a function as a node, or call " \
        "g.add('fetch', fetch, ...)" in message
    assert not g.nodes


def test_add_with_an_id_and_no_function_says_what_to_write() -> None:
    g = cp.Graph("deco")
    with pytest.raises(cp.GraphError, match=rf"^{re.escape(__file__)}:\d+: graph 'deco', node "
                                            r"'fetch': g.add\('fetch'\) has no function to run; "
                                            r"write g.add\('fetch', fn, ...\), or put "
                                            r"@g.step\('fetch'\) over the function"):

        @g.add("fetch")  # type: ignore[misc]
        def fetch() -> int:
            return 1


def test_step_takes_the_id_positionally_as_the_messages_say() -> None:
    g = cp.Graph("deco")

    @g.step("first")
    def one() -> int:
        return 1

    @g.step(id="second", retries=2)
    def two(first: int) -> int:
        return first + 1

    assert list(g.nodes) == ["first", "second"]
    assert g.nodes[NodeId("second")].deps == ("first",)  # wired to the node named "first"
    assert g.nodes[NodeId("second")].policy.retries == 2


def test_step_named_twice_is_refused() -> None:
    g = cp.Graph("deco")
    with pytest.raises(cp.GraphError, match=r"@g.step\('a', id='b'\) names the node twice; "
                                            "keep one of them"):

        @g.step("a", id="b")
        def one() -> int:
            return 1
