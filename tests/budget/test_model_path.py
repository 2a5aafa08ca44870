"""Budgets on the model call path, against a real OpenAI-compatible HTTP server on
loopback (``counterpoint.testing.OpenAIServer``): many calls in flight under a money
budget never overspend (measured from the run log), refused calls name run, node and
budget, unpriced models are refused under a money budget, token budgets, children get at
most what is left, and resume counts what was spent before."""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.budget import Budget, spending, spent_in_log
from counterpoint.events import EventKind
from counterpoint.ids import NodeId, RunId
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.store import MemoryStore, RunStore
from counterpoint.testing import OpenAIServer, Reply, Usage

ANSWER = 100
"""Answer tokens each call asks for (``max_tokens``) and, as scripted, is charged."""
PRICE_OUT = 1000.0
"""USD per million answer tokens: one call's bound is ANSWER * PRICE_OUT / 1e6 = $0.10
(the prompt is free, so the bound is exact)."""
EACH = ANSWER * PRICE_OUT / 1e6


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    reply = Reply.text("ok", usage=Usage(prompt_tokens=20, completion_tokens=ANSWER))
    with OpenAIServer(default=reply.after(0.05)) as srv:
        yield srv


def _model(server: OpenAIServer, *, priced: bool = True) -> Model:
    registry = ModelRegistry(models={"sim": ModelConfig(
        name="sim", provider="openai", model="sim", base_url=server.base_url,
        price_input=0.0 if priced else None, price_output=PRICE_OUT if priced else None,
        retries=0)})
    return Model("sim", registry=registry, cache=False)


def _fan_out(model: Model, nodes: int, name: str = "fan") -> cp.Graph:
    g = cp.Graph(name)
    for i in range(nodes):
        async def ask() -> str:
            return (await model.generate("Say ok", max_tokens=ANSWER)).text
        g.add(f"ask{i}", ask)
    return g


def _failures(store: RunStore, run_id: RunId) -> dict[str, dict[str, Any]]:
    return {e.node or "": e.data or {} for e in store.events(run_id)
            if e.kind is EventKind.NODE_FAILED}


async def test_sixteen_calls_in_flight_under_a_budget_for_five_never_overspend(
        server: OpenAIServer) -> None:
    store = MemoryStore()
    result = await cp.run(_fan_out(_model(server), 16), store=store,
                          options=cp.RunOptions(budget=Budget(usd=5.5 * EACH)))
    events = store.events(result.run_id)
    spent, _ = spent_in_log(events)
    calls = [e.data or {} for e in events if e.kind is EventKind.MODEL_CALL]
    assert sum(c["cost"] for c in calls) == pytest.approx(spent.usd)
    assert spent.usd <= 5.5 * EACH + 1e-12  # zero overspend, measured from the log
    assert len(calls) == 5 and len(server.requests) == 5  # exactly what fits was sent
    assert server.peak_concurrency <= 5
    failed = _failures(store, result.run_id)
    assert len(failed) == 11
    for node, error in failed.items():
        assert error["type"] == "BudgetExceeded", error
        assert f"run {result.run_id}, node '{node}'" in error["message"]
        assert f"budget of $0.55 of run {result.run_id}" in error["message"]
    succeeded = [n for n, ns in result.state.nodes.items() if ns.status == "succeeded"]
    assert len(succeeded) == 5
    assert sum(1 for e in events if e.kind is EventKind.BUDGET_RESERVED) == 5


async def test_an_unpriced_model_is_refused_under_a_money_budget(
        server: OpenAIServer) -> None:
    store = MemoryStore()
    result = await cp.run(_fan_out(_model(server, priced=False), 1), store=store,
                          options=cp.RunOptions(budget=Budget(usd=1.0)))
    error = _failures(store, result.run_id)["ask0"]
    assert error["type"] == "UnpricedModel"
    assert "price_input" in error["message"] and "ask0" in error["message"]
    assert server.requests == []  # nothing was sent


async def test_a_token_budget_counts_prompt_and_answer_tokens(server: OpenAIServer) -> None:
    store = MemoryStore()
    model = _model(server, priced=False)  # a token budget needs no price
    one = await cp.run(_fan_out(model, 1), store=store)
    used = spent_in_log(store.events(one.run_id))[0].tokens
    assert used == 20 + ANSWER
    result = await cp.run(_fan_out(model, 6, "tokens"), store=store,
                          options=cp.RunOptions(budget=Budget(tokens=500)))
    spent = spent_in_log(store.events(result.run_id))[0]
    assert spent.tokens <= 500
    failed = _failures(store, result.run_id)
    assert failed and all(f["type"] == "BudgetExceeded" for f in failed.values())
    assert any("tokens" in f["message"] for f in failed.values())


async def test_a_node_budget_and_a_sub_run_get_at_most_what_is_left_of_the_run(
        server: OpenAIServer) -> None:
    model = _model(server)
    inner = _fan_out(model, 4, "inner")
    g = cp.Graph("outer")
    g.add("sub", inner, policy=cp.Policy(budget=Budget(usd=100.0)))  # more than the run's
    store = MemoryStore()
    result = await cp.run(g, store=store, options=cp.RunOptions(budget=Budget(usd=2.5 * EACH)))
    costs = [(e.data or {}).get("cost") or 0.0 for r in store.runs()
             for e in store.events(r.run_id) if e.kind is EventKind.MODEL_CALL]
    assert len(costs) == 2 and sum(costs) <= 2.5 * EACH + 1e-12
    assert result.status != "succeeded"


async def test_an_agent_or_goal_spending_block_is_capped_by_its_own_budget(
        server: OpenAIServer) -> None:
    model = _model(server)
    g = cp.Graph("agentish")

    async def work() -> int:
        done = 0
        with spending(Budget(usd=1.5 * EACH), where="agent a"):
            for _ in range(4):
                try:
                    await model.generate("Say ok", max_tokens=ANSWER)
                except cp.errors.BudgetExceeded as exc:
                    assert exc.budget == f"agent a: ${1.5 * EACH:g}"
                    break
                done += 1
        return done
    g.add("work", work)
    result = await cp.run(g, store=MemoryStore(), options=cp.RunOptions(budget=Budget(usd=1.0)))
    assert result.status == "succeeded"
    assert result.state.nodes[NodeId("work")].output == 1


async def _two_calls(server: OpenAIServer, first: Reply) -> tuple[RunStore, Any]:
    server.script(first)
    model = Model("sim", cache=False, timeout=0.5, registry=ModelRegistry(models={
        "sim": ModelConfig(name="sim", provider="openai", model="sim",
                           base_url=server.base_url, price_input=0.0,
                           price_output=PRICE_OUT, retries=0)}))
    g = cp.Graph("two")

    async def twice() -> str:
        with contextlib.suppress(cp.errors.ModelError):
            await model.generate("Say ok", max_tokens=ANSWER)
        return (await model.generate("Say ok", max_tokens=ANSWER)).text
    g.add("twice", twice)
    store = MemoryStore()
    result = await cp.run(g, store=store, options=cp.RunOptions(budget=Budget(usd=1.5 * EACH)))
    return store, result


async def test_a_call_with_no_answer_keeps_its_bound_and_an_http_error_releases_it(
        server: OpenAIServer) -> None:
    store, result = await _two_calls(server, Reply.status(500))
    assert result.ok  # the 500 was not served: the second call fits
    store, result = await _two_calls(server, Reply.hang(5))
    assert not result.ok  # the hung call may have been paid: the second does not fit
    error = result.state.nodes[NodeId("twice")].error or {}
    assert error["type"] == "BudgetExceeded"
    spent, _ = spent_in_log(store.events(result.run_id))
    assert spent.usd == pytest.approx(EACH)


def test_the_embedded_model_costs_nothing_unless_a_file_prices_it(tmp_path: pathlib.Path) -> None:
    from counterpoint.models import load_registry
    from counterpoint.models.config import builtin
    from counterpoint.models.types import Usage as Spent

    local = builtin("local:smollm2")  # runs in this process: a money budget may use it
    assert local.priced and local.cost(Spent(input_tokens=900, output_tokens=100)).cost == 0
    path = tmp_path / "counterpoint.toml"
    path.write_text('[models.mine]\nprovider = "local"\nmodel = "smollm2"\n'
                    "price_input = 1.0\nprice_output = 2.0\n")
    mine = load_registry([path]).resolve("mine")
    assert (mine.price_input, mine.price_output) == (1.0, 2.0)
