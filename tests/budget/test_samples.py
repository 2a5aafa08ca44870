"""Parallel samples under a budget (``Model.generate(..., samples=N)``), against a real
OpenAI-compatible HTTP server on loopback: the budget left decides how many are sent
(each reserved before it is sent, never overspent), the downgrade is a ``model_sampled``
event, the vote picks the majority or the best score, and bad options are refused."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.budget import Budget, spent_in_log
from counterpoint.errors import ConfigError
from counterpoint.events import EventKind
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.models.call import Generation
from counterpoint.store import MemoryStore
from counterpoint.testing import OpenAIServer, RecordedRequest, Reply, Usage

ANSWER = 100
PRICE_OUT = 1000.0
"""USD per million answer tokens: a sample's bound is ANSWER * PRICE_OUT / 1e6 = $0.10
(the prompt is free, so the bound is exact)."""
EACH = ANSWER * PRICE_OUT / 1e6
VOTES = ["Yes", "no", "yes.", " YES ", "maybe"]
"""What the server answers the 1st, 2nd, ... request it gets."""


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    lock = threading.Lock()
    seen: list[int] = []

    def respond(request: RecordedRequest) -> Reply:
        with lock:
            seen.append(int(request.body.get("seed") or 0))
            text = VOTES[(len(seen) - 1) % len(VOTES)]
        return Reply.text(text, usage=Usage(prompt_tokens=20, completion_tokens=ANSWER))
    with OpenAIServer(default=Reply.dynamic(respond)) as srv:
        yield srv


def _model(server: OpenAIServer, concurrency: int | None = None) -> Model:
    return Model("sim", cache=False, registry=ModelRegistry(models={"sim": ModelConfig(
        name="sim", provider="openai", model="sim", base_url=server.base_url,
        price_input=0.0, price_output=PRICE_OUT, retries=0,
        max_concurrency=concurrency)}))


async def _sampled(model: Model, budget: Budget | None, **options: Any
                   ) -> tuple[cp.RunResult, MemoryStore]:
    async def ask() -> dict[str, Any]:
        generation = await model.generate("Is it?", max_tokens=ANSWER, temperature=0.8,
                                          **options)
        sampled = generation.sampled
        assert sampled is not None
        return {"text": generation.text, "sent": sampled.sent, "agree": sampled.agree,
                "calls": generation.calls}
    graph = cp.Graph("sampled")
    graph.add("ask", ask)
    store = MemoryStore()
    result = await cp.run(graph, store=store, options=cp.RunOptions(budget=budget))
    return result, store


def _sampled_event(store: MemoryStore, result: cp.RunResult) -> dict[str, Any]:
    [event] = [e.data or {} for e in store.events(result.run_id)
               if e.kind is EventKind.MODEL_SAMPLED]
    return event


async def test_a_budget_covering_three_of_five_samples_sends_exactly_three(
        server: OpenAIServer) -> None:
    result, store = await _sampled(_model(server), Budget(usd=0.35), samples=5)
    assert result.ok, result
    output = result.outputs[cp.NodeId("ask")]
    assert len(server.requests) == 3 and output["sent"] == 3 and output["calls"] == 3
    assert output["text"].strip().casefold().startswith("yes") and output["agree"] == 2
    spent, _ = spent_in_log(store.events(result.run_id))
    assert spent.usd <= 0.35 + 1e-12 and spent.usd == pytest.approx(3 * EACH)
    event = _sampled_event(store, result)
    assert event["requested"] == 5 and event["sent"] == 3
    assert event["downgraded_by"] == "budget"
    assert event["reason"].startswith("samples downgraded from 5 to 3 by the budget ($0.3500")
    reserved = [e for e in store.events(result.run_id) if e.kind is EventKind.BUDGET_RESERVED]
    assert len(reserved) == 3  # each sample reserved (and logged) before it was sent


async def test_samples_run_concurrently_under_the_model_limit_and_vote(
        server: OpenAIServer) -> None:
    result, store = await _sampled(_model(server, concurrency=2), None, samples=5)
    assert result.ok, result
    output = result.outputs[cp.NodeId("ask")]
    assert len(server.requests) == 5 and output["sent"] == 5
    assert output["agree"] == 3  # Yes, yes., YES against no and maybe
    seeds = {r.body.get("seed") for r in server.requests}
    assert len(seeds) == 5  # every sample is its own call
    event = _sampled_event(store, result)
    assert event["downgraded_by"] is None and event["reason"] == "5 samples sent"


async def test_a_score_function_picks_the_best_sample(server: OpenAIServer) -> None:
    def longest(generation: Generation[Any]) -> float:
        return len(generation.text.strip())
    result, store = await _sampled(_model(server), None, samples=5, pick=longest)
    assert result.ok, result
    assert result.outputs[cp.NodeId("ask")]["text"] == "maybe"
    assert _sampled_event(store, result)["pick"] == "score"


async def test_a_budget_not_even_one_sample_fits_refuses_the_call(
        server: OpenAIServer) -> None:
    result, _ = await _sampled(_model(server), Budget(usd=0.05), samples=5)
    error = result.nodes[cp.NodeId("ask")].error or {}
    assert error.get("type") == "BudgetExceeded", error
    assert f"run {result.run_id}, node 'ask'" in str(error.get("message"))
    assert not server.requests


@pytest.mark.parametrize("samples", [0, -1, "x", True, 2.5])
async def test_bad_samples_are_refused_before_anything_is_sent(
        server: OpenAIServer, samples: Any) -> None:
    with pytest.raises(ConfigError, match=r"model sim: samples must be a whole number >= 1"):
        await _model(server).generate("q", samples=samples)
    assert not server.requests


async def test_an_unknown_pick_is_refused(server: OpenAIServer) -> None:
    with pytest.raises(ConfigError, match="pick must be 'majority' or a function"):
        await _model(server).generate("q", samples=3, pick="best")
    assert not server.requests


async def test_samples_that_cost_less_than_their_bound_make_room_for_more() -> None:
    cheap = Reply.text("yes", usage=Usage(prompt_tokens=20, completion_tokens=ANSWER // 5))
    with OpenAIServer(default=cheap) as server:  # each answer costs a fifth of its bound
        result, store = await _sampled(_model(server), Budget(usd=0.25), samples=5)
    assert result.ok, result
    # $0.25 holds two bounds at first; each settled sample frees 4/5 of its hold
    assert len(server.requests) == 5 and result.outputs[cp.NodeId("ask")]["sent"] == 5
    spent, _ = spent_in_log(store.events(result.run_id))
    assert spent.usd == pytest.approx(5 * EACH / 5) and spent.usd <= 0.25
    assert _sampled_event(store, result)["downgraded_by"] is None


async def test_show_has_a_samples_column_and_the_node_details_say_the_downgrade(
        server: OpenAIServer) -> None:
    from rich.console import Console

    from counterpoint.cli.recorded import log_report
    from counterpoint.cli.render import payload, summary
    result, store = await _sampled(_model(server), Budget(usd=0.35), samples=5)
    report = log_report(store.run(result.run_id), store.events(result.run_id))
    console = Console(width=160, record=True, markup=False)
    console.print(summary(report, inspect=None))
    text = console.export_text()
    [row] = [line for line in text.splitlines() if line.startswith("ask ")]
    assert "samples" in text and "3/5 sent (budget), majority 2/3" in row, text
    details = payload(report)["nodes"]["ask"]["samples"]
    assert details["reason"].startswith("samples downgraded from 5 to 3 by the budget")
    from counterpoint.ui.projection import node_detail  # the web view's node details
    web = node_detail(result.state, cp.NodeId("ask"), store.events(result.run_id))
    assert web["samples"]["text"] == "3/5 sent (budget), majority 2/3"


async def test_a_deadline_shorter_than_the_measured_latency_sends_one_sample() -> None:
    from counterpoint.testing import ManualClock

    slow = Reply.text("yes", usage=Usage(prompt_tokens=20, completion_tokens=ANSWER))
    with OpenAIServer(default=slow.after(0.2)) as server:  # every answer takes >= 0.2s
        model = _model(server)

        async def ask() -> list[int]:
            await model.generate("warm up", max_tokens=ANSWER)  # the latency, measured
            sent = []
            for seconds in (30.0, 0.1):  # on the manual clock: time does not pass here
                with cp.budget.spending(where="tight", deadline=seconds):
                    generation = await model.generate("Is it?", max_tokens=ANSWER,
                                                      samples=5)
                assert generation.sampled is not None
                sent.append(generation.sampled.sent)
            return sent
        graph = cp.Graph("deadlined")
        graph.add("ask", ask)
        store = MemoryStore()
        with cp.use_clock(ManualClock(1_000_000.0)):
            result = await cp.run(graph, store=store)
    assert result.ok, result
    assert result.outputs[cp.NodeId("ask")] == [5, 1]
    events = [e.data or {} for e in store.events(result.run_id)
              if e.kind is EventKind.MODEL_SAMPLED]
    assert events[1]["downgraded_by"] == "deadline"
    assert events[1]["reason"].startswith("samples downgraded from 5 to 1 by the deadline")
    assert len(server.requests) == 1 + 5 + 1


async def test_a_routed_model_is_chosen_once_then_sampled() -> None:
    with OpenAIServer(default=Reply.text("cheap")) as cheap, \
            OpenAIServer(default=Reply.text("strong")) as strong:
        registry = ModelRegistry(models={
            name: ModelConfig(name=name, provider="openai", model=name,
                              base_url=srv.base_url, price_input=p, price_output=p,
                              quality=q, retries=0)
            for name, srv, p, q in (("cheap", cheap, 0.1, 1), ("strong", strong, 5.0, 2))})
        model = Model.auto("quality_first", registry=registry, cache=False)

        async def ask() -> str:
            return (await model.generate("Answer", max_tokens=50, samples=3)).text
        graph = cp.Graph("routed-samples")
        graph.add("ask", ask)
        store = MemoryStore()
        result = await cp.run(graph, store=store)
        assert result.ok, result
        assert len(strong.requests) == 3 and not cheap.requests
    assert result.outputs[cp.NodeId("ask")] == "strong"
    kinds = [e.kind for e in store.events(result.run_id)
             if e.kind in (EventKind.MODEL_ROUTED, EventKind.MODEL_SAMPLED)]
    assert kinds == [EventKind.MODEL_ROUTED, EventKind.MODEL_SAMPLED]
    assert _sampled_event(store, result)["model"] == "strong"
