"""A workflow ``map:`` over something that is not a list says so in the file's words
(``map: ${inputs.xs}``, ``type: list``) at its ``file:line``, never the Python API's
(``map(over=...)``, ``over=ref['key']``): before the run when the input's declared type
tells, else as the step's failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import counterpoint as cp
from counterpoint.cli.app import app
from counterpoint.workflow import WorkflowError, load_workflow

STRING_INPUT = """name: m
inputs:
  xs: {type: string, default: abc}
steps:
  a:
    python: json:dumps
    map: ${inputs.xs}
    args: {obj: "${item}"}
"""

OBJECT_PATH = """name: m
inputs:
  cfg: {type: object, default: {files: abc}}
steps:
  a:
    python: json:dumps
    map: ${inputs.cfg.files}
    args: {obj: "${item}"}
"""


def test_a_map_over_an_input_that_is_not_a_list_is_refused_before_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.yaml").write_text(STRING_INPUT)
    message = ("m.yaml:7: step 'a': map: ${inputs.xs} is a string input 'xs', not a list; "
               "a map runs the step once per item of a list; declare it with type: list "
               "(inputs: xs: {type: list}), or map over a step's output")
    with pytest.raises(WorkflowError) as caught:
        load_workflow("m.yaml")
    assert str(caught.value) == message
    result = CliRunner().invoke(app, ["run", "m.yaml", "--db", str(tmp_path / "r.db")])
    assert result.exit_code == 2
    assert result.output == f"error: {message}\n"
    assert not (tmp_path / "r.db").exists()


def test_a_list_input_maps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.yaml").write_text(STRING_INPUT.replace("{type: string, default: abc}",
                                                          "{type: list, default: [1, 2]}"))
    wf = load_workflow("m.yaml")
    result = cp.run_sync(wf.graph, inputs=wf.bind_inputs({}), store="memory")
    assert result.output == {"a": ["1", "2"]}


def test_a_map_over_a_part_of_an_input_fails_in_the_files_words(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.yaml").write_text(OBJECT_PATH)
    wf = load_workflow("m.yaml")
    result = cp.run_sync(wf.graph, inputs=wf.bind_inputs({}), store="memory")
    assert result.status == cp.RunStatus.FAILED
    error = result.state.nodes[cp.NodeId("a.items")].error
    assert error is not None
    assert error["message"] == ("m.yaml:5: step 'a': map: ${inputs.cfg.files} is a string "
                                "('abc'), not a list; a map runs the step once per item of "
                                "a list, so pass a list there")
