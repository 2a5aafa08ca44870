"""``model: auto`` in a workflow file: accepted by the checks, and routed per agent turn."""

from __future__ import annotations

from pathlib import Path

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.store import MemoryStore
from counterpoint.testing import OpenAIServer, Reply
from counterpoint.workflow import load_workflow

FLOW = """\
name: routed
agents:
  solver:
    model: auto
    instructions: Answer.
steps:
  solve:
    agent: solver
    task: What is it?
"""


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
