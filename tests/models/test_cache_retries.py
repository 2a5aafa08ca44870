"""A node retried after a failure asks its model afresh: the cached answer is the one the
failed attempt was given, so replaying it would fail the same way. A node resumed after a
crash still replays what its interrupted attempt was answered (see the resume tests)."""

from __future__ import annotations

import counterpoint as cp
from counterpoint.models import Model, ScriptedModel


async def test_a_retry_after_a_rejected_answer_calls_the_model_again() -> None:
    scripted = ScriptedModel(["not a number", "42"], name="retry-plain")
    model = Model(scripted)

    async def ask() -> int:
        return int((await model.generate("How many?")).text)  # the first answer: ValueError

    g = cp.Graph("retry")
    g.add("count", ask, retries=1)
    result = await cp.run(g, store=cp.MemoryStore())
    assert result.ok, result.nodes[cp.NodeId("count")].error
    assert result.outputs[cp.NodeId("count")] == 42
    assert len(scripted.requests) == 2 and scripted.remaining == 0
    assert result.nodes[cp.NodeId("count")].attempts == 2


async def test_a_retry_after_a_failure_draws_new_samples() -> None:
    scripted = ScriptedModel(["no", "no", "yes", "yes"], name="retry-samples")
    model = Model(scripted)

    async def ask() -> str:
        text = (await model.generate("Well?", samples=2)).text
        if text != "yes":
            raise ValueError(f"rejected {text!r}")
        return text

    g = cp.Graph("samples")
    g.add("vote", ask, retries=1)
    store = cp.MemoryStore()
    result = await cp.run(g, store=store)
    assert result.ok, result.nodes[cp.NodeId("vote")].error
    assert len(scripted.requests) == 4  # two samples per attempt, none replayed
    seeds = [r.seed for r in scripted.requests]
    assert len(set(seeds)) == 4, seeds


async def test_the_first_attempt_still_reads_the_cache() -> None:
    store = cp.MemoryStore()
    scripted = ScriptedModel(["7"], name="retry-cached")
    model = Model(scripted)

    async def ask() -> int:
        return int((await model.generate("How many?")).text)

    for _ in range(2):  # the second run's first attempt is answered from the cache
        g = cp.Graph("cached")
        g.add("count", ask, retries=1)
        result = await cp.run(g, store=store)
        assert result.outputs[cp.NodeId("count")] == 7
    assert len(scripted.requests) == 1
