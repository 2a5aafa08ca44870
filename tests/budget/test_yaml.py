"""``budget:`` and ``deadline:`` in workflow files: at the workflow, step and agent level,
checked with ``file:line`` errors, and in force when the workflow runs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.budget import Budget
from counterpoint.workflow import WorkflowError, load_workflow
from counterpoint.workflow.spec import AgentSpec

FLOW = """\
name: budgeted
budget: {usd: 0.5, tokens: 20000}
deadline: 30s
agents:
  writer:
    model: scripted
    instructions: Write.
    budget: {tokens: 900}
    deadline: 2m
steps:
  first:
    python: helpers.py:one
    budget: {usd: 0.1}
    deadline: 1m
    timeout: 90
"""


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "helpers.py").write_text("def one() -> int:\n    return 1\n")
    path = tmp_path / "flow.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_budgets_and_deadlines_reach_the_graph_its_nodes_and_agents(tmp_path: Path) -> None:
    wf = load_workflow(_write(tmp_path, FLOW), models={"scripted": cp.ScriptedModel([])})
    assert wf.graph.budget == Budget(usd=0.5, tokens=20000)
    assert wf.graph.deadline == 30.0
    first = wf.graph.nodes[cp.NodeId("first")]
    assert first.policy.budget == Budget(usd=0.1)
    assert first.policy.timeout == 60.0  # the nearer of deadline: 1m and timeout: 90
    agent = AgentSpec.model_validate({"budget": {"tokens": 900}, "deadline": "2m"})
    assert agent.budget is not None and agent.budget.budget() == Budget(tokens=900)
    assert agent.deadline == 120.0
    store = cp.MemoryStore()
    result = cp.run_sync(wf.graph, store=store)
    assert result.ok
    created = store.events(result.run_id)[0].data or {}
    assert created["options"]["budget"] == {"usd": 0.5, "tokens": 20000}
    assert created["deadline_at"] - result.state.created_at == pytest.approx(30.0, abs=5)


@pytest.mark.parametrize(("line", "bad", "message"), [
    (2, "budget: {usd: -1}", "greater than 0"),
    (2, "budget: {dollars: 1}", "dollars"),
    (3, "deadline: soon", "30s"),
    (13, "    budget: {tokens: 0}", "greater than or equal to 1"),
    (9, "    deadline: -3", "> 0 seconds"),
])
def test_a_bad_budget_or_deadline_names_its_line(tmp_path: Path, line: int, bad: str,
                                                 message: str) -> None:
    lines = FLOW.splitlines()
    lines[line - 1] = bad
    with pytest.raises(WorkflowError) as info:
        load_workflow(_write(tmp_path, "\n".join(lines) + "\n"),
                      models={"scripted": cp.ScriptedModel([])})
    text = str(info.value)
    assert f"flow.yaml:{line}" in text and message in text, text
