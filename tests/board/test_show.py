"""``counterpoint show`` prints a run's blackboard from the log alone: keys, versions,
conflicts, refused calls (and ``--json`` holds the same)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import counterpoint as cp
from counterpoint.agents import Agent, tool
from counterpoint.models import ScriptedModel, ToolCall
from counterpoint.store import SQLiteStore


@tool
def wipe(key: str) -> str:
    """Wipe a key."""
    return "wiped"


@tool
def look(key: str) -> str:
    """Look at a key."""
    return key


def _show(run_id: str, db: Path, *extra: str) -> str:
    done = subprocess.run([sys.executable, "-m", "counterpoint.cli", "show", run_id, "--db",
                           str(db), *extra], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_show_prints_keys_conflicts_and_refused_calls(tmp_path: Path) -> None:
    g = cp.Graph("shown", board=cp.Board(keys={"tally": cp.Key(policy="sum"),
                                               "pick": cp.Key(policy="first_wins")}))

    def count(ctx: cp.NodeContext) -> None:
        ctx.board.write("tally", 40)
        ctx.board.write("tally", 2)
        ctx.board.write("pick", "red")

    def late(ctx: cp.NodeContext) -> None:
        ctx.board.write("pick", "blue")

    scripted = ScriptedModel([[ToolCall(id="1", name="wipe", arguments={"key": "tally"})],
                              "ok"])
    agent = Agent("auditor", model=scripted, tools=[wipe, look],
                  capabilities=cp.Capabilities(tools={"look"}))
    first = g.add("count", count)
    g.add("audit", agent, task="Audit.", after=[g.add("late", late, after=[first])])
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    try:
        result = await cp.run(g, store=store)
    finally:
        store.close()
    assert result.ok

    text = _show(result.run_id, db)
    assert "board     2 key(s), 1 conflict(s), 0 queue(s), 1 call(s) refused" in text
    assert "tally  v2 = 42  last by count (sum)" in text
    assert 'pick  v1 = "red"  last by count (set)  1 conflict(s)' in text
    assert "conflict #" in text and "pick (first_wins, kept) by late" in text
    assert "refused #" in text and "agent auditor in node audit (tool): tool 'wipe' is not " \
        "among its tools ['look']" in text

    data = json.loads(_show(result.run_id, db, "--json"))["board"]
    assert data["keys"]["tally"] == {"value": 42, "version": 2, "owner": None, "conflicts": 0}
    assert [(c["key"], c["outcome"]) for c in data["conflicts"]] == [("pick", "kept")]
    assert [(d["node"], d["what"]) for d in data["denied"]] == [("audit", "tool")]
