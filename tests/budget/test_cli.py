"""``counterpoint run --budget-usd/--budget-tokens/--deadline`` and ``show`` as a user runs
them (a sub-run's spending included): subprocesses with their own working directory and
config, against a real OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from counterpoint.testing import OpenAIServer, Reply, Usage

FLOW = '''
import counterpoint as cp

model = cp.Model("sim", cache=False)
graph = cp.Graph("spend")
for i in range(4):
    async def ask() -> str:
        return (await model.generate("Say ok", max_tokens=100)).text
    graph.add(f"ask{i}", ask, after=[f"ask{i - 1}"] if i else [])
'''


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "COLUMNS": "200"}
    for name in ("COUNTERPOINT_CONFIG", "OPENAI_API_KEY", "COUNTERPOINT_MODEL"):
        environment.pop(name, None)
    environment["XDG_CONFIG_HOME"] = str(cwd / "no-user-config")
    return subprocess.run([sys.executable, "-m", "counterpoint.cli", *args], cwd=cwd,
                          capture_output=True, text=True, env=environment, timeout=240)


def _priced_sim(folder: Path, server: OpenAIServer) -> None:
    """A counterpoint.toml whose model ``sim`` is ``server``, at $0.001 per answer token."""
    (folder / "counterpoint.toml").write_text(
        f'[models.sim]\nprovider = "openai"\nmodel = "sim"\nbase_url = '
        f'"{server.base_url}"\nprice_input = 0.0\nprice_output = 1000.0\nretries = 0\n')


def test_a_budget_from_the_command_line_ends_the_run_with_its_partial_results(
        tmp_path: Path) -> None:
    reply = Reply.text("ok", usage=Usage(prompt_tokens=10, completion_tokens=100))
    with OpenAIServer(default=reply) as server:
        _priced_sim(tmp_path, server)
        (tmp_path / "flow.py").write_text(FLOW)
        proc = _cli("run", "flow.py:graph", "--db", "r.db", "--budget-usd", "0.25",
                    "--deadline", "2m", "--no-preflight", "--json", cwd=tmp_path)
        assert len(server.requests) == 2  # each call costs $0.10: the third never went
    assert proc.returncode == 1, proc.stdout + proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["budget"]["spent"]["usd"] == 0.2
    assert payload["budget"]["exhausted"].startswith(
        "budget exhausted: $0.20 of $0.25 spent (run ")
    assert payload["budget"]["exhausted"].endswith("node 'ask2' needs >= $0.10")
    assert payload["outputs"] == {"ask0": "ok", "ask1": "ok"}  # finished nodes kept
    assert "Traceback" not in proc.stderr
    shown = _cli("show", payload["run_id"], "--db", "r.db", cwd=tmp_path)
    assert "budget exhausted: $0.20 of $0.25 spent" in shown.stdout, shown.stdout
    assert "budget    $0.2000 of $0.25 spent, $0.0000 reserved, $0.0500 left; 220 tokens " \
        "spent, 0 reserved; 1 call(s) refused" in shown.stdout


def test_a_bad_deadline_or_budget_is_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "flow.py").write_text(FLOW)
    bad = _cli("run", "flow.py:graph", "--deadline", "soon", "--no-preflight", cwd=tmp_path)
    assert bad.returncode == 2 and "--deadline" in bad.stderr and "30s" in bad.stderr
    zero = _cli("run", "flow.py:graph", "--budget-usd", "0", "--no-preflight", cwd=tmp_path)
    assert zero.returncode == 2 and "--budget-usd must be more than 0 US dollars" in zero.stderr
    assert "Traceback" not in bad.stderr + zero.stderr


SUB_RUN_FLOW = '''
import counterpoint as cp

model = cp.Model("sim", cache=False)
inner = cp.Graph("inner")
for i in range(4):
    async def ask() -> str:
        return (await model.generate("Say ok", max_tokens=100)).text
    inner.add(f"ask{i}", ask, after=[f"ask{i - 1}"] if i else [])
graph = cp.Graph("outer")
graph.add("sub", inner)
'''


def test_a_sub_runs_spending_and_refusals_are_in_the_runs_budget(tmp_path: Path) -> None:
    reply = Reply.text("ok", usage=Usage(prompt_tokens=10, completion_tokens=100))
    with OpenAIServer(default=reply) as server:
        _priced_sim(tmp_path, server)
        (tmp_path / "flow.py").write_text(SUB_RUN_FLOW)
        proc = _cli("run", "flow.py:graph", "--db", "r.db", "--budget-usd", "0.25",
                    "--no-preflight", "--json", cwd=tmp_path)
        assert len(server.requests) == 2  # $0.10 each, in the sub-run: the third never went
    assert proc.returncode == 1, proc.stdout + proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["budget"]["spent"]["usd"] == 0.2, payload["budget"]
    assert payload["budget"]["exhausted"].endswith("node 'ask2' needs >= $0.10")
    shown = _cli("show", payload["run_id"], "--db", "r.db", cwd=tmp_path)
    assert "budget    $0.2000 of $0.25 spent, $0.0000 reserved, $0.0500 left; 220 tokens " \
        "spent, 0 reserved; 1 call(s) refused" in shown.stdout, shown.stdout
