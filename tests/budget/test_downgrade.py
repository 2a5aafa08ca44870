"""A ``model="auto"`` call under a run's budget: the router reads what is left of it
(``counterpoint.budget.remaining``) and picks a cheaper model as it shrinks, saying so in
the ``model_routed`` reason; against real OpenAIServer instances on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.budget import Budget
from counterpoint.events import EventKind
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.store import MemoryStore
from counterpoint.testing import OpenAIServer, Reply


@pytest.fixture
def registry() -> Iterator[ModelRegistry]:
    with OpenAIServer(default=Reply.text("cheap")) as cheap, \
            OpenAIServer(default=Reply.text("strong")) as strong:
        prices = {"cheap": (0.1, 0.4, 1, cheap), "strong": (5.0, 20.0, 2, strong)}
        yield ModelRegistry(models={
            name: ModelConfig(name=name, provider="openai", model=name,
                              base_url=p[3].base_url, price_input=p[0], price_output=p[1],
                              quality=p[2], retries=0)
            for name, p in prices.items()})


async def _routed(registry: ModelRegistry, budget: Budget | None) -> tuple[str, dict[str, Any]]:
    model = Model.auto("quality_first", registry=registry, cache=False)

    async def ask() -> str:
        return (await model.generate("Answer", max_tokens=100)).text
    g = cp.Graph("routed")
    g.add("ask", ask)
    store = MemoryStore()
    result = await cp.run(g, store=store, options=cp.RunOptions(budget=budget))
    assert result.ok, result
    [routed] = [e.data or {} for e in store.events(result.run_id)
                if e.kind is EventKind.MODEL_ROUTED]
    return str(result.outputs[cp.NodeId("ask")]), routed


async def test_a_roomy_budget_keeps_the_strongest(registry: ModelRegistry) -> None:
    text, routed = await _routed(registry, Budget(usd=10.0))
    assert text == "strong" and "downgraded" not in routed["reason"]


async def test_a_small_budget_downgrades_and_says_so(registry: ModelRegistry) -> None:
    # strong's worst case is ~$0.002: over a quarter of $0.004, so only cheap is chosen
    text, routed = await _routed(registry, Budget(usd=0.004))
    assert text == "cheap"
    assert "downgraded by the budget left ($0.004000): skipped strong" in routed["reason"]
    [strong] = [c for c in routed["candidates"] if c["model"] == "strong"]
    assert strong["by_budget"] is True


async def test_a_budget_no_model_fits_refuses_the_call_as_a_budget_refusal(
        registry: ModelRegistry) -> None:
    # cheap's worst case is ~$0.00004 (a few prompt tokens and 100 answer tokens): over $0.00001
    model = Model.auto("quality_first", registry=registry, cache=False)

    async def ask() -> str:
        return (await model.generate("Answer", max_tokens=100)).text
    g = cp.Graph("squeezed")
    g.add("ask", ask)
    store = MemoryStore()
    result = await cp.run(g, store=store, options=cp.RunOptions(budget=Budget(usd=0.00001)))
    error = result.nodes[cp.NodeId("ask")].error or {}
    assert error.get("type") == "BudgetExceeded", error
    message = str(error.get("message"))
    assert f"run {result.run_id}, node 'ask'" in message
    assert "no model fits the budget left ($0.000010" in message and "cheap" in message
    assert not [e for e in store.events(result.run_id) if e.kind is EventKind.MODEL_CALL]


async def test_a_handles_history_is_its_log(registry: ModelRegistry, tmp_path: Any) -> None:
    """``RunHandle.history`` (what ``counterpoint run`` summarizes a run from, instead of
    reading its log again) holds the events of the log, budget and routing included."""
    model = Model.auto("quality_first", registry=registry, cache=False)
    tries: list[int] = []

    async def ask(i: int) -> str:
        return (await model.generate(f"Answer {i}", max_tokens=50)).text

    def flaky() -> int:
        tries.append(1)
        if len(tries) == 1:
            raise RuntimeError("the first try fails")
        return len(tries)

    def items() -> list[int]:
        return [1, 2, 3]

    g = cp.Graph("kept")
    g.map("asks", ask, over=g.add("items", items), item="i")
    g.add("flaky", flaky, policy=cp.Policy(retries=2, backoff=cp.Backoff(initial=0.0)))
    store = cp.SQLiteStore(tmp_path / "runs.db")
    try:
        handle = await cp.start(g, store=store,
                                options=cp.RunOptions(budget=Budget(usd=1.0)))
        result = await handle.result()
        assert result.ok, result
        # (as JSON: a tuple in an event's data is read back from the log as a list)
        kept = [(e.seq, e.kind, e.node, e.attempt, json.loads(json.dumps(e.data)))
                for e in handle.history()]
        logged = [(e.seq, e.kind, e.node, e.attempt, e.data)
                  for e in store.events(result.run_id)]
        assert kept == logged
        kinds = {k for _, k, *_ in kept}
        assert {EventKind.MODEL_ROUTED, EventKind.MODEL_CALL, EventKind.NODE_FAILED,
                EventKind.MAP_EXPANDED} <= kinds
    finally:
        store.close()
