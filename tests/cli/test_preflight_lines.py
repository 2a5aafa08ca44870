"""``run``'s preflight names each workflow model by the ``model:`` line that chose it (the
step's, its agent's or the workflow's, in the file it is written in), however the YAML
is laid out, and a model ``--model`` chose by the flag; never ``step 'a'``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from counterpoint.cli.app import app
from counterpoint.cli.preflight import graph_uses
from counterpoint.workflow import load_workflow

FLOW = """name: flow
model: openai:gpt-default
agents:
  writer: {instructions: Write., model: "openai:gpt-flow"}
  editor:
    instructions: Edit.
    model:
      openai:gpt-next-line
  plain: {instructions: Plain.}
steps:
  a: {agent: writer, task: hi}
  b: {agent: editor, task: hi}
  c:
    agent: editor
    task: hi
    model: openai:gpt-step
  d: {agent: plain, task: hi}
  e: {workflow: sub.yaml}
"""

SUB = """name: sub
agents:
  helper:
    instructions: Help.
    model: openai:gpt-sub
steps:
  h: {agent: helper, task: hi}
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.yaml").write_text(FLOW)
    (tmp_path / "sub.yaml").write_text(SUB)
    return tmp_path


@pytest.mark.usefixtures("folder")
def test_each_model_is_named_by_its_model_line() -> None:
    uses = {(use.name, use.where) for use in graph_uses(load_workflow("flow.yaml").graph)}
    assert uses == {("openai:gpt-flow", "flow.yaml:4"),
                    ("openai:gpt-next-line", "flow.yaml:7"),
                    ("openai:gpt-step", "flow.yaml:16"),
                    ("openai:gpt-default", "flow.yaml:2"),
                    ("openai:gpt-sub", "sub.yaml:5")}


@pytest.mark.usefixtures("folder")
def test_a_model_the_flag_chose_is_named_by_the_flag() -> None:
    graph = load_workflow("flow.yaml", models={"*": "openai:gpt-x"}).graph
    assert {use.where for use in graph_uses(graph, "--model openai:gpt-x")} == \
        {"--model openai:gpt-x"}


def test_the_command_line_error_points_at_the_line(folder: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder / "no-config"))
    monkeypatch.delenv("COUNTERPOINT_CONFIG", raising=False)
    (folder / "one.yaml").write_text(
        "name: one\nagents:\n  writer: {instructions: W., model: 'openai:gpt-nope'}\n"
        "steps:\n  a:\n    agent: writer\n    task: hi\n")
    result = CliRunner().invoke(app, ["run", "one.yaml", "--db", str(folder / "r.db")])
    assert result.exit_code == 2
    assert result.output.endswith("to use this model (named at one.yaml:3)\n"), result.output
    assert not (folder / "r.db").exists()
