"""MCP servers' tools used by agents: stdio and streamable HTTP servers started by the
tests, the events their calls leave, error results, filters, and the servers' lifetime."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_support import STDIO, alive
from support import free_port, wait_until

import counterpoint as cp
from counterpoint.agents import Agent
from counterpoint.errors import MCPServerError, UserError
from counterpoint.events import EventKind
from counterpoint.mcp import MCPTools, mcp_tools
from counterpoint.models import Model, ScriptedModel, ToolCall
from counterpoint.store import RunStore


def _call(name: str, id: str = "c1", **arguments: Any) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments)


def _graph(tools: MCPTools, answers: list[Any], *, nodes: int = 1) -> cp.Graph:
    g = cp.Graph("mcp")
    for index in range(nodes):
        model = Model(ScriptedModel(answers[index] if nodes > 1 else answers), cache=False)
        g.add(f"clerk{index}", Agent("clerk", model=model, tools=[tools]), task="Do it.")
    return g


def _pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _tool_events(store: RunStore, run: cp.RunId) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind.value, e.data or {}) for e in store.events(run)
            if e.kind in (EventKind.TOOL_CALL, EventKind.TOOL_RESULT)]


async def test_an_agent_calls_a_stdio_servers_tools_and_the_run_stops_the_server(
        tmp_path: Path, store: RunStore) -> None:
    pids, notes = tmp_path / "pids.txt", tmp_path / "notes.txt"
    tools = mcp_tools(command=STDIO, name="fixture", env={"MCP_FIXTURE_PIDS": str(pids)})
    answers = [[_call("add", a=2, b=40)],
               [_call("append_line", "c2", path=str(notes), text="hello")], "42, noted."]
    result = await cp.run(_graph(tools, answers), store=store)

    assert result.ok, result.nodes
    assert result["clerk0"] == "42, noted."
    assert notes.read_text() == "hello\n"
    events = _tool_events(store, result.run_id)
    assert [(kind, d["tool"]) for kind, d in events] == [
        ("tool_call", "add"), ("tool_result", "add"),
        ("tool_call", "append_line"), ("tool_result", "append_line")]
    assert [d["content"] for kind, d in events if kind == "tool_result"] == ["42", "1"]
    # nothing marks the fixture's tools read-only: each is taken as a side effect
    assert all(d["side_effects"] for _, d in events)
    (pid,) = _pids(pids)  # one server for the whole run
    assert not alive(pid), "the run ended but its MCP server still runs"


async def test_the_tools_schema_is_the_servers_input_schema(tmp_path: Path) -> None:
    async with mcp_tools(command=STDIO, include=["add"], prefix="fx_") as tools:
        (add,) = await tools.resolve_tools(None)
    assert add.name == "fx_add"
    assert add.description == "Add two integers."
    assert add.parameters["required"] == ["a", "b"]
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert add.side_effects


async def test_an_agent_uses_a_streamable_http_server(http_server: str, tmp_path: Path,
                                                      store: RunStore) -> None:
    notes = tmp_path / "notes.txt"
    tools = mcp_tools(url=http_server, name="web")
    answers = [[_call("append_line", path=str(notes), text="over http"),
                _call("add", "c2", a=1, b=2)], "done"]
    result = await cp.run(_graph(tools, answers), store=store)
    assert result.ok, result.nodes
    assert notes.read_text() == "over http\n"
    results = [d["content"] for k, d in _tool_events(store, result.run_id)
               if k == "tool_result"]
    assert sorted(results) == ["1", "3"]


async def test_an_error_result_reaches_the_model_and_is_recorded(store: RunStore) -> None:
    scripted = ScriptedModel([[_call("fail", message="the disk is full")], "I could not."])
    agent = Agent("clerk", model=Model(scripted, cache=False),
                  tools=[mcp_tools(command=STDIO, name="fixture")])
    g = cp.Graph("mcp")
    g.add("clerk", agent, task="Try.")
    result = await cp.run(g, store=store)
    assert result.ok and result["clerk"] == "I could not."
    ((_, call), (_, answer)) = _tool_events(store, result.run_id)
    assert call["tool"] == "fail" and call["arguments"] == {"message": "the disk is full"}
    assert answer["ok"] is False
    assert "the disk is full" in answer["content"] and "fixture" in answer["content"]
    told = [m.content for m in scripted.requests[1].messages if m.role == "tool"]
    assert told == [answer["content"]]


async def test_nodes_of_one_run_share_one_server(tmp_path: Path) -> None:
    pids = tmp_path / "pids.txt"
    tools = mcp_tools(command=STDIO, env={"MCP_FIXTURE_PIDS": str(pids)})
    answers = [[[_call("add", a=i, b=i)], f"{2 * i}"] for i in range(3)]
    result = await cp.run(_graph(tools, answers, nodes=3), store="memory")
    assert result.ok, result.nodes
    assert result.outputs == {"clerk0": "0", "clerk1": "2", "clerk2": "4"}
    assert len(_pids(pids)) == 1


async def test_a_missing_included_tool_fails_the_node_naming_what_exists() -> None:
    agent = Agent("clerk", model=Model(ScriptedModel([]), cache=False),
                  tools=[mcp_tools(command=STDIO, name="fixture", include=["delete_all"])])
    g = cp.Graph("mcp")
    g.add("clerk", agent, task="Try.")
    result = await cp.run(g, store="memory")
    assert not result.ok
    message = str(result.nodes["clerk"].error)
    assert "no tool(s) ['delete_all']" in message and "'add'" in message


async def test_a_command_that_does_not_exist_is_one_clear_error() -> None:
    tools = mcp_tools(command=["no-such-mcp-server-here", "--stdio"], name="ghost")
    with pytest.raises(MCPServerError, match="command 'no-such-mcp-server-here' not found"):
        await tools.resolve_tools(None)


async def test_a_server_that_exits_at_start_shows_its_stderr() -> None:
    tools = mcp_tools(command=STDIO, name="quitter", env={"MCP_FIXTURE_EXIT": "3"})
    with pytest.raises(MCPServerError) as raised:
        await tools.resolve_tools(None)
    message = str(raised.value)
    assert "MCP server 'quitter'" in message and "failed to start" in message
    assert "refusing to start (MCP_FIXTURE_EXIT is set)" in message


async def test_a_url_where_nothing_listens_says_what_to_check() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    tools = mcp_tools(url=url, name="away", start_timeout=30)
    with pytest.raises(MCPServerError) as raised:
        await tools.resolve_tools(None)
    message = str(raised.value)
    assert message.startswith(f"MCP server 'away' ({url}) failed to start: ")
    assert message.endswith(f"; check that the server runs and serves MCP at {url}")


async def test_two_remote_names_that_become_one_name_are_one_clear_error(
        tmp_path: Path) -> None:
    server = tmp_path / "twins.py"
    server.write_text("from mcp.server.mcpserver import MCPServer\n"
                      "server = MCPServer('twins')\n"
                      "@server.tool(name='notes.add')\n"
                      "def dotted() -> str:\n    return 'dotted'\n"
                      "@server.tool(name='notes_add')\n"
                      "def plain() -> str:\n    return 'plain'\n"
                      "server.run('stdio')\n")
    tools = mcp_tools(command=[sys.executable, str(server)], name="twins")
    with pytest.raises(MCPServerError) as raised:
        await tools.resolve_tools(None)
    assert str(raised.value).endswith(
        "its tools 'notes.add' and 'notes_add' both become 'notes_add' (a tool's name may "
        "hold only letters, digits, _ and -); exclude= one of them")
    assert raised.value.retryable is False
    kept = await mcp_tools(command=[sys.executable, str(server)],
                           exclude=["notes.add"]).resolve_tools(None)
    assert [t.name for t in kept] == ["notes_add"]


def test_misconfigured_servers_are_user_errors() -> None:
    with pytest.raises(UserError, match="exactly one of command"):
        mcp_tools(command=STDIO, url="http://127.0.0.1:1/mcp")
    with pytest.raises(UserError, match="exactly one of command"):
        mcp_tools()
    with pytest.raises(UserError, match="list of non-empty strings"):
        mcp_tools(command="python server.py")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="not an http"):
        mcp_tools(url="127.0.0.1:8000/mcp")


async def test_a_step_that_crashes_after_using_a_server_leaves_no_process(
        tmp_path: Path) -> None:
    pids = tmp_path / "pids.txt"
    tools = mcp_tools(command=STDIO, env={"MCP_FIXTURE_PIDS": str(pids)})

    async def crashes() -> None:
        agent = Agent("clerk", model=Model(ScriptedModel([[_call("add", a=1, b=1)], "2"]),
                                           cache=False), tools=[tools])
        await agent.run("Add.")
        raise RuntimeError("the step broke after the agent ran")

    g = cp.Graph("crash")
    g.add("step", crashes)
    result = await cp.run(g, store="memory")
    assert not result.ok and "the step broke" in str(result.nodes["step"].error)
    (pid,) = _pids(pids)
    assert not alive(pid)


async def test_cancelling_a_run_mid_call_stops_the_server(tmp_path: Path) -> None:
    pids, gate = tmp_path / "pids.txt", tmp_path / "gate"
    tools = mcp_tools(command=STDIO, env={"MCP_FIXTURE_PIDS": str(pids)})
    scripted = ScriptedModel([[_call("wait_for", path=str(gate))]])
    g = cp.Graph("cancel")
    g.add("clerk", Agent("clerk", model=Model(scripted, cache=False), tools=[tools]),
          task="Wait.")
    store = cp.MemoryStore()
    handle = await cp.start(g, store=store)
    await asyncio.to_thread(wait_until, lambda: any(
        e.kind is EventKind.TOOL_CALL for e in store.events(handle.run_id)), "the call")
    handle.cancel()
    result = await handle.result()
    assert result.status is cp.RunStatus.CANCELLED
    (pid,) = _pids(pids)
    assert not alive(pid)


async def test_outside_a_run_the_block_keeps_one_server(tmp_path: Path) -> None:
    pids = tmp_path / "pids.txt"
    tools = mcp_tools(command=STDIO, env={"MCP_FIXTURE_PIDS": str(pids)})
    agent = Agent("clerk", model=ScriptedModel([[_call("add", a=1, b=2)], "3",
                                                [_call("add", a=2, b=2)], "4"]),
                  tools=[tools])
    async with tools:
        assert (await agent.run("first")).output == "3"
        assert (await agent.run("second")).output == "4"
        (pid,) = _pids(pids)
        assert alive(pid)
    assert not alive(pid)


async def test_an_mcp_tool_can_need_approval_and_is_kept_to_the_roles_capabilities(
        tmp_path: Path, store: RunStore) -> None:
    notes = tmp_path / "notes.txt"
    tools = mcp_tools(command=STDIO, name="fixture", approval=["append_line"])
    answers = [[_call("append_line", path=str(notes), text="rm -rf")],
               [_call("add", "c2", a=1, b=2)], "done"]
    clerk = Agent("clerk", model=Model(ScriptedModel(answers), cache=False), tools=[tools],
                  capabilities=cp.Capabilities(tools={"append_line"}, side_effects=True))
    g = cp.Graph("mcp")
    g.add("clerk", clerk, task="Do it.")
    handle = await cp.start(g, store=store)
    async for event in handle.events():
        if event.kind is EventKind.APPROVAL_REQUESTED:
            break
    [pending] = handle.approvals()
    assert pending.payload["tool"] == "append_line"
    handle.reject(pending.id, "not today", by="ana")
    result = await handle.result()
    assert result.ok, result.nodes
    assert not notes.exists()  # rejected: the side effect never ran
    contents = [d["content"] for kind, d in _tool_events(store, result.run_id)
                if kind == "tool_result"]
    assert contents[0] == "error: the call was rejected by ana: not today"
    assert contents[1].startswith("error: permission denied")  # `add` is not granted
    kinds = [e.kind for e in store.events(result.run_id)]
    assert EventKind.PERMISSION_DENIED in kinds
