"""The model facade above the provider seam, with the scripted model.

Structured output and re-asking, tool calls (native and emulated), retries with
Retry-After, fallbacks, the response cache, usage and cost, and the events a
call leaves in a run's log.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import counterpoint as cp
from counterpoint.errors import (
    ConfigError,
    InvalidOutput,
    ModelRejected,
    ModelUnavailable,
    RateLimited,
    ScriptError,
)
from counterpoint.events import EventKind
from counterpoint.models import (
    Capabilities,
    Message,
    Model,
    ModelConfig,
    ModelRegistry,
    Response,
    ScriptedModel,
    ToolCall,
    ToolSpec,
    Usage,
)
from counterpoint.policy import Backoff
from counterpoint.store import MemoryStore, SQLiteStore

FAST = Backoff(initial=0.01, factor=2.0, maximum=0.05, jitter=0.0)
WEATHER = ToolSpec(name="weather", description="Weather for a city",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]})
SEARCH = ToolSpec(name="search", description="Search the web",
                  parameters={"type": "object", "properties": {"q": {"type": "string"}},
                              "required": ["q"]})


class City(BaseModel):
    name: str
    population: int


async def test_structured_output_is_validated() -> None:
    with ScriptedModel([{"name": "Lyon", "population": 500000}]) as scripted:
        result = await Model(scripted).generate("A city?", output=City)
    assert result.output == City(name="Lyon", population=500000)
    assert result.calls == 1
    request = scripted.requests[0]
    assert request.output is not None and request.output.schema_["required"] == \
        ["name", "population"]


async def test_invalid_output_is_re_asked_with_the_errors() -> None:
    with ScriptedModel(['{"name": "Lyon"}', "not json",
                        {"name": "Lyon", "population": 5}]) as scripted:
        result = await Model(scripted, output_retries=2).generate("A city?", output=City)
    assert result.output == City(name="Lyon", population=5)
    assert result.calls == 3
    second = scripted.requests[1].messages
    assert second[-2] == Message.assistant('{"name": "Lyon"}')
    assert "population" in second[-1].content and "Field required" in second[-1].content
    assert "Invalid JSON" in scripted.requests[2].messages[-1].content


async def test_invalid_output_fails_with_the_raw_answer_attached() -> None:
    scripted = ScriptedModel(['{"name": 1}', '{"name": 2}'])
    with pytest.raises(InvalidOutput) as caught:
        await Model(scripted, output_retries=1).generate("A city?", output=City)
    assert caught.value.raw == '{"name": 2}'
    assert "population" in caught.value.errors
    assert "scripted" in str(caught.value) and "2 attempt(s)" in str(caught.value)


async def test_an_answer_cut_off_at_the_token_limit_is_re_asked_shorter_and_named() -> None:
    cut = Response(text='{"name": "Lyon", "popul', finish_reason="length")
    scripted = ScriptedModel([cut, cut])
    with pytest.raises(InvalidOutput) as caught:
        await Model(scripted, output_retries=1).generate("A city?", output=City,
                                                         max_tokens=8)
    assert caught.value.finish_reason == "length"
    assert "cut off at the token limit (max_tokens=8): raise max_tokens" in str(caught.value)
    again = scripted.requests[1].messages[-1].content
    assert "cut off at the length limit" in again and "shorter JSON" in again


async def test_an_invalid_answer_that_was_not_cut_off_says_nothing_of_the_limit() -> None:
    scripted = ScriptedModel(['{"name": 1}', '{"name": 2}'])
    with pytest.raises(InvalidOutput) as caught:
        await Model(scripted, output_retries=1).generate("A city?", output=City)
    assert caught.value.finish_reason == "stop"
    assert "cut off" not in str(caught.value)
    assert "cut off" not in scripted.requests[1].messages[-1].content


async def test_non_object_outputs_travel_wrapped() -> None:
    scripted = ScriptedModel(['{"value": ["a", "b"]}'])
    result = await Model(scripted).generate("Two letters", output=list[str])
    assert result.output == ["a", "b"]
    assert scripted.requests[0].output is not None
    assert scripted.requests[0].output.schema_["required"] == ["value"]


async def test_native_tool_calls_are_checked_against_the_given_tools() -> None:
    calls = [ToolCall(id="1", name="weather", arguments={"city": "Paris"}),
             ToolCall(id="2", name="search", arguments={"q": "Paris"})]
    scripted = ScriptedModel([calls])
    result = await Model(scripted).generate("Weather?", tools=[WEATHER, SEARCH],
                                            tool_choice="required")
    assert [c.name for c in result.tool_calls] == ["weather", "search"]
    assert scripted.requests[0].tools == (SEARCH, WEATHER)  # sorted: a stable prefix
    bad = ScriptedModel([[ToolCall(id="1", name="rm", arguments={})]] * 3)
    with pytest.raises(InvalidOutput, match="unknown tool"):
        await Model(bad).generate("Weather?", tools=[WEATHER])


async def test_tools_are_emulated_through_json_when_the_provider_has_no_tool_choice() -> None:
    caps = Capabilities(tools=False, forced_tool=False, json_object_schema=True)
    answer = '{"calls": [{"name": "weather", "arguments": {"city": "Oslo"}}], "content": ""}'
    scripted = ScriptedModel([answer], capabilities=caps)
    result = await Model(scripted).generate("Weather?", tools=[WEATHER, SEARCH],
                                            tool_choice="weather")
    assert result.tool_calls == (ToolCall(id="call_0_weather", name="weather",
                                          arguments={"city": "Oslo"}),)
    request = scripted.requests[0]
    assert request.tools == () and request.output is not None
    options = request.output.schema_["properties"]["calls"]["items"]["anyOf"]
    assert [o["properties"]["name"]["const"] for o in options] == ["weather"]


async def test_unknown_tool_choice_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="names no given tool"):
        await Model(ScriptedModel()).generate("x", tools=[WEATHER], tool_choice="nope")


async def test_retryable_errors_are_retried_honouring_retry_after() -> None:
    scripted = ScriptedModel([RateLimited("slow down", model="s", retry_after=0.2),
                              ModelUnavailable("503", model="s"), "ok"])
    started = time.monotonic()
    result = await Model(scripted, retries=2, backoff=FAST).generate("hi")
    assert result.text == "ok" and result.calls == 3
    assert time.monotonic() - started >= 0.2


async def test_non_retryable_errors_are_not_retried() -> None:
    scripted = ScriptedModel([ModelRejected("bad key", model="s"), "never"])
    with pytest.raises(ModelRejected):
        await Model(scripted, retries=3, backoff=FAST).generate("hi")
    assert scripted.remaining == 1


async def test_fallback_chain_tries_the_next_model() -> None:
    first = ScriptedModel([ModelUnavailable("down", model="a")] * 2, name="a")
    second = ScriptedModel(["from b"], name="b")
    result = await Model(first, fallbacks=[second], retries=1, backoff=FAST).generate("hi")
    assert result.text == "from b" and result.model == "b"
    first.verify()
    second.verify()


async def test_last_error_of_a_chain_mentions_the_earlier_ones() -> None:
    first = ScriptedModel([ModelUnavailable("a is down", model="a")], name="a")
    second = ScriptedModel([ModelRejected("b says no", model="b")], name="b")
    with pytest.raises(ModelRejected) as caught:
        await Model(first, fallbacks=[second], retries=0).generate("hi")
    assert any("a is down" in note for note in caught.value.__notes__)


async def test_scripted_model_fails_loudly_both_ways() -> None:
    scripted = ScriptedModel(["one"])
    await Model(scripted).generate("hi")
    with pytest.raises(ScriptError, match="call 2 was not scripted"):
        await Model(scripted, retries=0).generate("again")
    leftover = ScriptedModel(["unused"])
    with pytest.raises(ScriptError, match="never used"):
        leftover.verify()


async def test_prompt_layout_puts_stable_content_first() -> None:
    scripted = ScriptedModel(["a", "b"])
    model = Model(scripted)
    for question in ("first?", "second?"):
        await model.generate(question, system="You are terse.", context=["Shared facts."],
                             tools=[SEARCH, WEATHER], cache=False)
    one, two = scripted.requests
    assert one.messages[0] == two.messages[0] == Message.system(
        "You are terse.\n\nShared facts.")
    assert one.tools == two.tools
    assert [m.content for m in (one.messages[-1], two.messages[-1])] == ["first?", "second?"]


def test_config_prices_give_cost_and_unknown_prices_give_tokens_only() -> None:
    priced = ModelConfig(name="p", provider="openai", price_input=1.0, price_output=2.0,
                         price_cached_input=0.5)
    usage = priced.cost(Usage(input_tokens=1000, cached_tokens=400, output_tokens=100,
                              calls=1))
    assert usage.cost == pytest.approx((600 * 1.0 + 400 * 0.5 + 100 * 2.0) / 1e6)
    assert ModelConfig(name="u", provider="openai").cost(Usage(input_tokens=5)).cost is None


def test_api_keys_never_come_from_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "counterpoint.toml"
    config.write_text('[models.fast]\nprovider = "openai"\nmodel = "m"\napi_key = "sk-1"\n')
    from counterpoint.models.config import load_registry
    with pytest.raises(ConfigError, match=r"counterpoint.toml:1: .*api_key_env"):
        load_registry([config])


def test_config_errors_name_file_line_and_field(tmp_path: Path) -> None:
    from counterpoint.models.config import load_registry
    config = tmp_path / "counterpoint.toml"
    config.write_text('[defaults]\nmodel = "x"\n\n[models.fast]\nprovider = "openai"\n'
                      'rpm = -3\n')
    with pytest.raises(ConfigError, match=r"counterpoint.toml:6: model 'fast' is invalid: rpm"):
        load_registry([config])
    config.write_text('[models.fast]\nprovider = "openai"\nfallbacks = ["nowhere"]\n')
    with pytest.raises(ConfigError, match="unknown model 'nowhere'"):
        load_registry([config])


def test_model_names_resolve_from_config_and_builtins(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from counterpoint.models.config import load_registry
    config = tmp_path / "counterpoint.toml"
    config.write_text('[defaults]\nmodel = "fast"\n[models.fast]\nprovider = "openai"\n'
                      'model = "qwen"\nbase_url = "http://127.0.0.1:9/v1"\nrpm = 60\n'
                      '[models."openai:gpt-4.1-mini"]\nprice_input = 0.4\nprice_output = 1.6\n')
    monkeypatch.delenv("COUNTERPOINT_MODEL", raising=False)
    registry = load_registry([config])
    assert registry.default == "fast"
    fast = registry.resolve(None)
    assert (fast.model, fast.rpm, fast.source) == ("qwen", 60, f"{config}:3")
    assert fast.api_key() is None  # a local server needs no key
    mini = registry.resolve("openai:gpt-4.1-mini")
    assert (mini.provider, mini.model, mini.priced) == ("openai", "gpt-4.1-mini", True)
    assert registry.resolve("local:smollm2").provider == "local"
    with pytest.raises(ConfigError, match="unknown provider 'azure'"):
        registry.resolve("azure:x")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        registry.resolve("openai:gpt-4.1").api_key()


# --------------------------------------------------------------- inside a run
def _graph(model: Model, **kwargs: Any) -> cp.Graph:
    g = cp.Graph("ask")

    async def ask(question: str) -> dict[str, Any]:
        result = await model.generate(question, output=City, **kwargs)
        assert result.output is not None
        return result.output.model_dump()

    g.add("paris", ask, question="Paris?")
    g.add("lyon", ask, question="Lyon?")
    return g


async def test_calls_are_events_with_usage_per_node_and_per_run(tmp_path: Path) -> None:
    scripted = ScriptedModel([
        lambda r: Response(text=json.dumps({"name": r.messages[-1].content[:-1],
                                            "population": 1}),
                           usage=Usage(input_tokens=10, output_tokens=5, cached_tokens=2,
                                       calls=1))] * 2)
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        result = await cp.run(_graph(Model(scripted)), store=store)
        assert result.ok, result.nodes
        assert result.outputs["paris"] == {"name": "Paris", "population": 1}
        assert (result.usage.calls, result.usage.input_tokens, result.usage.output_tokens,
                result.usage.cached_tokens) == (2, 20, 10, 4)
        assert result.usage.unpriced == 2
        assert result.nodes["lyon"].usage.calls == 1
        calls = [e for e in store.events(result.run_id) if e.kind is EventKind.MODEL_CALL]
        assert {e.node for e in calls} == {"paris", "lyon"}
        data = calls[0].data
        assert data is not None and data["model"] == "scripted" and data["latency"] >= 0
        request = store.blob(data["request"])
        assert (request is not None and '"Paris?"' in request) or '"Lyon?"' in str(request)
        assert store.blob(data["response"]) is not None
        assert {r.session for r in scripted.requests} == {str(result.run_id)}
    finally:
        store.close()


async def test_failed_attempts_are_in_the_log_too() -> None:
    scripted = ScriptedModel([RateLimited("429", model="s", retry_after=0.01, status=429),
                              {"name": "A", "population": 1}, {"name": "B", "population": 2}])
    store = MemoryStore()
    result = await cp.run(_graph(Model(scripted, retries=1, backoff=FAST)), store=store,
                          options=cp.RunOptions(max_concurrency=1))
    assert result.ok
    calls = [e.data for e in store.events(result.run_id) if e.kind is EventKind.MODEL_CALL]
    failed = [d for d in calls if d and "error" in d]
    assert len(failed) == 1 and failed[0]["status"] == 429 and failed[0]["retryable"]
    assert result.usage.failed == 1 and result.usage.calls == 2


async def test_a_re_run_is_answered_from_the_cache(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    answers = {"Paris?": {"name": "Paris", "population": 2}, "Lyon?": {"name": "Lyon",
                                                                       "population": 1}}
    # a name makes scripted models one model to the cache (unnamed, each is its own)
    scripted = ScriptedModel([lambda r: Response(text=str(answers[r.messages[-1].content])
                                                 .replace("'", '"'))] * 2, name="cities")
    try:
        first = await cp.run(_graph(Model(scripted)), store=store)
        scripted.verify()
        second = await cp.run(_graph(Model(scripted)), store=store)  # nothing queued: cache
        assert second.outputs == first.outputs
        assert (second.usage.calls, second.usage.cache_hits) == (0, 2)
        uncached = await asyncio.gather(Model(ScriptedModel(["x"]), cache=False).generate(
            "Paris?", store=store))
        assert uncached[0].text == "x"
    finally:
        store.close()
    reopened = SQLiteStore(tmp_path / "runs.db")  # the cache is durable
    try:
        third = await cp.run(_graph(Model(ScriptedModel(name="cities"))), store=reopened)
        assert third.ok and third.usage.cache_hits == 2
    finally:
        reopened.close()


async def test_no_cache_above_temperature_zero() -> None:
    store = MemoryStore()
    scripted = ScriptedModel(["a", "b"])
    model = Model(scripted)
    assert (await model.generate("hi", temperature=0.7, store=store)).text == "a"
    assert (await model.generate("hi", temperature=0.7, store=store)).text == "b"


async def test_streamed_text_reaches_run_subscribers_and_is_not_persisted() -> None:
    scripted = ScriptedModel(["one two three"])
    model = Model(scripted)
    g = cp.Graph("stream")

    async def talk() -> str:
        return (await model.generate("go", stream=True)).text

    g.add("talk", talk)
    store = MemoryStore()
    handle = await cp.start(g, store=store)
    seen: list[str] = []
    async for event in handle.events():
        if event.kind is EventKind.MODEL_DELTA:
            seen.append(event.data["text"])  # type: ignore[index]
    result = await handle.result()
    assert "".join(seen) == "one two three" == result.outputs["talk"]
    assert not [e for e in store.events(result.run_id) if e.kind is EventKind.MODEL_DELTA]


async def test_rate_limits_are_shared_across_runs() -> None:
    scripted = ScriptedModel(["x"] * 6, name="shared-limit", delay=0.05)
    model = Model(scripted, max_concurrency=2)
    active = peak = 0
    original = scripted.complete

    async def counting(*args: Any, **kwargs: Any) -> Response:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        try:
            return await original(*args, **kwargs)
        finally:
            active -= 1

    scripted.complete = counting  # type: ignore[method-assign]
    await asyncio.gather(*(model.generate(f"q{i}", cache=False) for i in range(6)))
    assert peak == 2


def test_registry_is_used_for_names() -> None:
    registry = ModelRegistry({"mine": ModelConfig(name="mine", provider="local")}, "mine")
    assert Model(registry=registry).name == "mine"


async def test_an_unknown_tool_call_is_answered_with_the_error_and_re_asked() -> None:
    scripted = ScriptedModel([[ToolCall(id="x1", name="rm", arguments={})],
                              [ToolCall(id="x2", name="weather", arguments={"city": "Oslo"})]])
    result = await Model(scripted).generate("Weather?", tools=[WEATHER])
    assert [c.name for c in result.tool_calls] == ["weather"]
    retry = scripted.requests[1].messages
    assert retry[-2].tool_calls[0].name == "rm"  # the bad call is kept in the conversation
    assert retry[-1].role == "tool" and retry[-1].tool_call_id == "x1"
    assert "unknown tool" in retry[-1].content


async def test_raw_newlines_inside_json_strings_are_accepted() -> None:
    scripted = ScriptedModel(['{"name": "Lyon\nFrance", "population": 5}'])
    result = await Model(scripted, output_retries=0).generate("A city?", output=City)
    assert result.output == City(name="Lyon\nFrance", population=5)
