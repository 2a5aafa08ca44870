"""``counterpoint run`` checks its models first, and the goal options' errors, as a user
runs them: subprocesses with their own working directory and config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from counterpoint.testing import OpenAIServer, Reply


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 240) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "COLUMNS": "200", **(env or {})}
    for name in ("COUNTERPOINT_CONFIG", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
                 "COUNTERPOINT_MODEL"):
        environment.pop(name, None)
    environment["XDG_CONFIG_HOME"] = str(cwd / "no-user-config")
    return subprocess.run([sys.executable, "-m", "counterpoint.cli", *args], cwd=cwd,
                          capture_output=True, text=True, env=environment, timeout=timeout)


def test_a_goal_run_without_keys_is_one_error_before_it_starts(tmp_path: Path) -> None:
    proc = _cli("run", "Compare two cities", "--db", "r.db", "--model", "openai:gpt-4.1-mini",
                "--verifier-model", "anthropic:claude-sonnet-4-5", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: 2 models cannot be used")
    assert "OPENAI_API_KEY" in lines[0] and "ANTHROPIC_API_KEY" in lines[0]
    assert "--verifier-model anthropic:claude-sonnet-4-5" in lines[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r.db").exists()  # no run was started


def test_a_workflow_names_the_line_of_its_model(tmp_path: Path) -> None:
    (tmp_path / "flow.yaml").write_text(
        "name: flow\nagents:\n  writer:\n    model: openai:gpt-4.1-mini\n"
        "    instructions: Write.\nsteps:\n  write:\n    agent: writer\n"
        "    task: Say hi.\n")
    proc = _cli("run", "flow.yaml", "--db", "r.db", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "OPENAI_API_KEY" in proc.stderr and "flow.yaml:4" in proc.stderr


def test_no_preflight_starts_the_run_and_its_nodes_fail(tmp_path: Path) -> None:
    proc = _cli("run", "Compare two cities", "--db", "r.db", "--model", "openai:gpt-4.1-mini",
                "--no-preflight", "--rounds", "0", "-q", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the run started and failed
    assert "OPENAI_API_KEY" in proc.stdout + proc.stderr


def test_role_tokens_and_goal_tokens_errors_say_where(tmp_path: Path) -> None:
    bad = _cli("run", "Compare two cities", "--role-tokens", "critic=100", cwd=tmp_path)
    assert bad.returncode == 2 and "critic=100" in bad.stderr and "verifier" in bad.stderr
    zero = _cli("plan", "Compare two cities", "--role-tokens", "planner=0", cwd=tmp_path)
    assert zero.returncode == 2 and ">= 1" in zero.stderr
    (tmp_path / "counterpoint.toml").write_text(
        '[defaults]\nmodel = "local:smollm2"\n\n[goal.tokens]\nplanner = 900\n'
        'verifier = "lots"\n')
    proc = _cli("run", "Compare two cities", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "counterpoint.toml:6" in proc.stderr and "goal.tokens.verifier" in proc.stderr
    (tmp_path / "counterpoint.toml").write_text('[defaults]\ncache = "no"\n')
    cache = _cli("run", "Compare two cities", cwd=tmp_path)
    assert cache.returncode == 2 and "counterpoint.toml:2" in cache.stderr


def test_goal_tokens_reach_the_roles_calls(tmp_path: Path) -> None:
    with OpenAIServer([Reply.json({"ok": True}),  # the preflight probe
                       Reply.json({"subtasks": [{"id": "t1", "task": "Compare them.",
                                                 "worker": "writer", "needs": []}]}),
                       Reply.text("Lisbon is bigger [t1]."),
                       Reply.text("Lisbon is bigger than Porto [t1].")]) as server:
        (tmp_path / "counterpoint.toml").write_text(
            f'[defaults]\nmodel = "served"\n\n[models.served]\nprovider = "openai"\n'
            f'model = "m"\nbase_url = "{server.base_url}"\nprofile = "vllm"\n\n'
            '[goal.tokens]\nplanner = 700\nworker = 300\n')
        proc = _cli("run", "Compare Lisbon and Porto", "--db", "r.db", "--rounds", "0",
                    "--role-tokens", "synthesizer=200", "-q", cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        sent = [r.body["max_tokens"] for r in server.requests if "messages" in (r.body or {})]
    assert sent == [24, 700, 300, 200]  # the probe, planner, worker, synthesizer
    assert "Lisbon is bigger than Porto" in proc.stdout


def test_models_shows_key_reachability_structured_output_and_latency(tmp_path: Path) -> None:
    with OpenAIServer([Reply.json({"ok": True})]) as server:
        (tmp_path / "counterpoint.toml").write_text(
            f'[defaults]\nmodel = "served"\n\n[models.served]\nprovider = "openai"\n'
            f'model = "m"\nbase_url = "{server.base_url}"\nprofile = "vllm"\n\n'
            '[models.keyed]\nprovider = "openai"\nmodel = "gpt-4.1-mini"\n'
            'api_key_env = "NO_SUCH_KEY_FOR_TEST"\n')
        proc = _cli("models", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # keyed has no key
    header = proc.stdout.splitlines()[0]
    for column in ("key", "reachable", "structured output", "latency", "profile"):
        assert column in header
    served = next(line for line in proc.stdout.splitlines() if line.startswith("served"))
    assert "vllm" in served and served.count("ok") == 2
    assert "NO_SUCH_KEY_FOR_TEST is not set" in proc.stdout
