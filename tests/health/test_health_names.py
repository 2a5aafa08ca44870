"""A ``health:`` override naming a model or tool that does not exist is refused with its
file:line and the known names (a typo would leave its breaker settings silently
unapplied): in a workflow when it loads (its agents known), in ``counterpoint.toml``
when the configured models are read (``[health.tools.NAME]`` is not checked there:
tools are defined in code)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.errors import ConfigError
from counterpoint.models import load_registry
from counterpoint.workflow import WorkflowError, load_workflow

FLOW = """\
name: healed
health:
  models:
    scripted: {failures: 2}
    openai:gpt-4.1-mini: {failures: 5}
  tools:
    hi: {failures: 3}
agents:
  a:
    model: scripted
    tools: [tools.py:hi]
steps:
  s:
    agent: a
    task: go
"""
TOML = """\
[models.fast]
provider = "openai"
model = "m"
base_url = "http://127.0.0.1:9/v1"

[health.models.fast]
failures = 2

[health.models."openai:gpt-4.1-mini"]
failures = 4

[health.tools.search]
failures = 2
"""


def _flow(tmp_path: Path, text: str) -> Path:
    (tmp_path / "tools.py").write_text("def hi() -> str:\n    return 'hi'\n")
    path = tmp_path / "flow.yaml"
    path.write_text(text)
    return path


def _load(path: Path) -> None:
    load_workflow(path, models={"scripted": cp.ScriptedModel([])})


def test_overrides_of_the_workflows_models_and_tools_load(tmp_path: Path) -> None:
    _load(_flow(tmp_path, FLOW))


def test_an_unknown_model_or_tool_in_a_workflows_health_names_its_line(
        tmp_path: Path) -> None:
    path = _flow(tmp_path, FLOW.replace("    scripted: {failures: 2}",
                                        "    scriptd: {failures: 2}")
                 .replace("    hi: {failures: 3}", "    hii: {failures: 3}"))
    with pytest.raises(WorkflowError) as info:
        _load(path)
    text = str(info.value)
    assert (f"{path}:4: health: models: 'scriptd' is not a model this workflow can call; "
            "the known models are scripted and any provider:model "
            "name") in text, text
    assert (f"{path}:7: health: tools: 'hii' is not a tool of this workflow's agents; the "
            "tools are hi") in text, text


def test_a_toml_override_of_an_unknown_model_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "counterpoint.toml"
    path.write_text(TOML)
    registry = load_registry([path])  # a configured name, a provider:model name, a tool
    assert set(registry.health.models) == {"fast", "openai:gpt-4.1-mini"}
    path.write_text(TOML.replace("[health.models.fast]", "[health.models.fsat]"))
    with pytest.raises(ConfigError) as info:
        load_registry([path])
    assert str(info.value) == (
        f"{path}:6: [health.models.fsat] names no model; the configured models are fast, "
        "or write a provider:model name (openai:gpt-4.1-mini); fix the name, or add "
        "[models.fsat]")


def test_a_model_configured_in_a_later_file_may_be_named_in_an_earlier(
        tmp_path: Path) -> None:
    (tmp_path / "user.toml").write_text("[health.models.fast]\nfailures = 2\n")
    (tmp_path / "project.toml").write_text(TOML.split("[health")[0])
    registry = load_registry([tmp_path / "user.toml", tmp_path / "project.toml"])
    assert "fast" in registry.health.models


@pytest.mark.parametrize("where", ["workflow", "toml"])
def test_run_exits_2_on_an_unknown_name(tmp_path: Path, where: str) -> None:
    _flow(tmp_path, FLOW.replace("    hi: {failures: 3}", "    hii: {failures: 3}")
          if where == "workflow" else FLOW)
    if where == "toml":
        (tmp_path / "counterpoint.toml").write_text(
            TOML.replace("[health.models.fast]", "[health.models.fsat]"))
    environment = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "none")}
    environment.pop("COUNTERPOINT_CONFIG", None)
    proc = subprocess.run([sys.executable, "-m", "counterpoint.cli", "run", "flow.yaml",
                           "--db", "r.db", "--no-preflight"], cwd=tmp_path,
                          capture_output=True, text=True, env=environment, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    expected = "flow.yaml:7: health: tools: 'hii' is not a tool" if where == "workflow" \
        else "counterpoint.toml:6: [health.models.fsat] names no model"
    assert expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
