"""A reference to a node's output can be indexed but not iterated: iterating one said
nothing and never ended (Python's old protocol called ``ref[0]``, ``ref[1]``, ...)."""

from __future__ import annotations

import re
import sys

import pytest

import counterpoint as cp
from counterpoint.ids import NodeId


def pair() -> list[int]:
    return [1, 2]


def total(a: int, b: int) -> int:
    return a + b


def _ref() -> cp.NodeRef:
    return cp.Graph("refs").add("pair", pair)


def test_iterating_a_reference_says_to_index_it_or_map_over_it() -> None:
    ref = _ref()
    line = sys._getframe().f_lineno + 2
    with pytest.raises(cp.GraphError) as caught:
        iter(ref)
    message = str(caught.value)
    assert message.startswith(f"{__file__}:{line}: the output of node 'pair' was iterated")
    assert "index it to pass part of it (ref[0], ref['key']" in message
    assert "g.map('id', fn, over=ref)" in message


def test_every_way_python_iterates_is_refused() -> None:
    ref = _ref()
    with pytest.raises(cp.GraphError):  # first, so that a regression fails rather than hangs
        iter(ref)
    says = re.escape("the output of node 'pair' was iterated")
    with pytest.raises(cp.GraphError, match=says):
        list(ref)
    with pytest.raises(cp.GraphError, match=says):
        _ = [*ref]
    with pytest.raises(cp.GraphError, match=says):
        _a, _b = ref
    with pytest.raises(cp.GraphError, match=says):
        for _ in ref:
            pass
    with pytest.raises(cp.GraphError, match=says):
        1 in ref  # noqa: B015


def test_indexed_and_optional_references_are_refused_too() -> None:
    ref = _ref()
    for derived in (ref[0], ref.or_none()):
        with pytest.raises(cp.GraphError, match="node 'pair' was iterated"):
            iter(derived)


def test_indexing_still_wires_the_parts() -> None:
    g = cp.Graph("refs")
    ref = g.add("pair", pair)
    g.add("sum", total, a=ref[0], b=ref[1])
    assert [r.path for r in g.nodes[NodeId("sum")].inputs.values()] == [(0,), (1,)]
