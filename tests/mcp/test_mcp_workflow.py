"""The ``mcp:`` section of a workflow file: servers declared once, named by agents as
``mcp:NAME``, one server per run shared by the agents; mistakes reported with file:line."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from mcp_support import SERVER, alive

import counterpoint as cp
from counterpoint.models import Model, ScriptedModel, ToolCall
from counterpoint.workflow import WorkflowError, load_workflow


def _write(folder: Path, text: str) -> tuple[Path, str]:
    body = textwrap.dedent(text).lstrip()
    path = folder / "wf.yaml"
    path.write_text(body)
    return path, body


def _line(body: str, needle: str) -> int:
    return next(n for n, line in enumerate(body.splitlines(), 1) if needle in line)


async def test_agents_use_the_tools_of_a_declared_server(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    path, _ = _write(tmp_path, f"""
        name: noted
        mcp:
          fixture:
            command: [{json.dumps(sys.executable)}, {json.dumps(SERVER)}, stdio]
            include: [append_line, add]
            read_only: [add]
            env: {{MCP_FIXTURE_PIDS: pids.txt}}
        agents:
          clerk:
            instructions: Write things down.
            tools: [mcp:fixture]
        steps:
          first:
            agent: clerk
            task: Note one.
          second:
            agent: clerk
            task: Note two.
            needs: [first]
        """)
    scripted = ScriptedModel([
        [ToolCall(id="a", name="append_line", arguments={"path": str(notes), "text": "one"})],
        "noted one",
        [ToolCall(id="b", name="add", arguments={"a": 1, "b": 1})],
        [ToolCall(id="c", name="append_line", arguments={"path": str(notes), "text": "two"})],
        "noted two"])
    workflow = load_workflow(path, models={"*": Model(scripted, cache=False)})
    store = cp.MemoryStore()
    result = await cp.run(workflow.graph, store=store)
    assert result.ok, result.nodes
    assert result.outputs == {"first": "noted one", "second": "noted two"}
    assert notes.read_text() == "one\ntwo\n"
    # the command ran in the workflow file's folder: its relative pid file is there
    pids = [int(p) for p in (tmp_path / "pids.txt").read_text().split()]
    assert len(pids) == 1 and not alive(pids[0])
    calls = {(e.data or {})["tool"]: (e.data or {})["side_effects"]
             for e in store.events(result.run_id) if e.kind is cp.EventKind.TOOL_CALL}
    assert calls == {"append_line": True, "add": False}


def test_mistakes_in_the_mcp_section_have_file_and_line(tmp_path: Path) -> None:
    path, body = _write(tmp_path, """
        name: broken
        mcp:
          both:
            command: [server]
            url: http://127.0.0.1:9/mcp
          typo:
            comand: [server]
          fine:
            url: http://127.0.0.1:9/mcp
        agents:
          clerk:
            tools: [mcp:fine, mcp:nowhere]
        steps:
          s:
            agent: clerk
            task: Go.
        """)
    with pytest.raises(WorkflowError) as caught:
        load_workflow(path)
    text = str(caught.value)
    assert f"{path}:{_line(body, 'both:')}: " in text
    assert "exactly one of command" in text
    assert f"{path}:{_line(body, 'comand:')}: " in text and "did you mean 'command'?" in text
    assert f"{path}:{_line(body, 'mcp:nowhere')}: " in text
    assert "no MCP server 'nowhere'" in text and "both, typo, fine" in text
