"""Breaker settings from files: ``[health]`` in counterpoint.toml (defaults, per model,
per tool) and ``health:`` in a workflow; in force for the calls of a model configured
there (a real OpenAI-compatible server on loopback, time moved by a ManualClock), and
every unknown key or bad value named with its file:line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from support import run_cli

import counterpoint as cp
from counterpoint.errors import ConfigError, ModelUnavailable
from counterpoint.health import BreakerState, HealthRegistry, use_health
from counterpoint.models import Model, load_registry
from counterpoint.testing import ManualClock, OpenAIServer, Reply
from counterpoint.workflow import WorkflowError, load_workflow

TOML = """\
[models.fast]
provider = "openai"
model = "m"
base_url = "{url}"
retries = 0

[health]
failures = 4
open_for = 60

[health.models.fast]
failures = 2

[health.tools.search]
slow_call = 10
"""


def _toml(tmp_path: Path, text: str, url: str = "http://127.0.0.1:9/v1") -> Path:
    path = tmp_path / "counterpoint.toml"
    path.write_text(text.replace("{url}", url))
    return path


def test_health_settings_are_read_with_defaults_under_each_override(tmp_path: Path) -> None:
    registry = load_registry([_toml(tmp_path, TOML)])
    health = HealthRegistry()
    health.adopt(registry.health)
    fast = health.breaker("model:fast").options
    assert (fast.failures, fast.open_for) == (2, 60.0)  # its own, then the defaults
    search = health.breaker("tool:search").options
    assert (search.failures, search.slow_call) == (4, 10.0)
    other = health.breaker("model:other").options
    assert (other.failures, other.open_for, other.slow_call) == (4, 60.0, None)


async def test_a_configured_model_opens_its_breaker_after_its_own_failures(
        tmp_path: Path) -> None:
    with OpenAIServer(default=Reply.status(503)) as down:
        registry = load_registry([_toml(tmp_path, TOML, down.base_url)])
        model = Model("fast", registry=registry, cache=False)
        health = HealthRegistry(clock=ManualClock())
        with use_health(health):
            for _ in range(2):
                with pytest.raises(ModelUnavailable):
                    await model.generate("hi", max_tokens=8)
            assert health.state("model:fast") is BreakerState.OPEN  # 2, not the default 3
            with pytest.raises(ModelUnavailable, match="circuit open"):
                await model.generate("hi", max_tokens=8)
        assert len(down.requests) == 2


@pytest.mark.parametrize(("old", "new", "line", "message"), [
    ("failures = 4", "failurs = 4", 8, "unknown health setting 'failurs'"),
    ("open_for = 60", 'open_for = "soon"', 9,
     "open_for must be a finite number >= 0, got 'soon'"),
    ("open_for = 60", "open_for = nan", 9, "open_for must be a finite number >= 0, got nan"),
    ("open_for = 60", "open_for = inf", 9, "open_for must be a finite number >= 0, got inf"),
    ("failures = 2", "failures = true", 12, "failures must be a whole number >= 1, got True"),
    ("slow_call = 10", "slow_call = -1", 15, "slow_call must be > 0 seconds (a number)"),
    ("failures = 2", "failures = 2.5", 12, "failures must be a whole number"),
    ("slow_call = 10", "slow_cal = 10", 15, "unknown health setting 'slow_cal'"),
    ("failures = 2", "failures = 0", 12, "failures must be >= 1"),
    ("open_for = 60", "open_for = 60\nwindow = 5", 10, "min_calls <= window"),
])
def test_a_bad_health_setting_names_its_line(tmp_path: Path, old: str, new: str, line: int,
                                             message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_registry([_toml(tmp_path, TOML.replace(old, new, 1))])
    text = str(info.value)
    assert f"counterpoint.toml:{line}:" in text and message in text, text


FLOW = """\
name: guarded
health:
  failures: 5
  models:
    fast: {open_for: 5}
  tools:
    lookup: {failures: 1}
agents:
  looker:
    model: fast
    tools: [helpers.py:lookup]
steps:
  one:
    python: helpers.py:one
"""


def _flow(tmp_path: Path, text: str) -> Path:
    (tmp_path / "helpers.py").write_text("def one() -> int:\n    return 1\n\n\n"
                                         "def lookup() -> str:\n    return 'x'\n")
    path = tmp_path / "flow.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_workflow_health_is_put_in_force_when_it_is_loaded(tmp_path: Path) -> None:
    health = HealthRegistry()
    with use_health(health):
        workflow = load_workflow(_flow(tmp_path, FLOW),
                                 models={"fast": cp.ScriptedModel([])})
    assert workflow.health.defaults == {"failures": 5}
    sim = health.breaker("model:fast").options
    assert (sim.failures, sim.open_for) == (5, 5.0)
    assert health.breaker("tool:lookup").options.failures == 1
    assert health.breaker("model:other").options.failures == 5


def test_a_workflows_health_stands_over_the_configuration_files(tmp_path: Path) -> None:
    registry = load_registry([_toml(tmp_path, TOML)])  # failures = 4 by default
    health = HealthRegistry()
    with use_health(health):
        load_workflow(_flow(tmp_path, FLOW), models={"fast": cp.ScriptedModel([])})
        _ = Model("fast", registry=registry).registry  # a model call reads its file's
        health.adopt(registry.health)  # and again: nothing changes
    assert health.breaker("model:other").options.failures == 5  # the workflow's, not 4
    fast = health.breaker("model:fast").options
    assert (fast.failures, fast.open_for) == (2, 5.0)  # the file's failures, the flow's 5
    assert health.breaker("tool:lookup").options.failures == 1


@pytest.mark.parametrize(("old", "new", "line", "message"), [
    ("  failures: 5", "  failures: many", 3, "failures must be a whole number"),
    ("  failures: 5", "  retries: 5", 3, "unknown health setting 'retries'"),
    ("    fast: {open_for: 5}", "    fast: {open: 5}", 5, "unknown health setting 'open'"),
    ("    lookup: {failures: 1}", "    lookup: 1", 7, "must be a table of settings"),
])
def test_a_bad_workflow_health_names_its_line(tmp_path: Path, old: str, new: str,
                                              line: int, message: str) -> None:
    with use_health(HealthRegistry()), pytest.raises(WorkflowError) as info:
        load_workflow(_flow(tmp_path, FLOW.replace(old, new, 1)),
                      models={"fast": cp.ScriptedModel([])})
    text = str(info.value)
    assert f"flow.yaml:{line}:" in text and message in text, text



def test_the_cli_reports_a_bad_health_setting_as_one_error(tmp_path: Path) -> None:
    _toml(tmp_path, TOML.replace("failures = 2", "failures = -1", 1))
    _flow(tmp_path, FLOW)
    proc = run_cli("run", "flow.yaml", "--db", "r.db", cwd=tmp_path, timeout=240)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "counterpoint.toml:12" in proc.stderr and "failures must be >= 1" in proc.stderr
    assert "Traceback" not in proc.stderr
    _toml(tmp_path, TOML)
    _flow(tmp_path, FLOW.replace("  failures: 5", "  failures: 5\n  probes: 0"))
    proc = run_cli("run", "flow.yaml", "--db", "r.db", cwd=tmp_path, timeout=240)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "flow.yaml:4: probes must be >= 1" in proc.stderr, proc.stderr
    assert "3 problems" not in proc.stderr  # said once, not again for each override
    assert "Traceback" not in proc.stderr
