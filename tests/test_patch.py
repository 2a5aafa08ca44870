"""Live edits keep a node's whole policy across the log (counterpoint.patch)."""

from __future__ import annotations

import sys

import pytest

import counterpoint as cp
from counterpoint.graph import NodeSpec
from counterpoint.patch import spec_from_data, spec_to_data


class FlakyError(Exception):
    pass


async def work(x: int = 0) -> int:
    return x


def _resolve(key: str, node: str) -> object:
    assert key.endswith(":work"), key
    return work


def _added(policy: cp.Policy) -> NodeSpec:
    edit = cp.Edit()
    edit.add("late", work, x=1, policy=policy)
    return edit.build("g", {}).add[0]


def test_an_added_node_comes_back_from_the_log_with_its_whole_policy() -> None:
    """Regression: backoff and retry_on came back as the defaults after a resume."""
    policy = cp.Policy(retries=3, timeout=2.0, retry_on=(FlakyError, TimeoutError),
                       backoff=cp.Backoff(initial=0.5, factor=3.0, maximum=4.0, jitter=0.0))
    spec = _added(policy)
    back = spec_from_data(spec_to_data(spec), _resolve)  # type: ignore[arg-type]
    assert back.policy.backoff == policy.backoff
    assert back.policy.retry_on == (FlakyError, TimeoutError)
    assert back.policy.retries == 3 and back.policy.timeout == 2.0


def test_an_unimportable_retry_on_type_is_a_clear_error() -> None:
    spec = _added(cp.Policy(retries=1, retry_on=(FlakyError,)))
    data = spec_to_data(spec)
    data["policy"]["retry_on"] = ["nowhere.at.all:Gone"]
    with pytest.raises(cp.SourceError, match=r"node 'late'.*'nowhere\.at\.all:Gone'"):
        spec_from_data(data, _resolve)  # type: ignore[arg-type]


async def echo(x: int) -> int:
    return x


def test_a_live_edit_can_add_a_node_that_reads_a_graph_input() -> None:
    """Regression: Edit.build checked added nodes against a graph with no inputs, so a
    node reading the run's input was rejected."""
    async def grow(ctx: cp.NodeContext) -> int:
        edit = cp.Edit()
        edit.add("late", echo, x=cp.InputRef("n"))
        return ctx.apply(edit)

    g = cp.Graph("with-input")
    g.input("n", int)
    g.add("grow", grow)
    result = cp.run_sync(g, store="memory", inputs={"n": 7})
    assert result.ok, result.nodes
    assert result["late"] == 7


def test_an_edit_that_adds_a_bad_node_names_the_edit_s_line_only() -> None:
    """Regression: the message named the edit's line and then, inside, the line of
    counterpoint's own patch.py where Edit.build checked the node."""
    edit = cp.Edit()
    line = sys._getframe().f_lineno + 1
    edit.add("taken", work)
    with pytest.raises(cp.PatchError) as caught:
        edit.build("g", {cp.NodeId("taken"): _added(cp.Policy())})
    message = str(caught.value)
    assert message.startswith(f"edit rejected: {__file__}:{line}: graph 'g', node 'taken': "
                              "duplicate node id"), message
    assert "counterpoint/patch.py" not in message
    added = cp.Edit()
    added.add("late", work, x=1, retries=2)
    [spec] = added.build("g", {}).add
    assert spec.where.startswith(f"{__file__}:") and spec.policy.retries == 2


def test_an_edit_whose_node_reads_an_unknown_node_names_where_it_was_added() -> None:
    line = sys._getframe().f_lineno + 4

    async def grow(ctx: cp.NodeContext) -> int:
        edit = cp.Edit()
        edit.add("late", echo, x=cp.NodeRef(cp.NodeId("nowhere")))
        return ctx.apply(edit)

    g = cp.Graph("unknown-dep")
    g.add("grow", grow)
    result = cp.run_sync(g, store="memory")
    message = (result.nodes["grow"].error or {}).get("message", "")
    assert f"node 'late' (added at {__file__}:{line}) depends on unknown node 'nowhere'; " \
        "add it in the same edit" in message, message
