"""``ctx.flush()`` from a plain ``def`` step (in a worker thread) waits there until the run's
log is durable, as ``await ctx.flush()`` does in an async step: an effect after it is
never done for a run the store does not hold up to that point."""

from __future__ import annotations

from pathlib import Path

from support import run_cli

from counterpoint.events import EventKind
from counterpoint.ids import RunId
from counterpoint.store import SQLiteStore

FLOW = '''
import os
from pathlib import Path

import counterpoint as cp

HERE = Path(__file__).parent


def mark(what: str) -> None:
    with (HERE / "marks").open("a") as marks:
        marks.write(what + "\\n")


async def quote() -> int:
    mark("quote")
    return 5


def pay(ctx: cp.NodeContext, amount: int) -> str:
    """A sync step: the log is made durable, then the payment goes out and, the first
    time, the process dies before the step's success is logged."""
    ctx.flush()
    durable = [e.kind.value for e in ctx.store.events(ctx.run_id)]
    mark(f"pay {ctx.attempt} saw {durable.count('node_succeeded')} successes durable")
    if not (HERE / "died").exists():
        (HERE / "died").touch()
        os._exit(9)
    return f"paid {amount}"


graph = cp.Graph("pay")
graph.add("pay", pay, amount=graph.add("quote", quote))
'''


def test_a_sync_step_s_flush_makes_the_log_durable_before_its_effect(tmp_path: Path) -> None:
    (tmp_path / "pay.py").write_text(FLOW)
    crashed = run_cli("run", "pay.py", "-q", "--db", "runs.db", cwd=tmp_path)
    assert crashed.returncode == 9, crashed.stderr
    assert "never awaited" not in crashed.stderr
    run_id = run_cli("runs", "--db", "runs.db", cwd=tmp_path).stdout.splitlines()[1].split()[0]
    resumed = run_cli("resume", run_id, "-q", "--db", "runs.db", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (tmp_path / "marks").read_text().splitlines() == [
        "quote", "pay 1 saw 1 successes durable", "pay 2 saw 1 successes durable"]
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        events = store.events(RunId(run_id))
    finally:
        store.close()
    assert [e.node for e in events if e.kind is EventKind.NODE_SUCCEEDED] == ["quote", "pay"]
