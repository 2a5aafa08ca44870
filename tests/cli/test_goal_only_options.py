"""``counterpoint run FILE`` refuses the options only a goal has a meaning for (--samples,
--topology, --rounds, ...) when FILE is a workflow file or a Python graph, and --model
on a Python graph: exit 2 and a message saying what to write instead, nothing run. A
subprocess, as a user runs it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import run_cli

GRAPH = '''import counterpoint as cp
g = cp.Graph("g")


@g.step
def a() -> int:
    return 1
'''
FLOW = "name: w\nsteps:\n  s:\n    python: tools.py:hi\n"



@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "g.py").write_text(GRAPH)
    (tmp_path / "tools.py").write_text("def hi() -> str:\n    return 'hi'\n")
    (tmp_path / "w.yaml").write_text(FLOW)
    return tmp_path


@pytest.mark.parametrize("option", [
    ["--samples", "3"], ["--topology", "single"], ["--rounds", "0"], ["--max-subtasks", "2"],
    ["--check", "*"], ["--role-tokens", "worker=10"], ["--planner-model", "m"],
    ["--worker-model", "m"], ["--verifier-model", "m"], ["--synthesizer-model", "m"]])
@pytest.mark.parametrize("target", ["g.py", "w.yaml"])
def test_a_goal_only_option_on_a_file_is_a_usage_error(files: Path, target: str,
                                                       option: list[str]) -> None:
    proc = run_cli("run", target, *option, "--db", "r.db", "--no-preflight", cwd=files)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    kind = "a workflow file" if target == "w.yaml" else "a Python graph"
    assert (f"error: {option[0]} applies to goal runs only (counterpoint run \"GOAL\"), "
            f"and {target} is {kind}; leave it out, or ") in proc.stderr
    assert "Traceback" not in proc.stderr and not (files / "r.db").exists()


def test_the_workflow_message_says_where_samples_go_and_names_every_option(
        files: Path) -> None:
    proc = run_cli("run", "w.yaml", "--samples", "3", "--rounds", "1", "--db", "r.db",
                cwd=files)
    assert proc.returncode == 2
    assert "--samples, --rounds apply to goal runs only" in proc.stderr
    assert "write `samples: N` on an agent or an agent step" in proc.stderr


def test_model_on_a_python_graph_is_a_usage_error_but_not_on_a_workflow(files: Path) -> None:
    proc = run_cli("run", "g.py", "--model", "m", "--db", "r.db", "--no-preflight", cwd=files)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--model applies to goals and workflow files, and g.py is a Python graph" \
        in proc.stderr
    proc = run_cli("run", "w.yaml", "--model", "m", "--db", "r.db", "--no-preflight", "-q",
                cwd=files)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # its default model


def test_the_defaults_typed_nowhere_still_run_a_file(files: Path) -> None:
    proc = run_cli("run", "g.py", "--db", "r.db", "--no-preflight", "-q", cwd=files)
    assert proc.returncode == 0, proc.stdout + proc.stderr
