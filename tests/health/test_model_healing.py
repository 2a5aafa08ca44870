"""A model that is down opens its breaker: later calls go straight to the fallback, a
half-open probe closes it again, and every step is an event in the run's log. Real
OpenAI-compatible servers on loopback; time moves only by a ManualClock."""

from __future__ import annotations

from typing import Any

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.health import BreakerOptions, BreakerState, HealthRegistry, use_health
from counterpoint.models import Model
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.store import MemoryStore
from counterpoint.testing import ManualClock, OpenAIServer, Reply


async def test_a_down_model_is_skipped_once_open_and_probed_back_to_closed() -> None:
    clock = ManualClock()
    registry = HealthRegistry(BreakerOptions(failures=2, open_for=30.0), clock=clock)
    with OpenAIServer(default=Reply.status(503)) as down, \
            OpenAIServer(default=Reply.text("from fallback")) as spare:
        primary = OpenAIProvider("primary", "m", base_url=down.base_url)
        fallback = OpenAIProvider("fallback", "m", base_url=spare.base_url)
        model = Model(primary, fallbacks=[fallback], retries=0, cache=False, timeout=5.0)
        texts: list[str] = []

        async def ask() -> str:
            for _ in range(3):
                texts.append((await model.generate("hi", max_tokens=8)).text)
            return "done"

        graph = cp.Graph("heal")
        graph.add("ask", ask)
        store = MemoryStore()
        with use_health(registry):
            result = await cp.run(graph, store=store)
            assert result.ok
            assert texts == ["from fallback"] * 3
            assert len(down.requests) == 2  # the third call never tried it
            key = f"model:{primary.identity}"
            assert registry.state(key) is BreakerState.OPEN
            events = store.events(result.run_id)
            changed = [e.data for e in events if e.kind is EventKind.HEALTH_CHANGED]
            assert [(d or {})["after"] for d in changed] == ["open"]
            rerouted = [e.data or {} for e in events if e.kind is EventKind.REROUTED]
            assert [(d["from"], d["to"]) for d in rerouted] == [("primary", "fallback")] * 3
            assert rerouted[-1]["why"] == "circuit open"

            down.script(Reply.text("primary is back"))  # the probe finds it answering
            clock.advance(31.0)
            back = await model.generate("hi", max_tokens=8)
            assert back.text == "primary is back"
            assert registry.state(key) is BreakerState.CLOSED


async def test_no_healthy_model_left_is_an_escalation_and_a_clear_error() -> None:
    clock = ManualClock()
    registry = HealthRegistry(BreakerOptions(failures=1, open_for=60.0), clock=clock)
    with OpenAIServer(default=Reply.status(503)) as down:
        only = OpenAIProvider("only", "m", base_url=down.base_url)
        model = Model(only, retries=0, cache=False, timeout=5.0)
        seen: list[Any] = []

        async def ask() -> str:
            for _ in range(2):
                try:
                    await model.generate("hi", max_tokens=8)
                except cp.ModelUnavailable as exc:
                    seen.append(exc)
            return "handled"

        graph = cp.Graph("escalate")
        graph.add("ask", ask)
        store = MemoryStore()
        with use_health(registry):
            result = await cp.run(graph, store=store)
        assert result.ok
        assert len(down.requests) == 1  # the second call found the circuit open
        assert "circuit open: only" in str(seen[1]) and seen[1].retry_after == 60.0
        escalated = [e.data or {} for e in store.events(result.run_id)
                     if e.kind is EventKind.ESCALATED]
        assert escalated and escalated[0]["kind"] == "model" and escalated[0]["to"] == "caller"
