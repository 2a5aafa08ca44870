"""A budget refusal is the run's own failure, not a model's: ``BudgetExceeded`` is a
``RunFailure`` and not a ``ModelError``, so the model layer's fallback chain does not
reroute it to another model (nor count it in that model's breaker), and a node's retries
do not repeat it. Against a real OpenAI-compatible server on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import counterpoint as cp
from counterpoint.budget import Budget
from counterpoint.errors import BudgetExceeded
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.testing import OpenAIServer, Reply, Usage


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    reply = Reply.text("ok", usage=Usage(prompt_tokens=20, completion_tokens=100))
    with OpenAIServer(default=reply) as srv:
        yield srv


def _config(server: OpenAIServer, name: str, price_output: float,
            fallbacks: tuple[str, ...] = ()) -> ModelConfig:
    return ModelConfig(name=name, provider="openai", model=name, base_url=server.base_url,
                       price_input=0.0, price_output=price_output, retries=0,
                       fallbacks=fallbacks)


def test_budget_exceeded_is_a_run_failure_not_a_model_error() -> None:
    refusal = BudgetExceeded("refused")
    assert isinstance(refusal, cp.RunFailure)
    assert isinstance(refusal, cp.CounterpointError)
    assert not isinstance(refusal, cp.ModelError)
    assert refusal.retryable is False


def test_a_refused_call_is_not_retried_and_not_rerouted_to_a_fallback(
        server: OpenAIServer) -> None:
    # each call to "big" needs up to $0.10, the run has $0.01: refused before it is sent.
    # Were the refusal a ModelError, the fallback chain would send it to "small" instead
    # and count it as a healthy call of "big"
    registry = ModelRegistry(models={"big": _config(server, "big", 1000.0, ("small",)),
                                     "small": _config(server, "small", 1.0)})
    model = Model("big", registry=registry, cache=False)
    caught: list[str] = []

    async def ask() -> str:
        try:
            return (await model.generate("Say ok", max_tokens=100)).text
        except cp.ModelError as exc:  # a model's failure; the refusal is not one
            caught.append(type(exc).__name__)
            raise

    g = cp.Graph("refused")
    g.add("ask", ask, retries=2)  # the default retry_on
    result = cp.run_sync(g, store="memory", options=cp.RunOptions(budget=Budget(usd=0.01)))
    node = result.nodes["ask"]
    assert (result.status, node.attempts, caught) == ("failed", 1, [])
    assert node.error is not None
    assert (node.error["type"], node.error["retryable"]) == ("BudgetExceeded", False)
    assert "model call to big: refused before it was sent" in node.error["message"]
    assert server.requests == []
