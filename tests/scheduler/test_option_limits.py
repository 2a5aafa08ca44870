"""``RunOptions(limits=...)`` naming a resource that no node of the graph (sub-graphs
included) holds is refused before the run starts (scheduler.execution.check_limits),
unless a step of the graph may add such nodes by a live edit: then a warning, once per
graph, and the limit is kept."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.options import unheld_limits


def one() -> int:
    return 1


def plus(a: int) -> int:
    return a + 1


def grow(ctx: cp.NodeContext) -> int:
    edit = cp.Edit()
    edit.add("later", one, resources={"cpu": 1})
    ctx.apply(edit)
    return 1


def _gpu_graph() -> cp.Graph:
    g = cp.Graph("flow")
    g.add("b", plus, a=g.add("a", one), resources={"gpu": 1})
    return g


def test_a_misspelled_limit_is_refused_naming_what_the_nodes_hold(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with pytest.raises(cp.errors.UserError) as caught:
        cp.run_sync(_gpu_graph(), store=str(db), options=cp.RunOptions(limits={"gpus": 2}))
    assert str(caught.value) == (
        f"{__file__}: graph 'flow': RunOptions(limits={{'gpus': 2}}): no node holds a "
        "resource 'gpus' (its nodes hold 'gpu'), so the limit would limit nothing; fix the "
        "name (did you mean 'gpu'?), declare the resource on the nodes it should bound "
        "(g.add(..., resources={'gpus': 1})), or leave it out")
    assert not db.exists()  # refused before the store was opened


def test_every_unheld_limit_is_named_at_once() -> None:
    with pytest.raises(cp.errors.UserError) as caught:
        cp.run_sync(_gpu_graph(), store="memory",
                    options=cp.RunOptions(limits={"cpu": 1, "gpu": 1, "disk": 3}))
    message = str(caught.value)
    assert "several limits name resources no node holds" in message
    assert "limits={'cpu': 1}" in message and "limits={'disk': 3}" in message
    assert "limits={'gpu': 1}" not in message


def test_a_limit_held_by_a_node_or_a_sub_graph_runs() -> None:
    inner = cp.Graph("inner")
    inner.add("a", one, resources={"embedder": 1})
    outer = cp.Graph("outer")
    outer.add("sub", inner)
    outer.add("b", one, resources={"gpu": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = cp.run_sync(outer, store="memory",
                             options=cp.RunOptions(limits={"embedder": 1, "gpu": 1}))
    assert result.ok, result.status


def test_a_step_that_edits_the_run_gets_one_warning_and_keeps_the_limit() -> None:
    g = cp.Graph("grows")
    g.add("grow", grow)
    options = cp.RunOptions(limits={"cpu": 1})
    with pytest.warns(UserWarning, match=r"graph 'grows': RunOptions\(limits=\{'cpu': 1\}\): "
                      "no node holds a resource 'cpu' .* it stays in force for nodes that "
                      "a live edit adds later"):
        result = cp.run_sync(g, store="memory", options=options)
    assert result.ok, result.status
    assert result.state.limits == {"cpu": 1}
    assert result.state.nodes["later"].status is cp.NodeStatus.SUCCEEDED
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per graph: not again for the next run
        assert cp.run_sync(g, store="memory", options=options).ok


def test_the_judgement_lists_only_unheld_names_with_a_close_match() -> None:
    unheld = unheld_limits({"gpu": 1, "gpus": 1}, _gpu_graph())
    assert unheld is not None
    assert unheld.names == ("gpus",)
    assert unheld.close("gpus") == "gpu" and unheld.close("zzz") is None
    assert not unheld.editable
    assert unheld_limits({"gpu": 4}, _gpu_graph()) is None
