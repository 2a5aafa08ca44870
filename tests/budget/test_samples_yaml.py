"""``samples:`` in workflow files: on an agent (every model turn sampled) and on an agent
step (overriding its agent's); in force under the workflow's budget when it runs, against
a real OpenAI-compatible server on loopback; bad values name their file:line."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.testing import OpenAIServer, Reply, Usage
from counterpoint.workflow import WorkflowError, load_workflow

FLOW = """\
name: voted
budget: {usd: 0.35}
agents:
  judge:
    model: sim
    instructions: Answer yes or no.
    samples: 5
    turn_tokens: 100
steps:
  ask:
    agent: judge
    task: Is it?
  again:
    agent: judge
    task: Is it really?
    samples: 1
"""


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    reply = Reply.text("yes", usage=Usage(prompt_tokens=20, completion_tokens=100))
    with OpenAIServer(default=reply) as srv:
        yield srv


def _sim(server: OpenAIServer) -> Model:
    return Model("sim", cache=False, registry=ModelRegistry(models={"sim": ModelConfig(
        name="sim", provider="openai", model="sim", base_url=server.base_url,
        price_input=0.0, price_output=1000.0, retries=0)}))


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "flow.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_samples_of_an_agent_are_downgraded_by_the_workflow_budget(
        tmp_path: Path, server: OpenAIServer) -> None:
    flow = FLOW.replace("  again:\n    agent: judge\n    task: Is it really?\n    samples: 1\n",
                        "")
    wf = load_workflow(_write(tmp_path, flow), models={"sim": _sim(server)})
    store = cp.MemoryStore()
    result = cp.run_sync(wf.graph, store=store)
    assert result.ok, result
    assert len(server.requests) == 3  # $0.35 covers 3 samples of $0.10
    [sampled] = [e.data or {} for e in store.events(result.run_id)
                 if e.kind is EventKind.MODEL_SAMPLED]
    assert (sampled["requested"], sampled["sent"], sampled["downgraded_by"]) == \
        (5, 3, "budget")


def test_a_step_sets_its_own_number_of_samples(tmp_path: Path, server: OpenAIServer) -> None:
    flow = FLOW.replace("budget: {usd: 0.35}", "budget: {usd: 10}")
    wf = load_workflow(_write(tmp_path, flow), models={"sim": _sim(server)})
    store = cp.MemoryStore()
    result = cp.run_sync(wf.graph, store=store)
    assert result.ok, result
    sampled = {str(e.node): (e.data or {})["sent"] for e in store.events(result.run_id)
               if e.kind is EventKind.MODEL_SAMPLED}
    assert sampled == {"ask": 5}  # again's samples: 1 is a single call
    assert len(server.requests) == 6


@pytest.mark.parametrize(("line", "bad", "message"), [
    (7, "    samples: 0", "greater than or equal to 1"),
    (7, "    samples: x", "valid integer"),
    (7, "    samples: 2.5", "valid integer"),
    (16, "    samples: -2", "greater than or equal to 1"),
])
def test_a_bad_number_of_samples_names_its_line(tmp_path: Path, server: OpenAIServer,
                                                line: int, bad: str, message: str) -> None:
    lines = FLOW.splitlines()
    lines[line - 1] = bad
    with pytest.raises(WorkflowError) as info:
        load_workflow(_write(tmp_path, "\n".join(lines) + "\n"), models={"sim": _sim(server)})
    text = str(info.value)
    assert f"flow.yaml:{line}" in text and message in text and "samples" in text, text


def test_samples_on_a_python_step_is_refused(tmp_path: Path, server: OpenAIServer) -> None:
    (tmp_path / "helpers.py").write_text("def one() -> int:\n    return 1\n")
    flow = FLOW + "  count:\n    python: helpers.py:one\n    samples: 3\n"
    with pytest.raises(WorkflowError) as info:
        load_workflow(_write(tmp_path, flow), models={"sim": _sim(server)})
    assert "flow.yaml:19" in str(info.value) and "samples: applies to agent:" in \
        str(info.value)
