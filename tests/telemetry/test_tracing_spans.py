"""Runs traced with the real OTLP/HTTP exporter into a real receiver on 127.0.0.1: the
span tree (run, sub-run, attempts, agents, model and tool calls, a graph tool's run),
the GenAI attributes, retry and edit events, content capture off and on, and secrets
kept out."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import counterpoint as cp
from counterpoint import telemetry
from counterpoint.agents import Agent, graph_tool, tool
from counterpoint.events import EventKind
from counterpoint.models import Model, ScriptedModel
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.secrets import register_secret
from counterpoint.testing import OpenAIServer, Reply
from counterpoint.testing.otlp import OTLPReceiver, ReceivedSpan

SECRET = "sk-tracing-test-0123456789abcdef"
FAST = cp.Backoff(initial=0.01, factor=1.0, maximum=0.01, jitter=0.0)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _tiny_graph() -> cp.Graph:
    g = cp.Graph("tiny")
    x = g.input("x")

    async def double(x: int) -> int:
        return 2 * x

    g.add("double", double, x=x)
    return g


def _sub_graph() -> cp.Graph:
    g = cp.Graph("inner")
    word = g.input("word")

    async def shout(word: str) -> str:
        return word.upper()

    g.add("shout", shout, word=word)
    return g


class Flaky:
    """Fails its first call, then succeeds."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("the first call fails")
        return "second time lucky"


def _graph(server: OpenAIServer) -> cp.Graph:
    helper = Agent("helper", model=ScriptedModel(["helped"]), instructions="You help.")
    boss = Agent("boss", model=Model(OpenAIProvider("fake-gpt", "gpt-test",
                                                    base_url=server.base_url),
                                     retries=2, backoff=FAST, cache=False),
                 instructions="You delegate.",
                 tools=[add, helper.as_tool(), graph_tool(_tiny_graph())])
    g = cp.Graph("traced")
    flaky = g.add("flaky", Flaky(), policy=cp.Policy(retries=1, backoff=FAST))

    async def grow(ctx: cp.NodeContext) -> str:
        async def extra() -> str:
            return "added"
        edit = cp.Edit("more work")
        edit.add("extra", extra)
        ctx.apply(edit)
        return "grown"

    g.add("grow", grow)
    g.add("sub", _sub_graph(), word=flaky)
    g.add("agent", boss, task=f"Sum 2 and 3, ask the helper, double 4. key {SECRET}")
    return g


def _script(server: OpenAIServer) -> None:
    server.script(
        Reply.status(503, headers={}),  # retried by the model layer: a failed chat span
        Reply.tool_calls([("add", {"a": 2, "b": 3}), ("helper", {"task": "help me"}),
                          ("tiny", {"x": 4})]),
        Reply.text("All done: 5, helped, 8."))


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


async def _traced_run(server: OpenAIServer, receiver: OTLPReceiver,
                      tracing: telemetry.Tracing, store: cp.RunStore | None = None,
                      ) -> tuple[cp.RunResult, list[ReceivedSpan]]:
    _script(server)
    result = await cp.run(_graph(server), store=store or cp.MemoryStore())
    assert tracing.force_flush()
    # the run's own span ends last; the graph tool's run ends inside the agent's
    spans = receiver.wait_for(lambda spans: sum(s.name == "run traced" for s in spans) == 1)
    return result, spans


def _one(spans: list[ReceivedSpan], name: str, **attributes: Any) -> ReceivedSpan:
    found = [s for s in spans if s.name == name
             and all(s.attributes.get(k) == v for k, v in attributes.items())]
    assert len(found) == 1, f"{name} {attributes}: {len(found)} spans among " \
                            f"{sorted(s.name for s in spans)}"
    return found[0]


def _children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in spans if s.parent_span_id == parent.span_id]


async def test_the_span_tree_of_a_run_with_a_sub_run_a_retry_an_edit_and_an_agent(
        server: OpenAIServer, receiver: OTLPReceiver, tracing: telemetry.Tracing) -> None:
    store = cp.MemoryStore()
    result, spans = await _traced_run(server, receiver, tracing, store)
    assert result.ok, result.status
    assert len({s.trace_id for s in spans}) == 1, "every span is in the run's trace"
    run = _one(spans, "run traced")
    assert run.parent_span_id == "" and run.attributes["counterpoint.run_id"] == result.run_id
    assert run.attributes["counterpoint.status"] == "succeeded"
    assert run.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert run.attributes["gen_ai.workflow.name"] == "traced"
    assert run.resource["service.name"] == "counterpoint" and run.scope == "counterpoint"

    # node attempts are children of the run, timed by the log
    attempts = {(s.attributes["counterpoint.node"], s.attributes["counterpoint.attempt"]): s
                for s in _children(spans, run)}
    assert set(attempts) == {("flaky", 1), ("flaky", 2), ("grow", 1), ("extra", 1),
                             ("sub", 1), ("agent", 1)}
    for span in attempts.values():
        assert run.start_ns <= span.start_ns <= span.end_ns <= run.end_ns
    first, second = attempts["flaky", 1], attempts["flaky", 2]
    assert first.status_code == 2 and first.attributes["error.type"] == "ConnectionError"
    assert first.attributes["counterpoint.status"] == "retrying"
    retry = [e for e in first.events if e.name == "counterpoint.retry"]
    assert len(retry) == 1 and retry[0].attributes["counterpoint.next_attempt"] == 2
    assert second.status_code == 1 and second.attributes["counterpoint.status"] == "succeeded"
    assert first.end_ns <= second.start_ns

    # the edit is an event of the run span
    edits = [e for e in run.events if e.name == "counterpoint.edit"]
    assert len(edits) == 1
    assert edits[0].attributes["counterpoint.edit.added"] == ["extra"]
    assert edits[0].attributes["counterpoint.edit.reason"] == "more work"

    # the sub-run is a child of the attempt of the node that runs it
    sub_run = _one(spans, "run inner")
    assert sub_run.parent_span_id == attempts["sub", 1].span_id
    assert sub_run.attributes["counterpoint.parent_run_id"] == result.run_id
    assert [s.attributes["counterpoint.node"] for s in _children(spans, sub_run)] == ["shout"]

    # the agent: invoke_agent under its attempt; chat and execute_tool under the agent
    boss = _one(spans, "invoke_agent boss")
    assert boss.parent_span_id == attempts["agent", 1].span_id
    assert boss.attributes["gen_ai.operation.name"] == "invoke_agent"
    chats = sorted((s for s in _children(spans, boss) if s.name == "chat gpt-test"),
                   key=lambda s: s.start_ns)
    assert len(chats) == 3  # the 503, then the tool calls, then the answer
    failed, asked, answered = chats
    assert failed.status_code == 2 and failed.attributes["http.response.status_code"] == 503
    for chat in (asked, answered):
        assert chat.kind == 3  # CLIENT
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "openai"
        assert chat.attributes["gen_ai.request.model"] == "gpt-test"
        assert chat.attributes["gen_ai.response.model"]
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
    assert asked.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert answered.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert boss.attributes["gen_ai.usage.input_tokens"] == sum(
        c.attributes["gen_ai.usage.input_tokens"] for c in (asked, answered))

    tools = {s.attributes["gen_ai.tool.name"]: s for s in _children(spans, boss)
             if s.name.startswith("execute_tool ")}
    assert set(tools) == {"add", "helper", "tiny"}
    turns = [e.data or {} for e in store.events(result.run_id)
             if e.kind is EventKind.AGENT_TURN and (e.data or {}).get("agent") == "boss"]
    recorded = {c["name"]: c["id"] for c in turns[0]["response"]["tool_calls"]}
    assert {n: s.attributes["gen_ai.tool.call.id"] for n, s in tools.items()} == recorded
    for span in [*chats, *tools.values()]:  # children inside their parents, in time
        assert boss.start_ns <= span.start_ns <= span.end_ns <= boss.end_ns
    for span in tools.values():
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert asked.end_ns <= span.start_ns <= span.end_ns <= answered.start_ns

    # an agent as a tool runs under its tool call, and so does a graph tool's run
    helper = _one(spans, "invoke_agent helper")
    assert helper.parent_span_id == tools["helper"].span_id
    assert helper.attributes["counterpoint.agent.scope"].startswith("boss/1.")
    helper_chat = _children(spans, helper)
    assert [s.attributes["gen_ai.operation.name"] for s in helper_chat] == ["chat"]
    tiny = _one(spans, "run tiny")
    assert tiny.parent_span_id == tools["tiny"].span_id
    assert [s.attributes["counterpoint.node"] for s in _children(spans, tiny)] == ["double"]


async def test_content_is_left_out_unless_asked_for(
        server: OpenAIServer, receiver: OTLPReceiver, tracing: telemetry.Tracing) -> None:
    register_secret(SECRET)
    _, spans = await _traced_run(server, receiver, tracing)
    content = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
               "gen_ai.tool.call.arguments", "gen_ai.tool.call.result")
    assert not [(s.name, k) for s in spans for k in content if k in s.attributes]
    assert SECRET not in json.dumps([s.attributes for s in spans], default=str)


async def test_content_when_asked_for_follows_the_conventions_without_secrets(
        server: OpenAIServer, receiver: OTLPReceiver) -> None:
    register_secret(SECRET)
    with telemetry.instrument(endpoint=receiver.endpoint, content=True) as tracing:
        _, spans = await _traced_run(server, receiver, tracing)
    boss = _one(spans, "invoke_agent boss")
    answered = max((s for s in _children(spans, boss) if s.name == "chat gpt-test"),
                   key=lambda s: s.start_ns)
    messages = json.loads(answered.attributes["gen_ai.input.messages"])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "tool"]
    assert messages[0]["parts"][0]["type"] == "text"
    assert "Sum 2 and 3" in messages[0]["parts"][0]["content"]
    assert {p["type"] for p in messages[1]["parts"]} == {"tool_call"}
    assert messages[2]["parts"][0] == {"type": "tool_call_response",
                                       "id": messages[1]["parts"][0]["id"], "response": "5"}
    system = json.loads(answered.attributes["gen_ai.system_instructions"])
    assert system == [{"type": "text", "content": "You delegate."}]
    output = json.loads(answered.attributes["gen_ai.output.messages"])
    assert output == [{"role": "assistant", "finish_reason": "stop",
                       "parts": [{"type": "text", "content": "All done: 5, helped, 8."}]}]
    add_span = _one(spans, "execute_tool add")
    assert json.loads(add_span.attributes["gen_ai.tool.call.arguments"]) == {"a": 2, "b": 3}
    assert add_span.attributes["gen_ai.tool.call.result"] == "5"
    everything = json.dumps([[s.attributes, [e.attributes for e in s.events]] for s in spans],
                            default=str)
    assert SECRET not in everything and "***" in everything


async def test_a_secret_json_escapes_is_masked_in_the_captured_content(
        receiver: OTLPReceiver) -> None:
    """Content attributes are JSON: a password with ``"`` and ``\\`` is written there
    escaped, in a prompt's and an answer's messages and a tool's arguments."""
    password = 'pa"ss\\word-0123456789é'
    register_secret(password)
    model = Model(ScriptedModel([f"logged in with {password}"], name="escapes"))

    async def login() -> str:
        return (await model.generate(f"log in with {password}")).text

    g = cp.Graph("escapes")
    g.add("login", login)
    with telemetry.instrument(endpoint=receiver.endpoint, content=True) as tracing:
        assert (await cp.run(g, store="memory")).ok
        assert tracing.force_flush()
    spans = receiver.wait_for(lambda spans: any(s.name == "run escapes" for s in spans))
    chat = _one(spans, "chat escapes")
    [asked] = json.loads(chat.attributes["gen_ai.input.messages"])
    [answered] = json.loads(chat.attributes["gen_ai.output.messages"])
    assert asked["parts"][0]["content"] == "log in with ***"
    assert answered["parts"][0]["content"] == "logged in with ***"
    everything = json.dumps([s.attributes for s in spans], default=str, ensure_ascii=False)
    assert not [s for s in (password, json.dumps(password)[1:-1],
                            json.dumps(password, ensure_ascii=False)[1:-1]) if s in everything]


async def test_a_failed_run_and_a_cancelled_node_end_their_spans_with_their_status(
        receiver: OTLPReceiver, tracing: telemetry.Tracing) -> None:
    g = cp.Graph("failing")
    started = asyncio.Event()

    async def broken() -> None:
        raise ValueError("no luck")

    async def slow() -> None:
        started.set()
        await asyncio.sleep(60)

    g.add("broken", broken)
    g.add("slow", slow)
    handle = await cp.start(g, store="memory")
    await asyncio.wait_for(started.wait(), 10)
    edit = cp.Edit("not needed")
    edit.cancel("slow")
    handle.apply(edit)
    result = await handle.result()
    assert result.status == "failed"
    tracing.force_flush()
    spans = receiver.wait_for(lambda spans: any(s.name == "run failing" for s in spans))
    run = _one(spans, "run failing")
    assert run.status_code == 2 and run.attributes["counterpoint.status"] == "failed"
    broken_span = _one(spans, "node broken")
    assert broken_span.attributes["counterpoint.status"] == "failed"
    assert broken_span.attributes["counterpoint.error"] == "no luck"
    assert [e.name for e in broken_span.events] == ["exception"]
    slow_span = _one(spans, "node slow")
    assert slow_span.attributes["counterpoint.status"] == "cancelled"
    assert slow_span.status_code == 0 and slow_span.attributes["counterpoint.reason"]


async def test_a_run_inside_the_callers_span_is_its_child(
        receiver: OTLPReceiver, tracing: telemetry.Tracing) -> None:
    g = cp.Graph("nested")

    async def one() -> int:
        return 1

    g.add("one", one)
    with tracing.provider.get_tracer("caller").start_as_current_span("request") as outer:
        await cp.run(g, store="memory")
    tracing.force_flush()
    spans = receiver.wait_for(lambda spans: {"request", "run nested"} <= {s.name for s in spans})
    run = _one(spans, "run nested")
    assert run.parent_span_id == format(outer.get_span_context().span_id, "016x")


async def test_nothing_is_traced_once_tracing_is_shut_down(receiver: OTLPReceiver) -> None:
    tracing = telemetry.instrument(endpoint=receiver.endpoint)
    g = cp.Graph("before")

    async def one() -> int:
        return 1

    g.add("one", one)
    await cp.run(g, store="memory")
    tracing.shutdown()  # exports what is pending
    assert telemetry.active() is None
    before = receiver.spans
    assert {s.name for s in before} == {"run before", "node one"}
    await cp.run(g, store="memory")
    assert receiver.spans == before


async def test_a_run_torn_down_and_resumed_is_two_run_spans_of_one_run(
        receiver: OTLPReceiver, tracing: telemetry.Tracing) -> None:
    from support import stop_executing
    store = cp.MemoryStore()
    started = asyncio.Event()
    release = asyncio.Event()

    async def waits() -> str:
        started.set()
        await release.wait()
        return "done"

    g = cp.Graph("interrupted")
    g.add("waits", waits)
    handle = await cp.start(g, store=store)
    await asyncio.wait_for(started.wait(), 10)
    await stop_executing(handle)  # as a process shutting down: the run stays resumable
    release.set()
    result = await cp.resume(handle.run_id, store=store, graph=g)
    assert result.ok
    tracing.force_flush()
    spans = receiver.wait_for(lambda spans: sum(s.name == "run interrupted"
                                                for s in spans) == 2)
    first, second = sorted((s for s in spans if s.name == "run interrupted"),
                           key=lambda s: s.start_ns)
    assert first.attributes["counterpoint.run_id"] == second.attributes["counterpoint.run_id"]
    assert first.attributes["counterpoint.status"] == "interrupted"
    assert "counterpoint.resumed" not in first.attributes
    assert second.attributes["counterpoint.resumed"] is True
    assert second.attributes["counterpoint.status"] == "succeeded"
    cut = _children(spans, first)
    assert [s.attributes["counterpoint.status"] for s in cut] == ["interrupted"]
    again = _children(spans, second)
    assert [s.attributes["counterpoint.status"] for s in again] == ["succeeded"]
    assert first.end_ns <= second.start_ns


def test_tracing_without_the_sdk_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter",
                        None)  # as if the exporter were not installed
    with pytest.raises(cp.UserError, match=r"pip install 'counterpoint\[otel\]'"):
        telemetry.instrument(endpoint="http://127.0.0.1:9")
    assert telemetry.active() is None


async def test_a_sampler_that_keeps_nothing_exports_nothing_and_the_run_is_unchanged(
        server: OpenAIServer, receiver: OTLPReceiver) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
        endpoint=receiver.endpoint + "/v1/traces")))
    with telemetry.instrument(tracer_provider=provider) as tracing:
        _script(server)
        result = await cp.run(_graph(server), store="memory")
        assert tracing.force_flush()
    provider.shutdown()
    assert result.ok and result["agent"] == "All done: 5, helped, 8."
    assert receiver.requests == 0 and receiver.spans == []


async def test_an_event_that_cannot_be_traced_is_reported_and_the_run_goes_on(
        receiver: OTLPReceiver, tracing: telemetry.Tracing,
        caplog: pytest.LogCaptureFixture) -> None:
    g = cp.Graph("odd")

    async def planner(ctx: cp.NodeContext) -> str:  # a plan round, then a model call
        ctx.record(EventKind.PLAN_ROUND, {"phase": "plan", "attempt": 1})
        ctx.record(EventKind.MODEL_CALL, {"model": "m", "latency": "not a number"})
        return "planned"

    g.add("planner", planner)
    result = await cp.run(g, store="memory")
    assert result.ok
    tracing.force_flush()
    spans = receiver.wait_for(lambda spans: any(s.name == "run odd" for s in spans))
    node = _one(spans, "node planner")
    assert node.attributes["counterpoint.status"] == "succeeded"
    assert [(e.name, e.attributes) for e in node.events] == [
        ("counterpoint.plan_round", {"counterpoint.phase": "plan",
                                     "counterpoint.plan.attempt": "1"})]
    failures = [r for r in caplog.records if r.name == "counterpoint.telemetry"]
    assert len(failures) == 1 and "(model_call) could not be traced" in failures[0].message
