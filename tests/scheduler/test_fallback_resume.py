"""A run killed while a node's fallback runs resumes that fallback: the step that failed
(its failure in the log) is not called again."""

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
from counterpoint.context import current_context

HERE = Path(__file__).parent


def mark(what: str) -> None:
    with (HERE / "marks").open("a") as marks:
        marks.write(what + "\\n")


async def charge(amount: int) -> str:
    """The effect that fails after it went out (the payment was taken, the answer lost)."""
    mark("charge")
    raise ConnectionError("the payment service hung up")


async def queue_for_later(amount: int) -> str:
    """The fallback; its first run's process dies once the charge's failure is durable."""
    mark("fallback")
    if not (HERE / "died").exists():
        (HERE / "died").touch()
        ctx = current_context()
        assert ctx is not None
        await ctx.flush()
        os._exit(9)
    return f"queued {amount}"


graph = cp.Graph("pay")
graph.add("pay", charge, amount=5, fallback=queue_for_later)
'''


def test_a_run_killed_in_a_fallback_resumes_the_fallback_not_the_failed_step(
        tmp_path: Path) -> None:
    (tmp_path / "pay.py").write_text(FLOW)
    crashed = run_cli("run", "pay.py", "-q", "--db", "runs.db", cwd=tmp_path)
    assert crashed.returncode == 9, crashed.stderr
    run_id = run_cli("runs", "--db", "runs.db", cwd=tmp_path).stdout.splitlines()[1].split()[0]
    resumed = run_cli("resume", run_id, "-q", "--db", "runs.db", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (tmp_path / "marks").read_text().splitlines() == ["charge", "fallback", "fallback"]
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        events = store.events(RunId(run_id))
    finally:
        store.close()
    [succeeded] = [e for e in events if e.kind is EventKind.NODE_SUCCEEDED]
    assert succeeded.data is not None and succeeded.data.get("via") == "fallback"
    assert succeeded.value == '"queued 5"'
    started = [e for e in events if e.kind is EventKind.NODE_STARTED]
    assert [(e.attempt, (e.data or {}).get("fallback")) for e in started] == \
        [(1, None), (2, True), (3, True)]
