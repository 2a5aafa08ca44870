"""``counterpoint run GOAL --topology SHAPE`` forces how the plan runs (recorded in the
log), and an unknown shape is a usage error before anything starts. A subprocess
against a real OpenAI-compatible server on loopback, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from counterpoint.events import EventKind
from counterpoint.store import SQLiteStore
from counterpoint.testing import OpenAIServer, Reply


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "COLUMNS": "200"}
    for name in ("COUNTERPOINT_CONFIG", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
                 "COUNTERPOINT_MODEL"):
        environment.pop(name, None)
    environment["XDG_CONFIG_HOME"] = str(cwd / "no-user-config")
    return subprocess.run([sys.executable, "-m", "counterpoint.cli", *args], cwd=cwd,
                          capture_output=True, text=True, env=environment, timeout=240)


def test_an_unknown_topology_is_a_usage_error(tmp_path: Path) -> None:
    proc = _cli("run", "Compare two cities", "--topology", "star", "--db", "r.db",
                cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("topology 'star' (--topology, or Limits(topology=)) is not one of auto, single, "
            "parallel") in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "r.db").exists()


def test_a_forced_chain_runs_its_subtasks_one_after_another(tmp_path: Path) -> None:
    plan = {"subtasks": [{"id": "t1", "task": "Describe Lisbon.", "worker": "writer",
                          "needs": []},
                         {"id": "t2", "task": "Describe Porto.", "worker": "writer",
                          "needs": []}]}
    with OpenAIServer([Reply.json(plan), Reply.text("Lisbon: big."),
                       Reply.text("Porto: smaller."),
                       Reply.text("Lisbon is bigger [t1] than Porto [t2].")]) as server:
        (tmp_path / "counterpoint.toml").write_text(
            f'[defaults]\nmodel = "served"\n\n[models.served]\nprovider = "openai"\n'
            f'model = "m"\nbase_url = "{server.base_url}"\nprofile = "vllm"\n')
        proc = _cli("run", "Compare Lisbon and Porto", "--db", "r.db", "--rounds", "0",
                    "--topology", "sequential", "--no-preflight", "-q", cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        # t2's worker was asked after t1's, with t1's result as its context
        second = server.requests[2].body["messages"]
        assert "Lisbon: big." in str(second) and "Describe Porto." in str(second)
    store = SQLiteStore(tmp_path / "r.db")
    try:
        [record] = store.runs(limit=1)
        [chosen] = [e.data or {} for e in store.events(record.run_id)
                    if e.kind is EventKind.TOPOLOGY_CHOSEN]
        assert chosen["shape"] == "sequential" and chosen["forced"] is True
    finally:
        store.close()
