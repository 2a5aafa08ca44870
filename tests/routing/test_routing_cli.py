"""``counterpoint run`` of a workflow with ``model: auto``, as a user runs it: the
preflight checks every model auto may route to, and the run routes; a subprocess with
its own working directory and config, against OpenAIServer instances on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from counterpoint.testing import OpenAIServer, RecordedRequest, Reply

FLOW = (Path(__file__).resolve().parents[1] / "fixtures" / "routed_flow.yaml").read_text()
"""A workflow whose one agent has ``model: auto`` (shared with the routing CLI/YAML tests)."""


def _answer(request: RecordedRequest) -> Reply:
    if 'Reply {"ok": true}' in request.last_user_text:  # the preflight's probe
        return Reply.json({"ok": True})
    return Reply.text("it")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "XDG_CONFIG_HOME": str(cwd / "none")}
    env.pop("COUNTERPOINT_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "counterpoint.cli", *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=240)


def _config(tmp_path: Path, servers: dict[str, OpenAIServer], quality: bool = True) -> None:
    text = ""
    for rank, (name, srv) in enumerate(servers.items(), 1):
        text += (f'[models.{name}]\nprovider = "openai"\nmodel = "{name}"\n'
                 f'base_url = "{srv.base_url}"\nprice_input = {rank}\nprice_output = {rank}\n'
                 + (f"quality = {rank}\n" if quality else "") + "\n")
    (tmp_path / "counterpoint.toml").write_text(text)


def test_a_routed_workflow_preflights_every_candidate_and_runs(tmp_path: Path) -> None:
    with OpenAIServer(default=Reply.dynamic(_answer)) as small, \
            OpenAIServer(default=Reply.dynamic(_answer)) as large:
        _config(tmp_path, {"small": small, "large": large})
        (tmp_path / "flow.yaml").write_text(FLOW)
        proc = _cli("run", "flow.yaml", "--db", "r.db", "--json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        probes: list[Any] = [r for s in (small, large) for r in s.requests
                             if 'Reply {"ok": true}' in r.last_user_text]
        assert len(probes) == 2  # each model auto may route to was checked
    data = json.loads(proc.stdout)
    assert data["status"] == "succeeded"
    shown = json.loads(_cli("show", data["run_id"], "--db", "r.db", "--json",
                            cwd=tmp_path).stdout)
    assert shown["nodes"]["solve"]["routing"]["model"] == "small"


def test_no_model_to_route_to_is_one_error_before_the_run(tmp_path: Path) -> None:
    with OpenAIServer(default=Reply.dynamic(_answer)) as only:
        _config(tmp_path, {"only": only}, quality=False)
        (tmp_path / "flow.yaml").write_text(FLOW)
        proc = _cli("run", "flow.yaml", "--db", "r.db", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "no model to route to" in proc.stderr and "flow.yaml:4" in proc.stderr


def test_a_goal_runs_routed_worker_preflights_each_candidate() -> None:
    from counterpoint.cli.preflight import goal_uses
    from counterpoint.models import Model, ModelConfig, ModelRegistry
    from counterpoint.planning import Team
    registry = ModelRegistry(models={n: ModelConfig(name=n, provider="openai", model=n,
                                                    base_url="http://127.0.0.1:9/v1",
                                                    quality=q)
                                     for n, q in (("a", 1), ("b", 2))})
    team = Team.default("openai:gpt-4.1-mini", worker=Model.auto(registry=registry))
    uses = {(u.name, u.where) for u in goal_uses(team, {"worker": "--worker-model auto"})}
    assert ("a", "role worker 'writer' (--worker-model auto), routed to by model auto") in uses
    assert ("b", "role worker 'writer' (--worker-model auto), routed to by model auto") in uses
    assert not any(name == "auto" for name, _ in uses)


def test_the_run_summary_lists_what_the_router_chose_per_node(tmp_path: Path) -> None:
    with OpenAIServer(default=Reply.dynamic(_answer)) as small, \
            OpenAIServer(default=Reply.dynamic(_answer)) as large:
        _config(tmp_path, {"small": small, "large": large})
        (tmp_path / "flow.yaml").write_text(FLOW)
        proc = _cli("run", "flow.yaml", "--db", "r.db", cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        as_json = _cli("run", "flow.yaml", "--db", "r.db", "--json", cwd=tmp_path)
    table = proc.stdout[:proc.stdout.index("makespan")]  # the node table, above the metrics
    assert "routing" in table, proc.stdout
    [row] = [line for line in table.splitlines() if line.lstrip().startswith("solve")]
    assert "small (cheapest_that_passes: " in row, proc.stdout
    routed = json.loads(as_json.stdout)["nodes"]["solve"]["routing"]
    assert routed["model"] == "small" and routed["policy"] == "cheapest_that_passes"
    assert routed["reason"]
