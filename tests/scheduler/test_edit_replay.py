"""A node's live edit, made again by its re-run (a retry, or the resume after a crash), is
the edit it made before: not applied twice, and not a duplicate-id failure."""

from __future__ import annotations

from pathlib import Path

from support import run_cli

import counterpoint as cp
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


async def leaf(n: int) -> int:
    mark(f"leaf {n}")
    return n * 10


async def editor(ctx: cp.NodeContext) -> str:
    """Adds two nodes that wait for it; its first run's process dies once the edit is
    durable."""
    mark(f"editor {ctx.attempt}")
    edit = cp.Edit("two more")
    edit.add("x1", leaf, n=1, after=[ctx.node])
    edit.add("x2", leaf, n=2, after=[ctx.node])
    ctx.apply(edit)
    if not (HERE / "died").exists():
        (HERE / "died").touch()
        await ctx.flush()
        os._exit(9)  # the edit is in the log; the editor's success never reached it
    return "edited"


graph = cp.Graph("edits")
graph.add("editor", editor)
'''


def test_a_resumed_node_that_edited_before_its_crash_makes_the_same_edit_once(
        tmp_path: Path) -> None:
    (tmp_path / "edits.py").write_text(FLOW)
    crashed = run_cli("run", "edits.py", "-q", "--db", "runs.db", cwd=tmp_path)
    assert crashed.returncode == 9, crashed.stderr
    run_id = run_cli("runs", "--db", "runs.db", cwd=tmp_path).stdout.splitlines()[1].split()[0]
    resumed = run_cli("resume", run_id, "-q", "--db", "runs.db", "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    marks = (tmp_path / "marks").read_text().splitlines()
    assert marks.count("editor 1") == 1 and marks.count("editor 2") == 1
    assert sorted(m for m in marks if m.startswith("leaf")) == ["leaf 1", "leaf 2"]
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        events = store.events(RunId(run_id))
        assert store.run(RunId(run_id)).status == "succeeded"
    finally:
        store.close()
    assert sum(e.kind is EventKind.PATCH_APPLIED for e in events) == 1


def _retried_editor(second: int) -> cp.Graph:
    async def leaf(n: int) -> int:
        return n * 10

    async def editor(ctx: cp.NodeContext) -> int:
        edit = cp.Edit("one more")
        edit.add("x1", leaf, n=1 if ctx.attempt == 1 else second)
        version = ctx.apply(edit)
        if ctx.attempt == 1:
            raise RuntimeError("transient, after the edit")
        return version

    graph = cp.Graph("retried")
    graph.add("editor", editor, retries=1, policy=cp.Policy(backoff=cp.Backoff(initial=0.0)))
    return graph


def test_a_retry_that_makes_its_edit_again_gets_the_version_it_had() -> None:
    store = cp.MemoryStore()
    result = cp.run_sync(_retried_editor(second=1), store=store)
    assert result.ok, result.nodes["editor"].error
    assert result.outputs == {"editor": 1, "x1": 10}
    assert sum(e.kind is EventKind.PATCH_APPLIED for e in store.events(result.run_id)) == 1


def test_a_retry_that_makes_another_edit_with_the_same_id_is_still_refused() -> None:
    result = cp.run_sync(_retried_editor(second=2), store=cp.MemoryStore())
    error = result.nodes["editor"].error or {}
    assert result.nodes["editor"].status is cp.NodeStatus.FAILED
    assert error.get("type") == "PatchError"
    assert "'x1': duplicate node id" in error.get("message", "")


def test_an_edit_made_twice_by_one_attempt_is_refused_the_second_time() -> None:
    async def leaf() -> int:
        return 1

    async def editor(ctx: cp.NodeContext) -> str:
        for _ in range(2):
            edit = cp.Edit()
            edit.add("x1", leaf)
            ctx.apply(edit)
        return "twice"

    graph = cp.Graph("twice")
    graph.add("editor", editor)
    result = cp.run_sync(graph, store=cp.MemoryStore())
    assert result.nodes["editor"].status is cp.NodeStatus.FAILED
    assert "duplicate node id" in (result.nodes["editor"].error or {}).get("message", "")
