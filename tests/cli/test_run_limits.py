"""``run --limit NAME=N`` naming a resource no node of the graph (sub-graphs included)
holds is refused before anything runs, unless a step of the graph may add such nodes by
a live edit (then a warning, and the run goes on)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from counterpoint.cli.app import app

FLOW = """
import counterpoint as cp

def a() -> int:
    return 1

def b(a: int) -> int:
    return a + 1

graph = cp.Graph("flow")
graph.add("b", b, a=graph.add("a", a), resources={"gpu": 1})
"""

NESTED = """
import counterpoint as cp

def a() -> int:
    return 1

def build() -> cp.Graph:
    inner = cp.Graph("inner")
    inner.add("a", a, resources={"embedder": 1})
    graph = cp.Graph("outer")
    graph.add("sub", inner)
    return graph
"""

EDITS = """
import counterpoint as cp

def later() -> int:
    return 2

def grow(ctx: cp.NodeContext) -> int:
    edit = cp.Edit()
    edit.add("later", later, resources={"cpu": 1})
    ctx.apply(edit)
    return 1

graph = cp.Graph("grows")
graph.add("grow", grow)
"""

WORKFLOW = "name: wf\nsteps:\n  a: {python: 'json:dumps', args: {obj: [1]}}\n"


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str,
         *flags: str) -> tuple[int, str]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / name.partition(":")[0]).write_text(textwrap.dedent(text))
    result = CliRunner().invoke(app, ["run", name, "--db", str(tmp_path / "runs.db"), "-q",
                                      "--no-preflight", *flags])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.exception
    return result.exit_code, result.output


def test_a_resource_no_node_holds_is_refused_naming_what_they_hold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, output = _run(tmp_path, monkeypatch, "flow.py", FLOW, "--limit", "gpx=2")
    assert code == 2
    assert output.startswith(
        "error: --limit gpx=2: no node of graph 'flow' (flow.py) holds a resource 'gpx' "
        "(its nodes hold 'gpu'), so the limit would limit nothing; fix the name (did you "
        "mean --limit gpu=2?), declare the resource on the nodes it should bound "
        "(resources={'gpx': 1}), or leave the flag out")
    assert not (tmp_path / "runs.db").exists()


def test_every_unheld_limit_is_named_at_once(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    code, output = _run(tmp_path, monkeypatch, "flow.py", FLOW, "--limit", "cpu=1",
                        "--limit", "gpu=1", "--limit", "disk=3")
    assert code == 2
    assert "--limit cpu=1: no node" in output and "--limit disk=3: no node" in output
    assert "--limit gpu=1: no node" not in output


def test_a_resource_held_in_a_sub_graph_is_a_limit_of_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, output = _run(tmp_path, monkeypatch, "nested.py:build", NESTED, "--limit", "embedder=1")
    assert code == 0, output
    assert "warning" not in output


def test_a_step_that_edits_the_run_gets_a_warning_and_the_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, output = _run(tmp_path, monkeypatch, "grows.py", EDITS, "--limit", "cpu=1")
    assert code == 0, output
    assert "warning: --limit cpu=1: no node of graph 'grows' (grows.py) holds a resource " \
        "'cpu' (its nodes hold no resources), so the limit would limit nothing; it stays " \
        "in force for nodes that a live edit adds later" in " ".join(output.split())


def test_a_workflow_says_its_steps_cannot_hold_resources(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, output = _run(tmp_path, monkeypatch, "wf.yaml", WORKFLOW, "--limit", "cpu=2")
    assert code == 2
    assert output.startswith(
        "error: --limit cpu=2: no node of workflow wf.yaml holds a resource 'cpu', so the "
        "limit would limit nothing; a workflow file cannot declare resources on its steps; "
        "leave the flag out (to run fewer steps at once, use --max-concurrency N)")
    assert not (tmp_path / "runs.db").exists()


def test_the_warning_is_given_once_in_the_flags_words(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run that ``run`` starts makes the same judgement (RunOptions' check) and does
    not warn a second time, as a Python warning."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, output = _run(tmp_path, monkeypatch, "grows.py", EDITS, "--limit", "cpu=1")
    assert code == 0, output
    assert output.count("no node of graph 'grows'") == 1
    assert "RunOptions(limits=" not in output
