"""A run killed while a node waits out its retry's backoff keeps waiting it out when it
is resumed: the retry is not sent at once (a step told to come back in an hour, a
service's Retry-After)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.store import SQLiteStore

FLOW = '''
from pathlib import Path

import counterpoint as cp

HERE = Path(__file__).parent


async def poll(ctx: cp.NodeContext) -> str:
    """A report that is not ready: come back in an hour."""
    with (HERE / "marks").open("a") as marks:
        marks.write(f"poll {ctx.attempt}\\n")
    if ctx.attempt == 1:
        raise cp.Retry("the report is not ready yet", after=3600)
    return "the report"


graph = cp.Graph("report")
graph.add("poll", poll, retries=1)
'''

RUNNER = '''
import asyncio, sys
import counterpoint as cp
from counterpoint.events import EventKind

sys.path.insert(0, sys.argv[1])
from flow import graph


async def main() -> None:
    handle = await cp.start(graph, store=sys.argv[1] + "/runs.db")
    async for event in handle.events():
        if event.kind is EventKind.NODE_FAILED and event.node == "poll":
            await handle.flush()  # the failure, and its backoff, are in the log
            print(handle.run_id, flush=True)
    await handle.result()

asyncio.run(main())
'''


def test_a_resumed_run_waits_out_the_backoff_its_node_was_in(tmp_path: Path) -> None:
    (tmp_path / "flow.py").write_text(FLOW)
    child = subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp_path)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        run_id = child.stdout.readline().strip()
        assert run_id, "the run never reached its backoff"
    finally:
        child.kill()  # SIGKILL, in the node's hour of backoff
        child.wait()
    store = SQLiteStore(tmp_path / "runs.db")
    sys.path.insert(0, str(tmp_path))  # where the run's graph is defined, as the run saw it

    async def resume() -> tuple[cp.NodeStatus, cp.RunResult]:
        handle = await cp.start_resume(run_id, store=store)
        status = handle.state.nodes[cp.NodeId("poll")].status
        handle.cancel()
        return status, await handle.result()

    try:
        status, result = asyncio.run(resume())
        events = store.events(result.run_id)
    finally:
        store.close()
        sys.path.remove(str(tmp_path))
        sys.modules.pop("flow", None)
    assert status is cp.NodeStatus.RETRYING  # it was not started again at once...
    assert (tmp_path / "marks").read_text().splitlines() == ["poll 1"]  # ...nor ran
    assert result.status is cp.RunStatus.CANCELLED
    assert [e.kind for e in events if e.node == "poll"][-2:] == \
        [EventKind.NODE_FAILED, EventKind.NODE_CANCELLED]
