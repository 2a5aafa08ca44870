"""Goals and workflows end to end on the embedded model: in process, and through the
local OpenAI-compatible server (llama-cpp-python's) that the suite starts.

The model is tiny: the assertions are about structure (a valid plan became a graph,
every node ran, the answer exists), never wording. Token limits are small so each
test takes seconds to a minute on 2 cores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.planning import Limits, Team, goal_graph
from counterpoint.workflow import load_workflow

ROOT = Path(__file__).resolve().parents[2]
DIGEST = ROOT / "examples" / "workflows" / "digest.yaml"
GOAL = "Write two short tips for a first visit to Lisbon."


@pytest.fixture(params=["in-process", "server"])
def model(request: pytest.FixtureRequest) -> Model:
    if request.param == "in-process":
        return Model("local:smollm2")
    base_url = request.getfixturevalue("llama_server")
    registry = ModelRegistry({"llama-server": ModelConfig(
        name="llama-server", provider="openai", model="smollm2", base_url=base_url,
        profile="llama-cpp-python", timeout=300,
        max_concurrency=1)}, "llama-server")  # the server answers one request at a time
    return Model("llama-server", registry=registry)


def _small(team: Team) -> Team:
    for agent in (team.planner, team.verifier, team.replanner, team.synthesizer,
                  *(w for w in team.workers.values() if isinstance(w, cp.agents.Agent))):
        agent.turn_tokens = 64
    # the structured roles' limits would otherwise be raised to fit their longest bounded
    # answer (Team.call_tokens); these tests want seconds, not the worst case
    team.tokens.update(planner=128, verifier=128, replanner=128)
    return team


@pytest.mark.timeout(900)
async def test_a_goal_is_planned_into_a_graph_and_runs_to_completion(model: Model) -> None:
    team = _small(Team.default(model))
    graph = goal_graph(GOAL, team, Limits(max_rounds=1, max_subtasks=2))
    store = cp.MemoryStore()
    result = await cp.run(graph, store=store)
    assert result.ok, {k: n.error for k, n in result.nodes.items() if n.error}
    # under the grammar the first plan is valid by construction (ids in order, needs of
    # earlier ids only): the server took the positional schema, and nothing was re-asked
    rounds = [e.data or {} for e in store.events(result.run_id)
              if e.kind is cp.EventKind.PLAN_ROUND and (e.data or {}).get("phase") == "plan"]
    assert rounds[0]["attempt"] == 1 and rounds[0]["problems"] == [], rounds
    assert len(rounds) == 1
    plan = result["plan"]
    subtasks = [s["id"] for s in plan["subtasks"]]
    assert 1 <= len(subtasks) <= 2
    for sid in subtasks:  # every planned subtask became a node that ran
        assert result.nodes[sid].status is cp.NodeStatus.SUCCEEDED
    assert result.nodes["verify-1"].status is cp.NodeStatus.SUCCEEDED
    assert result["answer"]["answer"].strip()
    assert result.usage.calls >= 4  # plan, each subtask, verify, answer


@pytest.mark.timeout(900)
async def test_the_digest_workflow_runs_end_to_end(model: Model) -> None:
    if model.name == "local:smollm2":
        pytest.skip("in process, the README's main-job test runs this workflow through "
                    "the CLI (tests/workflow/test_workflow_embedded.py)")
    workflow = load_workflow(DIGEST, models={"*": model})
    result = await cp.run(workflow.graph, inputs=workflow.bind_inputs({}), store="memory")
    assert result.ok, {k: n.error for k, n in result.nodes.items() if n.error}
    assert len(result["extract"]) == 4
    assert all(note["title"].strip() for note in result["extract"])
    assert result.output["digest"].strip()
