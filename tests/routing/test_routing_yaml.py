"""``model: auto`` in a workflow file: accepted by the checks, and routed per agent turn."""

from __future__ import annotations

from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.store import MemoryStore
from counterpoint.testing import OpenAIServer, Reply
from counterpoint.workflow import WorkflowError, load_workflow

FLOW = (Path(__file__).resolve().parents[1] / "fixtures" / "routed_flow.yaml").read_text()
"""A workflow whose one agent has ``model: auto`` (shared with the routing CLI/YAML tests)."""


async def test_model_auto_in_yaml_routes_each_turn(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(FLOW)
    load_workflow(path)  # `auto` is not reported as an unknown model name
    with OpenAIServer(default=Reply.text("right")) as srv:
        registry = ModelRegistry(models={"m": ModelConfig(
            name="m", provider="openai", model="m", base_url=srv.base_url, quality=1,
            price_input=1.0, price_output=1.0, retries=0)})
        flow = load_workflow(path, models={"auto": Model.auto(registry=registry,
                                                              cache=False)})
        store = MemoryStore()
        result = await cp.run(flow.graph, store=store)
    assert result.status == "succeeded", result
    routed = [e.data or {} for e in store.events(result.run_id)
              if e.kind is EventKind.MODEL_ROUTED]
    assert routed and routed[0]["model"] == "m"


ROUTED = """\
name: routed
route:
  policy: quality_first
  tags: [prose]
agents:
  solver:
    model: auto
    instructions: Answer.
steps:
  inherit:
    agent: solver
    task: What is it?
  override:
    agent: solver
    task: And this?
    route:
      policy: cheapest_that_passes
      tags: [math]
  restricted:
    agent: solver
    task: And that?
    route:
      models: [cheap]
"""


def _registry(cheap: OpenAIServer, strong: OpenAIServer) -> ModelRegistry:
    return ModelRegistry(models={
        name: ModelConfig(name=name, provider="openai", model=name, base_url=srv.base_url,
                          quality=q, price_input=p, price_output=p, retries=0)
        for name, srv, q, p in (("cheap", cheap, 1, 0.1), ("strong", strong, 2, 5.0))})


async def test_route_at_workflow_and_step_level_steers_each_step(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(ROUTED)
    with OpenAIServer(default=Reply.text("a")) as cheap, \
            OpenAIServer(default=Reply.text("b")) as strong:
        flow = load_workflow(path, models={"auto": Model.auto(
            registry=_registry(cheap, strong), cache=False)})
        store = MemoryStore()
        result = await cp.run(flow.graph, store=store)
    assert result.status == "succeeded", result
    routed = {str(e.node): e.data or {} for e in store.events(result.run_id)
              if e.kind is EventKind.MODEL_ROUTED}
    assert routed["inherit"]["policy"] == "quality_first"
    assert routed["inherit"]["tags"] == ["prose"] and routed["inherit"]["model"] == "strong"
    assert routed["override"]["policy"] == "cheapest_that_passes"
    assert routed["override"]["tags"] == ["math"] and routed["override"]["model"] == "cheap"
    # models: restricts the candidates; the workflow's policy and tags still apply
    assert [c["model"] for c in routed["restricted"]["candidates"]] == ["cheap"]
    assert routed["restricted"]["policy"] == "quality_first"


BAD = """\
name: bad
route:
  polcy: quality_first
agents:
  solver:
    model: auto
  fixed:
    model: plain
steps:
  one:
    agent: solver
    task: x
    route:
      policy: cheapest
  two:
    agent: fixed
    task: y
    route:
      tags: [math]
  three:
    python: os.path:basename
    args: {p: a}
    route:
      tags: [math]
  four:
    agent: solver
    task: z
    route:
      models: [plain, ghost]
"""


def test_bad_routes_are_reported_with_file_and_line(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "counterpoint.toml"
    config.write_text('[models.plain]\nprovider = "openai"\nmodel = "p"\n'
                      'base_url = "http://127.0.0.1:9/v1"\n')
    monkeypatch.setenv("COUNTERPOINT_CONFIG", str(config))
    path = tmp_path / "flow.yaml"
    path.write_text(BAD)
    with pytest.raises(WorkflowError) as caught:
        load_workflow(path)
    text = str(caught.value)
    lines = BAD.splitlines()

    def at(needle: str, after: int = 0) -> str:
        line = next(i for i, s in enumerate(lines, 1) if needle in s and i > after)
        return f"{path}:{line}: "

    assert at("polcy") + "workflow: route: unknown key 'polcy'" in text
    assert "did you mean 'policy'?" in text
    assert at("policy: cheapest") + "step 'one': route.policy: input should be " \
        "'cheapest_that_passes', 'quality_first' or 'latency_first'" in text
    assert at("route:", after=lines.index("  two:")) + "step 'two': route: applies to " \
        "model: auto, and its agent 'fixed' uses 'plain'" in text
    assert at("route:", after=lines.index("  three:")) + "step 'three': route: applies to " \
        "agent: steps, not python:" in text
    assert at("models: [plain, ghost]") + "route: model 'plain'" in text
    assert "has no quality rank" in text and "ghost" in text
