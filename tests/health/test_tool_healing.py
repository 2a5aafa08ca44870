"""A flapping tool is rerouted to its alternative without asking the model; a tool with
no healthy path left is an escalation, and the agent's model reads the error. The
agent's model is a real OpenAI-compatible server on loopback."""

from __future__ import annotations

import counterpoint as cp
from counterpoint.agents import Agent, tool
from counterpoint.events import EventKind
from counterpoint.health import (
    BreakerOptions,
    BreakerState,
    HealthRegistry,
    ModelReplanner,
    use_health,
)
from counterpoint.models import Model
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.store import MemoryStore
from counterpoint.testing import ManualClock, OpenAIServer, Reply


@tool(cost=2.0)
def backup_lookup(city: str) -> str:
    """The weather, from the backup service."""
    return f"{city}: sunny (backup)"


calls: list[str] = []


@tool(alternatives=[backup_lookup])
def lookup(city: str) -> str:
    """The weather in a city."""
    calls.append(city)
    raise cp.ToolError("weather service timed out")


async def _run(server: OpenAIServer, registry: HealthRegistry) -> tuple[cp.RunResult,
                                                                          MemoryStore]:
    model = Model(OpenAIProvider("agent", "m", base_url=server.base_url), retries=0,
                  cache=False, timeout=5.0)
    agent = Agent("weather", model=model, tools=[lookup])
    graph = cp.Graph("tools")

    async def ask() -> str:
        return str(await agent("weather in Oslo?"))

    graph.add("ask", ask)
    store = MemoryStore()
    with use_health(registry):
        return await cp.run(graph, store=store), store


async def test_a_flapping_tool_is_rerouted_to_its_alternative() -> None:
    calls.clear()
    registry = HealthRegistry(BreakerOptions(failures=1), clock=ManualClock())
    replies = [Reply.tool_calls([("lookup", {"city": "Oslo"})]), Reply.text("sunny"),
               Reply.tool_calls([("lookup", {"city": "Bergen"})]), Reply.text("sunny")]
    with OpenAIServer(replies) as server:
        result, store = await _run(server, registry)
        assert result.ok
        result, store = await _run(server, registry)
        assert result.ok
        assert len(server.requests) == 4  # no extra model call handled the failure
    assert calls == ["Oslo"]  # open after one failure: the second call skipped it
    assert registry.state("tool:lookup") is BreakerState.OPEN
    events = store.events(result.run_id)
    rerouted = [e.data or {} for e in events if e.kind is EventKind.REROUTED]
    assert [(d["from"], d["to"], d["why"]) for d in rerouted] == [
        ("lookup", "backup_lookup", "circuit open")]
    results = [e.data or {} for e in events if e.kind is EventKind.TOOL_RESULT]
    assert results[0]["ok"] and "backup" in results[0]["content"]


async def test_no_healthy_tool_left_escalates_to_the_agents_model() -> None:
    calls.clear()
    registry = HealthRegistry(BreakerOptions(failures=1, open_for=60.0), clock=ManualClock())
    registry.failed("tool:backup_lookup", "down", None)
    replies = [Reply.tool_calls([("lookup", {"city": "Oslo"})]), Reply.text("no data")]
    with OpenAIServer(replies) as server:
        result, store = await _run(server, registry)
        assert "weather service timed out" in str(server.requests[1].body["messages"])
    assert result.ok
    events = store.events(result.run_id)
    escalated = [e.data or {} for e in events if e.kind is EventKind.ESCALATED]
    assert escalated[0]["kind"] == "tool" and escalated[0]["tried"] == ["lookup"]
    assert escalated[0]["unavailable"] == ["backup_lookup"]


@tool
def broken_archive(city: str) -> str:
    """The weather archive (down, with no alternative)."""
    raise cp.ToolError("archive unreachable")


@tool
def almanac(city: str) -> str:
    """The weather, from the almanac."""
    return f"{city}: sunny (almanac)"


@tool(side_effects=True)
def page_someone(city: str) -> str:
    """Pages the on-call person (a side effect: never a substitute)."""
    raise AssertionError("a tool with side effects must not be picked as a substitute")


async def test_no_path_left_asks_the_registry_replanner_once_among_safe_tools() -> None:
    with OpenAIServer(default=Reply.text("almanac")) as planner_server:
        replanner = ModelReplanner(Model(OpenAIProvider(
            "replanner", "m", base_url=planner_server.base_url), retries=0, cache=False,
            timeout=5.0))
        registry = HealthRegistry(BreakerOptions(failures=1), clock=ManualClock(),
                                  replanner=replanner)
        replies = [Reply.tool_calls([("broken_archive", {"city": "Oslo"})]),
                   Reply.text("sunny")]
        with OpenAIServer(replies) as server:
            model = Model(OpenAIProvider("agent", "m", base_url=server.base_url), retries=0,
                          cache=False, timeout=5.0)
            agent = Agent("weather", model=model,
                          tools=[broken_archive, almanac, page_someone])
            graph = cp.Graph("replan-tool")

            async def ask() -> str:
                return str(await agent("weather in Oslo?"))

            graph.add("ask", ask)
            store = MemoryStore()
            with use_health(registry):
                result = await cp.run(graph, store=store)
        assert result.ok
        assert replanner.calls == 1 and len(planner_server.requests) == 1
        asked = planner_server.requests[0].body["messages"][-1]["content"]
        assert "Tools that could be used instead: almanac\n" in asked  # not page_someone
    events = store.events(result.run_id)
    [escalated] = [e.data or {} for e in events if e.kind is EventKind.ESCALATED]
    assert escalated["to"] == "replanner" and escalated["options"] == ["almanac"]
    [rerouted] = [e.data or {} for e in events if e.kind is EventKind.REROUTED]
    assert (rerouted["from"], rerouted["to"], rerouted["by"]) == ("broken_archive", "almanac",
                                                                  "replanner")
    [shown] = [e.data or {} for e in events if e.kind is EventKind.TOOL_RESULT]
    assert shown["ok"] is True and "almanac" in shown["content"]


async def test_a_side_effect_free_call_may_be_answered_from_its_last_answer() -> None:
    state = {"up": True}

    @tool
    def rates(currency: str) -> str:
        """Exchange rates (down after its first answer)."""
        if not state["up"]:
            raise cp.ToolError("rates service down")
        return f"{currency}: 1.08"

    clock = ManualClock()
    registry = HealthRegistry(BreakerOptions(failures=1), clock=clock, cached_cost=5.0)
    got: list[str] = []

    async def ask(ctx: cp.NodeContext) -> str:
        from counterpoint.health.tools import call_healed
        got.append(await call_healed(rates, {"currency": "EUR"}, key=None, ctx=ctx))
        state["up"] = False
        clock.advance(12.0)
        got.append(await call_healed(rates, {"currency": "EUR"}, key=None, ctx=ctx))
        try:
            await call_healed(rates, {"currency": "USD"}, key=None, ctx=ctx)
        except cp.ToolError as exc:  # never answered for USD: nothing to fall back on
            got.append(f"error: {exc}")
        return "done"

    graph = cp.Graph("tool-cache")
    graph.add("ask", ask)
    store = MemoryStore()
    with use_health(registry):
        result = await cp.run(graph, store=store)
    assert result.ok
    assert got[:2] == ["EUR: 1.08", "EUR: 1.08"] and got[2].startswith("error: tool rates")
    events = store.events(result.run_id)
    [rerouted] = [e.data or {} for e in events if e.kind is EventKind.REROUTED]
    assert rerouted["kind"] == "cache" and rerouted["cached"] is True
    assert rerouted["age"] == 12.0 and rerouted["from"] == "rates"
    [escalated] = [e.data or {} for e in events if e.kind is EventKind.ESCALATED]
    assert escalated["from"] == "rates" and escalated["to"] == "agent model"
