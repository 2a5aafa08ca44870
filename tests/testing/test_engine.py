"""counterpoint.testing.SimulatedEngine: the simulated timing behind an OpenAIServer."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest

from counterpoint.testing import OpenAIServer, Reply, SimulatedEngine
from counterpoint.testing.engine import prompt_text


def _body(*texts: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": t} for t in texts]}


def test_a_repeated_prefix_is_served_from_the_cache() -> None:
    engine = SimulatedEngine(prefill=1.0, decode=0.5, block=4)  # 16 characters a block
    shared = "x" * 64  # four whole blocks once the role tag is in front
    first, total, cached = engine.seconds(_body(shared + "first question"), answer_tokens=2)
    assert cached == 0 and first == total * 1.0 + 2 * 0.5
    second, total2, cached2 = engine.seconds(_body(shared + "other question"), answer_tokens=2)
    assert cached2 == 16  # the four blocks of the shared prefix
    assert second == (total2 - 16) * 1.0 + 1.0
    assert (engine.prompt_tokens, engine.cached_tokens) == (total + total2, 16)


def test_a_prefix_only_counts_from_the_start() -> None:
    engine = SimulatedEngine(prefill=1.0, block=4)
    engine.seconds(_body("a" * 16 + "b" * 16), answer_tokens=0)
    _, _, cached = engine.seconds(_body("c" * 16 + "b" * 16), answer_tokens=0)
    assert cached == 0  # the same second block after a different first one is not a hit


def test_the_cache_is_bounded() -> None:
    engine = SimulatedEngine(prefill=1.0, block=1, cache_blocks=3)
    engine.seconds(_body("a" * 40), answer_tokens=0)
    assert len(engine._cache) == 3


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="slots and block must be >= 1"):
        SimulatedEngine(slots=0)


def test_prompt_text_keeps_roles_and_parts_in_order() -> None:
    body = {"messages": [{"role": "system", "content": "s"},
                         {"role": "user", "content": [{"type": "text", "text": "u"}]}]}
    assert prompt_text(body) == "<system>s<user>u"


async def test_the_server_serves_at_most_slots_requests_at_once() -> None:
    engine = SimulatedEngine(slots=2, decode=0.01)
    with OpenAIServer(default=Reply.text("tok " * 5), engine=engine) as server:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="x",
                                      max_retries=0) as client:
            await asyncio.gather(*[client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": f"q{i}"}])
                for i in range(6)])
        assert len(server.requests) == 6
    assert engine.peak == 2 and engine.in_service == 0
    assert engine.prompt_tokens > 0


async def test_an_engine_per_model_name_times_only_that_models_requests() -> None:
    fast, slow = SimulatedEngine(slots=1), SimulatedEngine(slots=1)
    with OpenAIServer(default=Reply.text("ok"), engine={"fast": fast, "slow": slow},
                      models=("fast", "slow", "free")) as server:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="x",
                                      max_retries=0) as client:
            for model in ("slow", "free"):  # "free" has no engine: answered untimed
                await client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": "question"}])
    assert slow.prompt_tokens > 0 and slow.peak == 1
    assert fast.prompt_tokens == 0 and fast.peak == 0
