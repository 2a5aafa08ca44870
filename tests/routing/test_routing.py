"""Routing ``model="auto"``: each policy's choice, escalation on a failed check, learning
from the log, the ``model_routed`` event, and bad configuration; against real
``OpenAIServer`` instances on loopback (one per model)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import counterpoint as cp
from counterpoint.errors import ConfigError
from counterpoint.events import EventKind
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.routing import BudgetLeft, Candidate, Router, RouteRequest, RouteStats
from counterpoint.store import MemoryStore
from counterpoint.testing import OpenAIServer, Reply


@pytest.fixture
def servers() -> Iterator[dict[str, OpenAIServer]]:
    with OpenAIServer(default=Reply.text("wrong")) as cheap, \
            OpenAIServer(default=Reply.text("right")) as strong:
        yield {"cheap": cheap, "strong": strong}


def _registry(servers: dict[str, OpenAIServer]) -> ModelRegistry:
    prices = {"cheap": (0.1, 0.4, 1), "strong": (5.0, 20.0, 2)}
    return ModelRegistry(models={
        name: ModelConfig(name=name, provider="openai", model=name,
                          base_url=srv.base_url, price_input=prices[name][0],
                          price_output=prices[name][1], quality=prices[name][2], retries=0)
        for name, srv in servers.items()})


def _right(generation: Any) -> bool | str:
    return generation.text == "right" or f"expected 'right', got {generation.text!r}"


async def _run(model: Model, store: MemoryStore, nodes: int = 1) -> list[dict[str, Any]]:
    g = cp.Graph("routed")
    for i in range(nodes):
        async def ask() -> str:
            return (await model.generate("Answer", max_tokens=8)).text
        g.add(f"ask{i}", ask)
    result = await cp.run(g, store=store)
    assert result.status == "succeeded", result
    return [e.data or {} for e in store.events(result.run_id)
            if e.kind is EventKind.MODEL_ROUTED]


async def test_cheapest_that_passes_escalates_when_the_check_fails(
        servers: dict[str, OpenAIServer]) -> None:
    model = Model.auto(tags=["math"], check=_right, registry=_registry(servers), cache=False)
    routed = await _run(model, MemoryStore())
    assert [r["model"] for r in routed] == ["cheap", "strong"]
    assert "cheapest plausible" in routed[0]["reason"]
    assert routed[1]["escalated_from"] == "cheap"
    assert routed[1]["failure"]["kind"] == "check"
    assert {c["model"] for c in routed[0]["candidates"]} == {"cheap", "strong"}
    assert len(servers["cheap"].requests) == 1 and len(servers["strong"].requests) == 1


async def test_quality_first_picks_the_strongest(servers: dict[str, OpenAIServer]) -> None:
    model = Model.auto("quality_first", registry=_registry(servers), cache=False)
    routed = await _run(model, MemoryStore())
    assert [r["model"] for r in routed] == ["strong"]
    assert servers["cheap"].requests == []


async def test_failures_in_the_log_change_a_later_choice(
        servers: dict[str, OpenAIServer]) -> None:
    store = MemoryStore()
    model = Model.auto(tags=["math"], check=_right, registry=_registry(servers), cache=False)
    first = await _run(model, store, nodes=2)
    assert [r["model"] for r in first].count("cheap") == 2
    later = await _run(model, store)
    assert [r["model"] for r in later] == ["strong"]
    # another tag has no record: the cheap model is tried first for it
    other = Model.auto(tags=["prose"], check=_right, registry=_registry(servers), cache=False)
    routed = await _run(other, store)
    assert routed[0]["model"] == "cheap"


async def test_every_model_failing_the_check_is_a_clear_error(
        servers: dict[str, OpenAIServer]) -> None:
    model = Model.auto(check=lambda g: "never good", registry=_registry(servers), cache=False)
    with pytest.raises(cp.errors.InvalidOutput, match="no routed model passed"):
        await model.generate("Answer", max_tokens=8)


async def test_unknown_policy_and_no_models_are_config_errors(
        servers: dict[str, OpenAIServer]) -> None:
    with pytest.raises(ConfigError, match="unknown routing policy 'cheapest'"):
        Model.auto("cheapest", registry=_registry(servers))  # where it is written, no call
    with pytest.raises(ConfigError, match="policy must be a name"):
        Model.auto(3, registry=_registry(servers))
    with pytest.raises(ConfigError, match="no model to route to"):
        await Model("auto", registry=ModelRegistry()).generate("x")


def test_a_money_budget_skips_what_does_not_fit() -> None:
    router = Router(candidates=[
        Candidate(name="cheap", quality=1, price_input=1.0, price_output=1.0,
                  context_window=None, tags=()),
        Candidate(name="strong", quality=2, price_input=100.0, price_output=100.0,
                  context_window=None, tags=())], policy="quality_first")
    request = RouteRequest(node=None, tags=(), prompt_tokens=1000, max_tokens=1000,
                           budget=BudgetLeft(money=0.01))
    assert router.choose(request).choice.model == "cheap"


@given(st.lists(st.tuples(st.floats(0, 50), st.integers(0, 5), st.integers(0, 5)),
                min_size=1, max_size=6))
def test_cheapest_that_passes_never_picks_more_than_a_model_known_to_pass(
        models: list[tuple[float, int, int]]) -> None:
    stats = RouteStats()
    cands = []
    for i, (price, passes, fails) in enumerate(models):
        cands.append(Candidate(name=f"m{i}", quality=i, price_input=price, price_output=price,
                               context_window=None, tags=()))
        for _ in range(passes):
            stats.observe(f"m{i}", ["t"], passed=True)
        for _ in range(fails):
            stats.observe(f"m{i}", ["t"], passed=False)
    router = Router(candidates=cands, stats=stats)
    request = RouteRequest(node=None, tags=("t",), prompt_tokens=10, max_tokens=10)
    chosen = router.choose(request).choice.model
    price = {c.name: c.price_input for c in cands}
    passing = [c.name for c in cands if stats.success(c.name, ["t"]) >= request.threshold]
    assert chosen is not None
    for name in passing:
        assert price[chosen] <= price[name]
