"""A stdio MCP server that dies in the middle of a call, or does not answer one in
time: what the node, the model and the rest of the run get."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from mcp_support import STDIO, alive
from support import wait_until

import counterpoint as cp
from counterpoint.agents import Agent
from counterpoint.events import EventKind
from counterpoint.mcp import mcp_tools
from counterpoint.models import Model, ScriptedModel, ToolCall


def _pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


async def test_a_server_killed_mid_call_fails_the_attempt_and_the_retry_gets_a_new_one(
        tmp_path: Path) -> None:
    pids, gate = tmp_path / "pids.txt", tmp_path / "never"
    tools = mcp_tools(command=STDIO, name="fixture", env={"MCP_FIXTURE_PIDS": str(pids)})
    scripted = ScriptedModel([[ToolCall(id="c1", name="wait_for",
                                        arguments={"path": str(gate)})],
                              [ToolCall(id="c2", name="add", arguments={"a": 2, "b": 3})],
                              "5"])
    g = cp.Graph("broken")
    g.add("clerk", Agent("clerk", model=Model(scripted, cache=False), tools=[tools]),
          task="Wait, then add.", retries=1)
    store = cp.MemoryStore()
    handle = await cp.start(g, store=store)
    await asyncio.to_thread(wait_until, lambda: any(
        e.kind is EventKind.TOOL_CALL for e in store.events(handle.run_id)), "the call")
    (first,) = _pids(pids)
    os.kill(first, signal.SIGKILL)  # the server dies while the call is in flight
    result = await handle.result()

    assert result.ok, result.nodes
    assert result["clerk"] == "5"
    failed = [e.data or {} for e in store.events(result.run_id)
              if e.kind is EventKind.NODE_FAILED]
    # the crash is the attempt's failure (retried), not a "refused" call the model reads
    assert failed and "MCPServerError" in str(failed[0]), failed
    assert "closed the connection" in str(failed[0])
    results = [e.data or {} for e in store.events(result.run_id)
               if e.kind is EventKind.TOOL_RESULT]
    # the retry's agent asked its model again and called add on the new server
    assert [(d["tool"], d["content"]) for d in results] == [("add", "5")]
    # the dead connection was dropped: the retry started a second server, and the
    # run stopped it
    assert len(set(_pids(pids))) == 2
    assert not any(alive(pid) for pid in _pids(pids))


async def test_a_call_that_outlives_call_timeout_says_so_to_the_model(
        tmp_path: Path) -> None:
    tools = mcp_tools(command=STDIO, name="fixture", call_timeout=0.2)
    scripted = ScriptedModel([[ToolCall(id="c1", name="wait_for",
                                        arguments={"path": str(tmp_path / "never")})],
                              lambda request: request.messages[-1].content])
    g = cp.Graph("slow")
    g.add("clerk", Agent("clerk", model=Model(scripted, cache=False), tools=[tools]),
          task="Wait.")
    result = await cp.run(g, store="memory")
    assert result.ok, result.nodes
    assert result["clerk"].startswith("error: MCP server 'fixture' (")
    assert result["clerk"].endswith("tool wait_for did not answer within 0.2s "
                                    "(call_timeout); raise call_timeout if it needs longer")
