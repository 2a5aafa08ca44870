"""Goal runs with routed workers: the planner tags each subtask with skills (its schema
bounded to the tags the routed models are offered for), and each subtask's calls are
routed by its tags; against OpenAIServer instances on loopback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.models import Model, ModelConfig, ModelRegistry, Request, ScriptedModel
from counterpoint.planning import Limits, Team, goal_graph
from counterpoint.planning.plan import plan_type
from counterpoint.planning.team import PLANNER, SYNTHESIZER, VERIFIER
from counterpoint.routing import retagged
from counterpoint.store import MemoryStore
from counterpoint.testing import OpenAIServer, Reply

PLAN = {"subtasks": [
    {"id": "t1", "task": "add the numbers", "worker": "writer", "needs": [], "tags": ["math"]},
    {"id": "t2", "task": "write a line", "worker": "writer", "needs": [],
     "tags": ["prose", "poetry"]}]}


@pytest.fixture
def registry() -> Iterator[ModelRegistry]:
    with OpenAIServer(default=Reply.text("42")) as mathy, \
            OpenAIServer(default=Reply.text("a line")) as wordy:
        yield ModelRegistry(models={
            name: ModelConfig(name=name, provider="openai", model=name, base_url=srv.base_url,
                              price_input=1.0, price_output=1.0, quality=1, tags=tags,
                              retries=0)
            for name, srv, tags in (("mathy", mathy, ("math",)),
                                    ("wordy", wordy, ("prose",)))})


class Roles:
    """Planner, verifier and synthesizer, scripted by the request's system prompt."""

    def __init__(self) -> None:
        self.plan_requests: list[Request] = []

    def __call__(self, request: Request) -> str:
        system = request.messages[0].content
        if system.startswith(PLANNER):
            self.plan_requests.append(request)
            return json.dumps(PLAN)
        if system.startswith(VERIFIER):
            return json.dumps({"complete": True, "gaps": []})
        assert system.startswith(SYNTHESIZER), system[:60]
        return "Done [t1] [t2]."


async def test_each_subtask_is_routed_by_the_tags_the_planner_gave(
        registry: ModelRegistry) -> None:
    roles = Roles()
    team = Team.default(Model(ScriptedModel([roles] * 10, name="roles")),
                        worker=Model.auto(registry=registry, cache=False))
    store = MemoryStore()
    result = await asyncio.wait_for(cp.run(goal_graph("numbers and words", team, Limits()),
                                           store=store), 30)
    assert result.ok, {k: (v.status.value, v.error) for k, v in result.nodes.items()}
    schema = roles.plan_requests[0].output
    assert schema is not None
    tags = json.dumps(schema.schema_)
    assert '"enum": ["math", "prose"]' in tags  # what the routed models are offered for
    routed: dict[str, dict[str, Any]] = {str(e.node): e.data or {}
                                         for e in store.events(result.run_id)
                                         if e.kind is EventKind.MODEL_ROUTED}
    assert routed["t1"]["tags"] == ["math"] and routed["t1"]["model"] == "mathy"
    # "poetry" is no routed model's tag: reading the plan drops it (no re-ask)
    assert len(roles.plan_requests) == 1
    assert routed["t2"]["tags"] == ["prose"] and routed["t2"]["model"] == "wordy"


def test_plan_tags_are_bounded_in_the_schema_and_asked_only_for_routed_workers() -> None:
    def slot(schema: dict[str, Any]) -> dict[str, Any]:  # the last subtask of the longest plan
        return schema["properties"]["subtasks"]["anyOf"][-1]["prefixItems"][-1]

    untagged = slot(plan_type(["writer"], 3).model_json_schema())  # no worker routed
    assert "tags" not in untagged["properties"]
    open_tags = slot(plan_type(["writer"], 3, ()).model_json_schema())
    item = open_tags["properties"]["tags"]
    assert item["maxItems"] == 2 and item["items"]["maxLength"] == 16
    assert "tags" not in open_tags.get("required", [])
    answer = plan_type(["writer"], 3, ()).model_validate({"subtasks": [
        {"id": "t1", "task": "x", "worker": "writer", "needs": [], "tags": ["a", "a"]}]})
    assert answer.subtasks[0].tags == ["a"]


def test_retagged_leaves_models_that_are_not_routed_alone(registry: ModelRegistry) -> None:
    plain = Model("mathy", registry=registry)
    assert retagged(plain, ["math"]) is plain
    auto = Model.auto(tags=["math"], registry=registry)
    assert retagged(auto, ["math", "prose"]).route.tags == ("math",)  # type: ignore[union-attr]
    assert auto.route is not None and auto.route.tags == ("math",)  # the original unchanged
