"""``counterpoint mcp`` driven by the SDK's client: the command runs as a real stdio
subprocess (and once on streamable HTTP), starting, following, showing, listing and
cancelling runs of a graph file."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from support import free_port

SRC = str(Path(__file__).resolve().parents[2] / "src")
GRAPH = '''
import os, time
import counterpoint as cp

g = cp.Graph("demo")

@g.step
def numbers() -> list[int]:
    return [1, 2, 3]

@g.step
def total(numbers: list[int]) -> int:
    return sum(numbers)

slow = cp.Graph("slow")

@slow.step
def wait(ctx: cp.NodeContext) -> str:
    open(os.environ["GATE_DIR"] + "/entered", "w").close()
    while not ctx.cancelled:
        time.sleep(0.01)
    return "stopped"

release = cp.Graph("release")

async def deploy(ctx: cp.NodeContext) -> str:
    answer = await ctx.ask("deploy v1 to prod?", {"version": "v1"})
    return "deployed" if answer.approved else f"held: {answer.reason}"

release.add("deploy", deploy)
'''


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "GATE_DIR": str(tmp_path)}


@asynccontextmanager
async def _serve(tmp_path: Path, **env: str) -> AsyncIterator[Client]:
    """`counterpoint mcp` on stdio, and the SDK's client on it (entered and exited in the
    test's own task, as anyio wants: not a pytest fixture)."""
    (tmp_path / "graphs.py").write_text(GRAPH)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "counterpoint.cli", "mcp", "--db",
                                      str(tmp_path / "runs.db")],
        env={**_env(tmp_path), **env}, cwd=str(tmp_path))
    async with Client(params) as the_client:
        yield the_client


async def _call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    structured = result.structured_content
    assert structured is not None
    return structured.get("result", structured)


async def _error(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return " ".join(getattr(block, "text", "") for block in result.content)


async def _follow(client: Client, run_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    after = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        page = await _call(client, "follow_run", run_id=run_id, after_seq=after,
                           wait_seconds=5)
        events.extend(page["events"])
        after = page["next_seq"]
        if page["finished"]:
            return events
    raise AssertionError(f"run {run_id} did not finish")


async def test_the_server_lists_its_tools(tmp_path: Path) -> None:
    async with _serve(tmp_path) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"start_workflow", "start_goal", "show_run", "list_runs", "follow_run",
                         "cancel_run", "list_approvals", "answer_approval"}


async def test_start_follow_show_and_list_a_run(tmp_path: Path) -> None:
    async with _serve(tmp_path) as client:
        started = await _call(client, "start_workflow", target="graphs.py:g")
        run_id = started["run_id"]
        events = await _follow(client, run_id)
        kinds = [e["kind"] for e in events]
        assert kinds[0] == "run_created" and kinds[-1] == "run_finished"
        assert [e["seq"] for e in events] == sorted({e["seq"] for e in events})
        succeeded = [e["node"] for e in events if e["kind"] == "node_succeeded"]
        assert succeeded == ["numbers", "total"]

        shown = await _call(client, "show_run", run_id=run_id)
        assert shown["status"] == "succeeded"
        assert shown["outputs"] == {"numbers": [1, 2, 3], "total": 6}
        listed = await _call(client, "list_runs")
        assert [(r["run_id"], r["status"]) for r in listed] == [(run_id, "succeeded")]
        # following from the end gives nothing new, and says the run is over
        page = await _call(client, "follow_run", run_id=run_id, after_seq=events[-1]["seq"])
        assert page == {"events": [], "next_seq": events[-1]["seq"], "finished": True}
        # runs are named as on the command line: last, or a unique start of the id
        assert (await _call(client, "show_run", run_id="last"))["run_id"] == run_id
        assert (await _call(client, "show_run", run_id=run_id[:-3]))["run_id"] == run_id
        tail = await _call(client, "follow_run", run_id="last", after_seq=events[-2]["seq"])
        assert [e["seq"] for e in tail["events"]] == [events[-1]["seq"]]
        assert await _call(client, "list_approvals", run_id="last") == []


async def test_follow_is_bounded_and_resumes_from_next_seq(tmp_path: Path) -> None:
    async with _serve(tmp_path) as client:
        run_id = (await _call(client, "start_workflow", target="graphs.py:g"))["run_id"]
        everything = await _follow(client, run_id)
        first = await _call(client, "follow_run", run_id=run_id, limit=2)
        assert [e["seq"] for e in first["events"]] == [e["seq"] for e in everything[:2]]
        assert not first["finished"]
        rest = await _call(client, "follow_run", run_id=run_id, after_seq=first["next_seq"])
        assert rest["events"] == everything[2:] and rest["finished"]


async def test_cancel_a_run_the_server_runs(tmp_path: Path) -> None:
    async with _serve(tmp_path) as client:
        run_id = (await _call(client, "start_workflow", target="graphs.py:slow"))["run_id"]
        deadline = time.monotonic() + 60
        while not (tmp_path / "entered").exists():
            assert time.monotonic() < deadline, "the step never started"
            page = await _call(client, "follow_run", run_id=run_id, wait_seconds=1)
            assert not page["finished"]
        cancelled = await _call(client, "cancel_run", run_id=run_id)
        assert cancelled["status"] == "cancelled"
        assert (await _call(client, "show_run", run_id=run_id))["status"] == "cancelled"


async def test_user_mistakes_are_one_line_tool_errors(tmp_path: Path) -> None:
    async with _serve(tmp_path) as client:
        message = await _error(client, "show_run", run_id="no-such-run")
        assert "no-such-run" in message and "Traceback" not in message
        assert "\n" not in message.strip()
        message = await _error(client, "start_workflow", target="missing.py")
        assert "missing.py" in message and "Traceback" not in message


async def test_blank_targets_and_goals_and_bad_rounds_are_refused_and_secrets_hidden(
        tmp_path: Path) -> None:
    secret = "tok-0123456789-never-shown"
    (tmp_path / "leaky.py").write_text(
        "import os\nraise ValueError('cannot log in with ' + os.environ['DEMO_TOKEN'])\n")
    async with _serve(tmp_path, DEMO_TOKEN=secret) as client:
        message = await _error(client, "start_workflow", target="leaky.py")
        assert "leaky.py:2: importing it raised ValueError: cannot log in with ***" in message
        assert secret not in message
        message = await _error(client, "start_workflow", target=" ")
        assert "start_workflow: target is empty; give a workflow file (FILE.yaml) or a " \
            "Python graph (FILE.py[:GRAPH])" in message
        message = await _error(client, "start_goal", goal="  ")
        assert "start_goal: goal is empty; give the goal as a sentence" in message
        message = await _error(client, "start_goal", goal="Compare two cities", rounds=-1)
        assert "start_goal: rounds must be >= 0 (0: no verification), got -1" in message
        assert await _call(client, "list_runs") == []  # none of them started a run


def _start_http(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    """`counterpoint mcp --http PORT`, once it accepts connections."""
    process = subprocess.Popen(
        [sys.executable, "-m", "counterpoint.cli", "mcp", "--http", str(port), "--db",
         str(tmp_path / "runs.db")], env=_env(tmp_path), cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return process
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "the HTTP server did not start"
        time.sleep(0.05)


def test_a_port_in_use_is_a_user_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ran = subprocess.run(
            [sys.executable, "-m", "counterpoint.cli", "mcp", "--http", str(port), "--db",
             str(tmp_path / "runs.db")], env=_env(tmp_path), cwd=tmp_path,
            capture_output=True, text=True, timeout=120)
    assert ran.returncode == 2, ran.stderr  # not 3, which says "waiting for approvals"
    assert ran.stderr.strip() == (
        f"error: counterpoint mcp --http {port}: cannot serve on 127.0.0.1:{port} "
        "(something else listens on it); pick another port")


async def test_the_server_over_streamable_http(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "graphs.py").write_text(GRAPH)
    process = await asyncio.to_thread(_start_http, tmp_path, port)
    try:
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            run_id = (await _call(client, "start_workflow", target="graphs.py:g"))["run_id"]
            await _follow(client, run_id)
            shown = await _call(client, "show_run", run_id=run_id)
            assert shown["outputs"]["total"] == 6
            assert json.dumps(await _call(client, "list_runs")).count(run_id) == 1
    finally:
        process.terminate()
        await asyncio.to_thread(process.wait, 20)


async def test_an_approval_is_listed_and_answered_and_its_ended_run_resumed(
        tmp_path: Path) -> None:
    (tmp_path / "graphs.py").write_text(GRAPH)
    detached = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "counterpoint.cli", "run", "graphs.py:release", "--db",
         str(tmp_path / "runs.db"), "--detach-waiting", "-q"],
        cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert detached.returncode == 3, detached.stderr  # only the approval is left: it ended
    async with _serve(tmp_path) as client:
        [pending] = await _call(client, "list_approvals")
        assert (pending["question"], pending["payload"], pending["status"]) == \
            ("deploy v1 to prod?", {"version": "v1"}, "pending")
        answered = await _call(client, "answer_approval", approval_id=pending["id"],
                               approved=True, by="ana")
        assert answered["resumed"] and answered["answer"]["by"] == "ana"
        await _follow(client, pending["run_id"])
        shown = await _call(client, "show_run", run_id=pending["run_id"])
        assert shown["status"] == "succeeded" and shown["outputs"] == {"deploy": "deployed"}
        again = await _error(client, "answer_approval", approval_id=pending["id"],
                             approved=False, reason="too late")
        assert "was approved by ana already" in again
        assert await _call(client, "list_approvals") == []
