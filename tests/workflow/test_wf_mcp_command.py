"""An MCP server whose command cannot be found is a problem of the workflow file, found
with its file:line before a run starts (exit code 2, nothing in the store), not the
failure of the first agent that uses the server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from counterpoint.cli.app import app
from counterpoint.workflow import WorkflowError, load_workflow

FILE = """name: t
mcp:
  notes:
    command: [{command}]
agents:
  clerk:
    model: local:smollm2
    tools: [mcp:notes]
steps:
  note: {{agent: clerk, task: hi}}
"""


@pytest.mark.parametrize("command", ["nosuch-mcp-server-xyz", "./bin/missing-server"])
def test_a_command_that_is_not_there_is_a_workflow_error(tmp_path: Path, command: str) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(FILE.format(command=command))
    with pytest.raises(WorkflowError) as caught:
        load_workflow(path)
    assert str(caught.value).startswith(
        f"{path}:4: MCP server 'notes': command {command!r} is not found on PATH, nor as "
        "a file; install it, or give its path")


def test_the_cli_refuses_it_before_the_run(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.yaml").write_text(FILE.format(command="nosuch-mcp-server-xyz"))
    result = CliRunner().invoke(app, ["run", "flow.yaml", "--no-preflight",
                                      "--db", str(tmp_path / "runs.db")])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.exception
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: flow.yaml:4: MCP server 'notes'")
    assert not (tmp_path / "runs.db").exists()


@pytest.mark.parametrize("command", [sys.executable, "python3"])
def test_a_command_on_path_or_by_its_path_loads(tmp_path: Path, command: str) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(FILE.format(command=command))
    assert "note" in load_workflow(path).graph.nodes
