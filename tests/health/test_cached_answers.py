"""A cached answer is a reroute target: when a model and its fallbacks are down, an
earlier answer to the same request from the run store's response cache stands in, at
the registry's ``cached_cost``, and the ``rerouted`` event says it is cached and how
old. A healthy fallback that costs less is taken first; ``cached_cost=None`` turns it
off. Real OpenAI-compatible servers on loopback and a real SQLite store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.health import BreakerOptions, HealthRegistry, use_health
from counterpoint.models import Generation, Model
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.store import RunStore, SQLiteStore
from counterpoint.testing import ManualClock, OpenAIServer, Reply


def _registry(cached_cost: float | None = 5.0) -> HealthRegistry:
    return HealthRegistry(BreakerOptions(failures=1, open_for=60.0), clock=ManualClock(),
                          cached_cost=cached_cost)


async def _twice(model: Model, store: RunStore) -> tuple[cp.RunResult, list[Any]]:
    """One run: ask once with caching (the answer is cached), then ask the same again
    without (so only healing may answer from the cache)."""
    seen: list[Any] = []

    async def ask() -> str:
        seen.append(await model.generate("capital of France?", max_tokens=8, cache=True))
        try:
            seen.append(await model.generate("capital of France?", max_tokens=8,
                                              cache=False))
        except cp.ModelUnavailable as exc:
            seen.append(exc)
        return "done"

    graph = cp.Graph("cached")
    graph.add("ask", ask)
    return await cp.run(graph, store=store), seen


async def test_a_down_model_is_answered_from_the_cache_with_its_age(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        with OpenAIServer([Reply.text("Paris")], default=Reply.status(503)) as server, \
                use_health(_registry()):
            model = Model(OpenAIProvider("primary", "m", base_url=server.base_url),
                          retries=0, timeout=5.0)
            result, seen = await _twice(model, store)
            assert len(server.requests) == 2  # the second call did reach the server
        assert result.ok
        first, second = seen
        assert isinstance(second, Generation), second
        assert second.text == "Paris" and second.cache_hit
        assert second.calls == 1  # the failed call; the cache answered after it
        assert not first.cache_hit
        events = store.events(result.run_id)
        [rerouted] = [e.data or {} for e in events if e.kind is EventKind.REROUTED]
        assert rerouted["kind"] == "cache" and rerouted["to"] == "cache"
        assert rerouted["cached"] is True and rerouted["model"] == "primary"
        assert isinstance(rerouted["age"], float) and rerouted["age"] >= 0.0
        assert rerouted["cost"] == 5.0
        assert not [e for e in events if e.kind is EventKind.ESCALATED]
        hits = [e.data or {} for e in events if e.kind is EventKind.MODEL_CALL
                and (e.data or {}).get("cache_hit")]
        assert len(hits) == 1
    finally:
        store.close()


async def test_a_cheaper_healthy_fallback_goes_before_the_cache(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        with OpenAIServer([Reply.text("Paris")], default=Reply.status(503)) as down, \
                OpenAIServer(default=Reply.text("Paris, from the fallback")) as spare, \
                use_health(_registry()):
            model = Model(OpenAIProvider("primary", "m", base_url=down.base_url),
                          fallbacks=[OpenAIProvider("spare", "m", base_url=spare.base_url)],
                          retries=0, timeout=5.0)
            result, seen = await _twice(model, store)
            assert len(spare.requests) == 1
        assert result.ok
        assert seen[1].text == "Paris, from the fallback" and not seen[1].cache_hit
        rerouted = [e.data or {} for e in store.events(result.run_id)
                    if e.kind is EventKind.REROUTED]
        assert [(d["kind"], d["to"]) for d in rerouted] == [("model", "spare")]
    finally:
        store.close()


async def test_without_a_cache_weight_the_failure_is_escalated(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        with OpenAIServer([Reply.text("Paris")], default=Reply.status(503)) as server, \
                use_health(_registry(cached_cost=None)):
            model = Model(OpenAIProvider("primary", "m", base_url=server.base_url),
                          retries=0, timeout=5.0)
            result, seen = await _twice(model, store)
        assert isinstance(seen[1], cp.ModelUnavailable)
        kinds = [e.kind for e in store.events(result.run_id)]
        assert EventKind.ESCALATED in kinds and EventKind.REROUTED not in kinds
    finally:
        store.close()
