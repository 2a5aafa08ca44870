"""The summary ``counterpoint run "GOAL"`` prints at the end of the run and ``counterpoint
show`` of the same run agree on the critical path: both run through the ``plan`` node,
whose live edit added the subtasks (cli/app.py ``_result_report``, cli/recorded.py).

Regression: the run's own summary computed its metrics from the state alone, and the
subtasks do not depend on ``plan``, so its critical path was ``(plan)`` where ``show``
said ``(plan -> t1 -> t2 -> answer)``. A subprocess against a scripted
OpenAI-compatible server on loopback, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

from support import run_cli

from counterpoint.testing import OpenAIServer, Reply

PLAN = {"subtasks": [{"id": "t1", "task": "Describe Lisbon.", "worker": "writer",
                      "needs": []},
                     {"id": "t2", "task": "Describe Porto.", "worker": "writer",
                      "needs": []}]}
CHAIN = ["plan", "t1", "t2", "answer"]


def _config(folder: Path, server: OpenAIServer) -> None:
    (folder / "counterpoint.toml").write_text(
        f'[defaults]\nmodel = "served"\n\n[models.served]\nprovider = "openai"\n'
        f'model = "m"\nbase_url = "{server.base_url}"\nprofile = "vllm"\n')


def _replies() -> list[Reply]:
    return [Reply.json(PLAN), Reply.text("Lisbon: big."), Reply.text("Porto: smaller."),
            Reply.text("Lisbon is bigger [t1] than Porto [t2].")]


def _path_line(text: str) -> str:
    return next(line.strip() for line in text.splitlines()
                if line.strip().startswith("critical path"))


def test_the_run_summary_and_show_name_the_same_critical_path(tmp_path: Path) -> None:
    with OpenAIServer(_replies()) as server:
        _config(tmp_path, server)
        ran = run_cli("run", "Compare Lisbon and Porto", "--db", "r.db", "--rounds", "0",
                      "--topology", "sequential", "--no-preflight", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    shown = run_cli("show", "last", "--db", "r.db", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    nodes = "(" + " -> ".join(CHAIN) + ")"
    assert nodes in _path_line(ran.stdout)
    assert nodes in _path_line(shown.stdout)


def test_run_json_and_show_json_agree_on_the_critical_path(tmp_path: Path) -> None:
    with OpenAIServer(_replies()) as server:
        _config(tmp_path, server)
        ran = run_cli("run", "Compare Lisbon and Porto", "--db", "r.db", "--rounds", "0",
                      "--topology", "sequential", "--no-preflight", "--json", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    shown = run_cli("show", "last", "--db", "r.db", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    ran_metrics = json.loads(ran.stdout)["metrics"]
    shown_metrics = json.loads(shown.stdout)["metrics"]
    assert ran_metrics["critical_path_nodes"] == CHAIN
    assert shown_metrics["critical_path_nodes"] == CHAIN
    assert ran_metrics["critical_path"] == shown_metrics["critical_path"]
