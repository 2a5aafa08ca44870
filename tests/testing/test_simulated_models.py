"""counterpoint.testing.simulated_models: the simulated models (a simulation) and the task
suite, served by a real OpenAIServer on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.models import Model
from counterpoint.store import MemoryStore
from counterpoint.testing.simulated_models import (
    SimulatedModel,
    SimulatedModels,
    Task,
    answer_of,
    standard_lineup,
    task_suite,
)

TASKS = task_suite(60, seed=3)


@pytest.fixture(scope="module")
def fleet() -> Iterator[SimulatedModels]:
    with SimulatedModels(standard_lineup(), TASKS, seed=3) as sims:
        yield sims


def test_the_suite_is_seeded_mixed_and_knows_its_answers() -> None:
    assert task_suite(60, seed=3) == TASKS
    assert task_suite(60, seed=4) != TASKS
    assert {t.difficulty for t in TASKS} == {1, 2, 3}
    assert {t.tags[0] for t in TASKS} == {"lookup", "math", "code"}
    for task in TASKS:
        a, b, c = (int(x) for x in task.question.split("What is ")[1].rstrip("?")
                   .replace("*", " ").replace("+", " ").split())
        assert task.answer == str(a * b + c)
    only_hard = task_suite(20, weights={3: 1.0})
    assert {t.difficulty for t in only_hard} == {3} and only_hard[0].tags[1] == "hard"


def test_success_follows_the_configured_rate_and_weaker_models_fail_more() -> None:
    many = task_suite(3000, seed=1, weights={2: 1.0}, skills=["lookup"])
    sims = SimulatedModels(standard_lineup(), many, seed=1)
    rates = {name: sum(sims.succeeds(name, t) for t in many) / len(many)
             for name in sims.models}
    for name, model in sims.models.items():
        assert rates[name] == pytest.approx(model.success[2], abs=0.03), name
    nested = SimulatedModels(standard_lineup(), many, seed=1, correlation=1.0)
    for task in many[:500]:  # one shared hardness: a task the large fails, all fail
        if not nested.succeeds("sim-large", task):
            assert not nested.succeeds("sim-tiny", task)


def test_a_tag_override_lowers_the_rate() -> None:
    tiny = standard_lineup()[0]
    math = Task(id="m", question="q", answer="1", difficulty=2, tags=("math", "medium"))
    code = Task(id="c", question="q", answer="1", difficulty=2, tags=("code", "medium"))
    assert tiny.rate(math) == 0.20 and tiny.rate(code) == 0.40


async def test_a_model_answers_right_exactly_when_it_succeeds(fleet: SimulatedModels) -> None:
    registry = fleet.registry(retries=0)
    for name in ("sim-tiny", "sim-large"):
        model = Model(name, registry=registry, cache=False)
        for task in TASKS[:6]:
            text = (await model.generate(task.prompt(), max_tokens=64)).text
            assert (answer_of(text) == task.answer) is fleet.succeeds(name, task)
            verdict = fleet.check(task)(type("G", (), {"text": text})())
            assert (verdict is True) is fleet.succeeds(name, task)
    assert fleet.engines["sim-large"].prompt_tokens > 0  # each model has its own engine
    assert fleet.calls["sim-tiny"] >= 6 and fleet.calls["sim-large"] >= 6


async def test_unknown_model_or_task_are_http_errors(fleet: SimulatedModels) -> None:
    registry = fleet.registry(retries=0)
    with pytest.raises(cp.errors.ModelError, match="no known"):
        await Model("sim-tiny", registry=registry, cache=False).generate("no task id here")
    bad = SimulatedModels([SimulatedModel(name="x", quality=1, price_input=1, price_output=1,
                                          success={1: 1.0})], TASKS)
    with bad:
        from counterpoint.models import ModelConfig, ModelRegistry
        other = ModelRegistry(models={"y": ModelConfig(
            name="y", provider="openai", model="y", base_url=bad.server.base_url, retries=0)})
        with pytest.raises(cp.errors.ModelError, match="does not exist"):
            await Model("y", registry=other, cache=False).generate(TASKS[0].prompt())


async def test_routing_escalates_until_the_check_passes(fleet: SimulatedModels) -> None:
    task = next(t for t in TASKS if not fleet.succeeds("sim-tiny", t)
                and fleet.succeeds("sim-large", t))
    model = Model.auto(tags=task.tags, check=fleet.check(task),
                       registry=fleet.registry(retries=0), cache=False)

    async def solve() -> str | None:
        return answer_of((await model.generate(task.prompt(), max_tokens=64)).text)

    g = cp.Graph("sim")
    g.add("solve", solve)
    store = MemoryStore()
    result = await cp.run(g, store=store)
    assert result.ok and result.output == {"solve": task.answer}
    routed = [e.data or {} for e in store.events(result.run_id)
              if e.kind is EventKind.MODEL_ROUTED]
    assert routed[0]["model"] == "sim-tiny" and routed[-1]["escalated_from"]
    assert fleet.succeeds(routed[-1]["model"], task)
