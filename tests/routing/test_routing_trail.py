"""What routing did, per node, as ``counterpoint show`` prints it (routing.trail), from
real runs against OpenAIServer instances on loopback and a SQLite store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.routing.trail import routing_by_node
from counterpoint.store import MemoryStore
from counterpoint.testing import OpenAIServer, Reply


@pytest.fixture
def registry() -> Iterator[ModelRegistry]:
    with OpenAIServer(default=Reply.text("wrong")) as cheap, \
            OpenAIServer(default=Reply.text("right")) as strong:
        yield ModelRegistry(models={
            name: ModelConfig(name=name, provider="openai", model=name, base_url=srv.base_url,
                              price_input=p, price_output=p, quality=q, retries=0)
            for name, srv, p, q in (("cheap", cheap, 0.1, 1), ("strong", strong, 5.0, 2))})


def _graph(registry: ModelRegistry, check: Any) -> cp.Graph:
    model = Model.auto(tags=["math"], check=check, registry=registry, cache=False)

    async def ask() -> str:
        return (await model.generate("Answer", max_tokens=8)).text

    g = cp.Graph("routed")
    g.add("ask", ask)
    g.add("plain", lambda: 1)
    return g


def _right(generation: Any) -> bool:
    return bool(generation.text == "right")


def test_show_has_a_routing_column_with_the_escalation(registry: ModelRegistry,
                                                       tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    result = cp.run_sync(_graph(registry, _right), store=str(db))
    assert result.ok
    env = {**os.environ, "COLUMNS": "220"}
    shown = subprocess.run([sys.executable, "-m", "counterpoint.cli", "show", result.run_id,
                            "--db", str(db)], capture_output=True, text=True, env=env,
                           timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "routing" in shown.stdout
    row = next(line for line in shown.stdout.splitlines() if line.startswith("ask"))
    assert "cheap ✗check → strong" in row and "cheapest_that_passes, 1 escalation" in row
    assert "cheapest plausible for math" in row
    plain = next(line for line in shown.stdout.splitlines() if line.startswith("plain"))
    assert plain.rstrip().endswith("-")
    data = json.loads(subprocess.run(
        [sys.executable, "-m", "counterpoint.cli", "show", result.run_id, "--db", str(db),
         "--json"], capture_output=True, text=True, env=env, timeout=120).stdout)
    routing = data["nodes"]["ask"]["routing"]
    assert routing["model"] == "strong" and routing["escalations"] == 1
    assert routing["calls"] == [{"models": ["cheap", "strong"], "failures": ["check"],
                                 "exhausted": False}]
    assert "routing" not in data["nodes"]["plain"]


async def test_a_call_no_model_passed_is_shown_as_such(registry: ModelRegistry) -> None:
    store = MemoryStore()
    result = await cp.run(_graph(registry, lambda g: "never good"), store=store)
    assert not result.ok
    trail = routing_by_node(store.events(result.run_id))
    node = trail["ask"]
    assert node.model is None and node.calls[-1].exhausted
    assert "cheap ✗check → strong ✗check → none passed" in node.text()
    assert set(trail) == {"ask"}  # the plain node made no routed call


async def test_the_web_views_node_details_carry_the_routing(registry: ModelRegistry) -> None:
    from counterpoint.history import project
    from counterpoint.ids import NodeId
    from counterpoint.ui.projection import node_detail
    store = MemoryStore()
    result = await cp.run(_graph(registry, _right), store=store)
    events = store.events(result.run_id)
    state = project(result.run_id, events).state
    detail = node_detail(state, NodeId("ask"), events)
    assert detail["routing"]["model"] == "strong"
    assert detail["routing"]["text"].startswith("cheap ✗check → strong")
    assert node_detail(state, NodeId("plain"), events)["routing"] is None
