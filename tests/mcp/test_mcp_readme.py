"""The README's MCP section is true: its example runs as shown, its workflow is the
example file, and that file runs (on a scripted model instead of the local one)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import counterpoint as cp
from counterpoint.models import Model, ScriptedModel, ToolCall
from counterpoint.workflow import load_workflow

ROOT = Path(__file__).resolve().parents[2]
SECTION = (ROOT / "README.md").read_text().split("### MCP tools and server\n", 1)[1] \
    .split("\n### ", 1)[0]


def _block(language: str) -> str:
    (block,) = re.findall(rf"```{language}\n(.*?)```", SECTION, flags=re.S)
    return block


def test_the_readme_mcp_example_runs_as_shown() -> None:
    proc = subprocess.run([sys.executable, "-c", _block("py")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "succeeded Noted: buy figs."


async def test_the_readme_workflow_is_the_example_file_and_runs() -> None:
    path = ROOT / "examples" / "mcp" / "notes.yaml"
    assert _block("yaml") == path.read_text()
    scripted = ScriptedModel([
        [ToolCall(id="a", name="add_note", arguments={"text": "buy figs"})],
        [ToolCall(id="b", name="list_notes", arguments={})], "You must buy figs."])
    workflow = load_workflow(path, models={"*": Model(scripted, cache=False)})
    result = await cp.run(workflow.graph, store="memory")
    assert result.ok and result["note"] == "You must buy figs."
    (_, _, listing) = scripted.requests
    assert [m.content for m in listing.messages if m.role == "tool"] == ["1", "buy figs"]
