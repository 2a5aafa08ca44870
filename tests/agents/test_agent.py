"""Agents with the scripted model: the loop, its bounds, agents as nodes and tools, the
events they leave, and resuming a loop after a crash without repeating model calls
or side effects.

Crashes are simulated two ways: in-process, by cancelling the task that executes
the run while a tool hangs (the run stays resumable, as after a kill), and for
real, by SIGKILLing a subprocess (``tests/fixtures/agent_runner.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from support import stop_executing

import counterpoint as cp
from counterpoint.agents import Agent, AgentError, Tool, ToolError, graph_tool, tool
from counterpoint.events import Event, EventKind
from counterpoint.ids import RunId
from counterpoint.models import Message, Model, Request, Response, ScriptedModel, ToolCall, Usage
from counterpoint.store import RunStore, SQLiteStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WAIT = 10.0
"""Seconds before a test gives up waiting for something that should happen at once."""


class City(BaseModel):
    name: str
    population: int


def _call(tool_name: str, id: str | None = None, /, **arguments: Any) -> ToolCall:
    return ToolCall(id=id or f"call-{tool_name}", name=tool_name, arguments=arguments)


def _events(store: RunStore, run_id: RunId, kind: EventKind) -> list[Event]:
    return [e for e in store.events(run_id) if e.kind is kind]


def _data(events: Iterable[Event]) -> list[dict[str, Any]]:
    return [e.data or {} for e in events]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


# ------------------------------------------------------------------ the loop
async def test_tool_call_then_result_then_final_answer() -> None:
    with ScriptedModel([[_call("add", a=2, b=3)], "It is 5."]) as scripted:
        agent = Agent("calc", model=scripted, instructions="You add.", tools=[add])
        result = await agent.run("What is 2 + 3?")
    assert (result.output, result.text, result.turns, result.tool_calls) == \
        ("It is 5.", "It is 5.", 2, 1)
    assert result.usage.calls == 2 and result.replayed_turns == 0 and result.scope == "calc"
    first, second = scripted.requests
    assert [t.name for t in first.tools] == ["add"] and first.output is None
    assert first.messages[0] == Message.system("You add.")
    assert first.messages[-1] == Message.user("What is 2 + 3?")
    assert second.messages[-2].tool_calls == (_call("add", a=2, b=3),)
    assert second.messages[-1] == Message(role="tool", content="5", tool_call_id="call-add",
                                          name="add")
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]


def test_run_sync_outside_an_event_loop() -> None:
    agent = Agent("sync", model=ScriptedModel(["hello"]))
    assert agent.run_sync("Say hello").output == "hello"


async def test_tool_calls_of_one_turn_run_concurrently() -> None:
    arrived = {"left": asyncio.Event(), "right": asyncio.Event()}

    @tool
    async def meet(side: str) -> str:
        """Wait at the meeting point for the other side."""
        arrived[side].set()
        other = "right" if side == "left" else "left"
        # a deadlock guard, not a measurement: run one after the other, they never meet
        await asyncio.wait_for(arrived[other].wait(), WAIT)
        return f"{side} met {other}"

    barrier = threading.Barrier(2, timeout=WAIT)

    @tool
    def rendezvous(n: int) -> int:
        """The same, for sync tools in worker threads."""
        barrier.wait()
        return n

    scripted = ScriptedModel([[_call("meet", "1", side="left"), _call("meet", "2", side="right"),
                               _call("rendezvous", "3", n=1), _call("rendezvous", "4", n=2)],
                              "done"])
    result = await Agent("pair", model=scripted, tools=[meet, rendezvous]).run("Meet.")
    assert result.output == "done" and result.tool_calls == 4
    results = scripted.requests[1].messages[-4:]
    assert [(m.tool_call_id, m.content) for m in results] == [
        ("1", "left met right"), ("2", "right met left"), ("3", "1"), ("4", "2")]


async def test_structured_output_after_a_tool_loop() -> None:
    @tool
    def population(city: str) -> int:
        """Look up a city's population."""
        return {"Lyon": 522000}[city]

    scripted = ScriptedModel([[_call("population", city="Lyon")], "Lyon has 522000 people.",
                              {"name": "Lyon", "population": 522000}])
    agent = Agent("census", model=scripted, tools=[population], output=City)
    result = await agent.run("How many people live in Lyon?")
    assert result.output == City(name="Lyon", population=522000)
    assert result.turns == 3
    tool_turn, text_turn, final = scripted.requests
    assert tool_turn.output is None and text_turn.output is None and tool_turn.tools
    assert final.output is not None and final.output.schema_["required"] == ["name",
                                                                             "population"]
    assert final.tools == ()
    assert "final answer as JSON" in final.messages[-1].content


async def test_structured_output_without_tools_is_one_call() -> None:
    with ScriptedModel([{"name": "Oslo", "population": 700000}]) as scripted:
        result = await Agent("one", model=scripted, output=City).run("A city?")
    assert result.output == City(name="Oslo", population=700000) and result.turns == 1
    (request,) = scripted.requests
    assert request.output is not None and request.tools == ()


async def test_an_unknown_tool_is_fed_back_to_the_model() -> None:
    # the model layer checks names and re-asks with the problem: not a crash
    scripted = ScriptedModel([[_call("subtract", a=1, b=2)], [_call("add", a=1, b=2)], "3"])
    result = await Agent("calc", model=scripted, tools=[add]).run("1 + 2?")
    assert result.output == "3"
    feedback = scripted.requests[1].messages[-1].content
    assert "subtract" in feedback and "add" in feedback


async def test_tool_errors_and_invalid_arguments_are_fed_back() -> None:
    @tool
    def capital(country: str) -> str:
        """The capital of a country."""
        if country != "France":
            raise ToolError(f"no capital known for {country}")
        return "Paris"

    scripted = ScriptedModel([[_call("capital", "1", country="Atlantis"),
                               _call("capital", "2", land="France")],
                              [_call("capital", "3", country="France")], "Paris."])
    store = cp.MemoryStore()
    g = cp.Graph("capitals")
    g.add("ask", Agent("geo", model=scripted, tools=[capital]), task="Capital of France?")
    result = await cp.run(g, store=store)
    assert result.ok and result["ask"] == "Paris."
    errors = scripted.requests[1].messages[-2:]
    assert errors[0].content == "error: no capital known for Atlantis"
    assert errors[1].content.startswith("error: invalid arguments for tool capital")
    assert "land: Extra inputs" in errors[1].content and "country: Field required" in \
        errors[1].content
    outcomes = [(d["key"] != "", d["ok"]) for d in
                _data(_events(store, result.run_id, EventKind.TOOL_RESULT))]
    assert outcomes == [(True, False), (True, False), (True, True)]


async def test_a_tool_that_raises_fails_the_node_with_its_own_exception() -> None:
    @tool
    def broken(x: int) -> int:
        """Always fails."""
        raise KeyError("missing")

    @tool
    async def slow(x: int) -> int:
        """Never finishes by itself."""
        await asyncio.Event().wait()
        return x

    scripted = ScriptedModel([[_call("slow", "1", x=1), _call("broken", "2", x=1)]])
    agent = Agent("fragile", model=scripted, tools=[broken, slow])
    with pytest.raises(KeyError) as caught:  # not an ExceptionGroup; `slow` is cancelled
        await agent.run("go")
    assert any("tool broken" in note and "agent fragile" in note
               for note in caught.value.__notes__)


# ------------------------------------------------------------------ bounds
def _bounded(kind: str) -> Agent:
    """An agent that keeps calling tools until ``kind`` (turns, tokens, deadline) stops it."""
    @tool
    async def poke(n: int) -> str:
        """Poke once more."""
        if kind == "deadline":
            await asyncio.Event().wait()
        return "poked"

    usage = Usage(input_tokens=60, output_tokens=50, calls=1)
    answers: list[Any] = [Response(tool_calls=(_call("poke", n=i),), usage=usage)
                          for i in range(4)]
    options: dict[str, Any] = {"turns": {"max_turns": 2}, "tokens": {"max_tokens": 100},
                               "deadline": {"deadline": 0.05}}[kind]
    return Agent("looper", model=Model(ScriptedModel(answers), cache=False), tools=[poke],
                 **options)


STOPS = {"turns": r"no final answer after 2 turns; raise max_turns",
         "tokens": r"token budget of 100 used up \(110\) after 1 turn\(s\); raise max_tokens",
         "deadline": r"deadline of 0.05s passed after 1 turn\(s\)"}


@pytest.mark.parametrize("kind", sorted(STOPS))
async def test_bounds_raise_an_agent_error_naming_the_agent(kind: str) -> None:
    with pytest.raises(AgentError, match=rf"^agent looper: {STOPS[kind]}") as caught:
        await _bounded(kind).run("Poke forever.")
    assert not caught.value.retryable


@pytest.mark.parametrize("kind", sorted(STOPS))
async def test_bounds_inside_a_run_name_the_run_and_node(kind: str) -> None:
    g = cp.Graph("bounded")
    g.add("poker", _bounded(kind), task="Poke forever.", retries=2)
    result = await cp.run(g, store="memory")
    node = result.nodes["poker"]
    assert node.status is cp.NodeStatus.FAILED and node.attempts == 1  # not retryable
    assert node.error is not None and node.error["type"] == "AgentError"
    assert node.error["message"].startswith(
        f"run {result.run_id}, node 'poker', attempt 1: agent looper: ")
    assert STOPS[kind].split(";")[0].replace("\\", "") in node.error["message"]


async def test_a_tools_own_timeout_is_not_the_agents_deadline() -> None:
    @tool
    async def flaky(x: int) -> int:
        """Times out on its own."""
        raise TimeoutError("upstream timed out")

    agent = Agent("patient", model=ScriptedModel([[_call("flaky", x=1)]]), tools=[flaky])
    with pytest.raises(TimeoutError, match="upstream timed out"):
        await agent.run("go")


def test_options_are_checked() -> None:
    for bad in ({"max_turns": 0}, {"max_tokens": 0}, {"deadline": -1.0},
                {"turn_tokens": 0}):
        with pytest.raises(cp.UserError, match="agent a: "):
            Agent("a", model=ScriptedModel(), **bad)
    with pytest.raises(cp.UserError, match="without '/' or '#'"):
        Agent("a/b", model=ScriptedModel())


# ----------------------------------------------------------- agents as nodes
async def test_an_agent_node_gets_its_dependency_under_a_context_heading() -> None:
    def facts() -> dict[str, Any]:
        return {"capital": "Paris", "rivers": ["Seine"]}

    scripted = ScriptedModel(["Paris is on the Seine.", {"name": "Paris", "population": 2}])
    writer = Agent("writer", model=scripted)
    typed = Agent("typed", model=scripted, output=City)
    g = cp.Graph("noded")
    known = g.add("facts", facts)
    summary = g.add("summary", writer, task="Summarise the facts.", context=known)
    g.add("city", typed, task="Which city?", context=summary)
    result = await cp.run(g, store="memory", options=cp.RunOptions(max_concurrency=1))
    assert result.ok
    assert result["summary"] == "Paris is on the Seine."
    assert result["city"] == {"name": "Paris", "population": 2}  # JSON in the log
    first, second = (r.messages[-1].content for r in scripted.requests)
    # a mapping (here the dependency's dict output) is one section per key
    assert first == ('Summarise the facts.\n\n# Context\n## capital\nParis\n\n'
                     '## rivers\n[\n "Seine"\n]')
    assert second == "Which city?\n\n# Context\nParis is on the Seine."


async def test_named_context_inputs_become_sections() -> None:
    scripted = ScriptedModel(["ok"])
    await Agent("reader", model=scripted).run(
        "Compare.", context={"left": "A", "right": {"n": 1}})
    assert scripted.requests[0].messages[-1].content == \
        'Compare.\n\n# Context\n## left\nA\n\n## right\n{\n "n": 1\n}'


def _echo_model(calls: int) -> ScriptedModel:
    """Answers by the conversation, not by call order: echo the task, then report it."""
    def answer(request: Request) -> Response | str:
        last = request.messages[-1]
        if last.role == "user":
            return Response(tool_calls=(_call("echo", text=last.content),))
        return f"answer to {last.content}"
    return ScriptedModel([answer] * calls)


async def test_one_agent_serves_parallel_nodes(store: RunStore) -> None:
    both_in = asyncio.Barrier(2)

    @tool
    async def echo(text: str) -> str:
        """Echo the text (once both nodes are here: their loops overlap)."""
        await asyncio.wait_for(both_in.wait(), WAIT)
        return text

    scripted = _echo_model(4)
    agent = Agent("echoer", model=scripted, tools=[echo])
    g = cp.Graph("reentrant")
    g.add("a", agent, task="alpha")
    g.add("b", agent, task="beta")
    result = await cp.run(g, store=store)
    assert result.ok
    assert result.outputs == {"a": "answer to alpha", "b": "answer to beta"}
    turns = _events(store, result.run_id, EventKind.AGENT_TURN)
    assert Counter((e.node, e.data["scope"]) for e in turns if e.data) == \
        {("a", "echoer"): 2, ("b", "echoer"): 2}


async def test_the_same_agent_twice_in_one_node_has_two_scopes() -> None:
    scripted = ScriptedModel(["one", "two"])
    agent = Agent("twice", model=scripted)

    async def both() -> list[str]:
        first, second = await agent.run("first"), await agent.run("second")
        return [first.scope, second.scope]

    store = cp.MemoryStore()
    g = cp.Graph("twice")
    g.add("n", both)
    result = await cp.run(g, store=store)
    assert result["n"] == ["twice", "twice#2"]
    assert [d["scope"] for d in _data(_events(store, result.run_id,
                                              EventKind.AGENT_TURN))] == ["twice", "twice#2"]


# ----------------------------------------------------------- agents as tools
async def test_an_agent_as_a_tool_of_another_agent(store: RunStore) -> None:
    inner_model = ScriptedModel([[_call("add", a=20, b=22)], "The sum is 42."])
    outer_model = ScriptedModel([[_call("adder", task="Add 20 and 22.")], "42, says adder."])
    inner = Agent("adder", model=inner_model, tools=[add], description="Adds numbers.")
    outer = Agent("boss", model=outer_model, tools=[inner])
    assert outer.tools[0].description == "Adds numbers."
    assert outer.tools[0].parameters["required"] == ["task"]
    g = cp.Graph("nested")
    g.add("boss", outer, task="What is 20 + 22?")
    result = await cp.run(g, store=store)
    assert result.ok and result["boss"] == "42, says adder."
    assert outer_model.requests[1].messages[-1].content == "The sum is 42."
    assert inner_model.requests[0].messages[-1].content == "Add 20 and 22."
    run = result.run_id
    turns = [(d["scope"], d["turn"]) for d in _data(_events(store, run, EventKind.AGENT_TURN))]
    assert turns == [("boss", 1), ("boss/1.0/adder", 1), ("boss/1.0/adder", 2), ("boss", 2)]
    results = {d["tool"]: d["scope"] for d in _data(_events(store, run,
                                                            EventKind.TOOL_RESULT))}
    assert results == {"add": "boss/1.0/adder", "adder": "boss"}
    purposes = [d.get("purpose") for d in _data(_events(store, run, EventKind.MODEL_CALL))]
    assert purposes == ["agent boss turn 1", "agent boss/1.0/adder turn 1",
                        "agent boss/1.0/adder turn 2", "agent boss turn 2"]


async def test_a_nested_agent_that_gives_up_is_an_error_the_outer_agent_reads() -> None:
    inner = Agent("quitter", model=ScriptedModel([[_call("add", a=1, b=1)]] * 2),
                  tools=[add], max_turns=1)
    outer_model = ScriptedModel([[_call("quitter", task="Add.")], "It gave up."])
    result = await Agent("boss", model=outer_model, tools=[inner]).run("Go.")
    assert result.output == "It gave up."
    content = outer_model.requests[1].messages[-1].content
    assert content.startswith("error: agent quitter (scope boss/1.0/quitter): no final answer")


async def test_an_agent_tool_without_a_task_is_a_tool_error() -> None:
    inner = Agent("helper", model=ScriptedModel())
    outer_model = ScriptedModel([[_call("helper", context="no task")], "Sorry."])
    await Agent("boss", model=outer_model, tools=[inner]).run("Go.")
    assert "task: Field required" in outer_model.requests[1].messages[-1].content


async def test_a_graph_as_a_tool() -> None:
    sub = cp.Graph("doubler")
    n = sub.input("n", int)

    def double(n: int) -> int:
        if n < 0:
            raise ValueError("negative")
        return 2 * n

    sub.output(sub.add("double", double, n=n))
    as_tool = graph_tool(sub, description="Double a number.")
    assert isinstance(as_tool, Tool) and as_tool.name == "doubler"
    assert as_tool.parameters["properties"] == {"n": {"type": "integer"}}
    scripted = ScriptedModel([[_call("doubler", "1", n=21), _call("doubler", "2", n=-1),
                               _call("doubler", "3", n="x")], "42"])
    g = cp.Graph("uses-graph")
    g.add("user", Agent("user", model=scripted, tools=[sub]), task="Double 21.")
    store = cp.MemoryStore()
    result = await cp.run(g, store=store)
    assert result["user"] == "42"
    outcomes = {d["index"]: d["ok"] for d in _data(_events(store, result.run_id,
                                                           EventKind.TOOL_RESULT))}
    assert outcomes == {0: True, 1: False, 2: False}
    ok, failed, invalid = (m.content for m in scripted.requests[1].messages[-3:])
    assert ok == "42"
    assert failed.startswith("error: graph doubler: ") and "double" in failed
    assert invalid.startswith("error: invalid arguments for tool doubler: n:")


# ----------------------------------------------------------------- events
async def test_loop_events_in_the_log(store: RunStore, tmp_path: Path) -> None:
    sent = tmp_path / "sent.txt"

    @tool(side_effects=True)
    def send(to: str, idempotency_key: str | None = None) -> str:
        """Send a note."""
        with sent.open("a") as f:
            f.write(f"{idempotency_key}\n")
        return f"sent to {to}"

    scripted = ScriptedModel([[_call("send", "1", to="ann"), _call("add", "2", a=1, b=1)],
                              "Sent."])
    g = cp.Graph("events")
    g.add("mailer", Agent("postie", model=scripted, tools=[send, add]), task="Mail ann.")
    result = await cp.run(g, store=store)
    assert result.ok
    run = result.run_id
    kinds = [EventKind.AGENT_TURN, EventKind.TOOL_CALL, EventKind.TOOL_RESULT,
             EventKind.MODEL_CALL]
    found = {k: _events(store, run, k) for k in kinds}
    assert {k: len(v) for k, v in found.items()} == {
        EventKind.AGENT_TURN: 2, EventKind.TOOL_CALL: 2, EventKind.TOOL_RESULT: 2,
        EventKind.MODEL_CALL: 2}
    for events in found.values():
        assert {(e.node, e.attempt) for e in events} == {("mailer", 1)}
    for kind in kinds[:3]:
        assert {d["scope"] for d in _data(found[kind])} == {"postie"}
    first_turn = _data(found[EventKind.AGENT_TURN])[0]
    assert first_turn["agent"] == "postie" and first_turn["tool_calls"] == ["send", "add"]
    calls = {d["tool"]: d for d in _data(found[EventKind.TOOL_CALL])}
    results = {d["tool"]: d for d in _data(found[EventKind.TOOL_RESULT])}
    assert calls["send"]["side_effects"] and not calls["add"]["side_effects"]
    assert calls["send"]["arguments"] == {"to": "ann"}
    assert results["send"]["content"] == "sent to ann" and results["add"]["content"] == "2"
    assert calls["send"]["key"] == results["send"]["key"] == sent.read_text().strip()
    assert calls["add"]["key"] != calls["send"]["key"]
    seqs = {e.seq: e.kind for e in store.events(run)}
    turn_seq = min(s for s, k in seqs.items() if k is EventKind.AGENT_TURN)
    call_seq = next(e.seq for e in found[EventKind.TOOL_CALL] if e.data
                    and e.data["tool"] == "send")
    assert turn_seq < call_seq  # the turn is logged before its calls


# ------------------------------------------------------------- crash & resume
class Steps:
    """A ``step`` tool whose calls are counted; steps named in ``block`` hang (until the
    test crashes the run) after setting ``entered``."""

    def __init__(self, *block: str) -> None:
        self.calls: Counter[str] = Counter()
        self.block = set(block)
        self.entered = asyncio.Event()

        @tool
        async def step(name: str) -> str:
            """Do one named step."""
            self.calls[name] += 1
            if name in self.block:
                self.entered.set()
                await asyncio.Event().wait()
            return f"{name} done"

        self.tool = step


def _worker(model: ScriptedModel, *tools: Tool, output: type[Any] | None = None) -> cp.Graph:
    agent = Agent("worker", model=Model(model, cache=False), tools=tools, output=output)
    g = cp.Graph("resumable")
    g.add("work", agent, task="Do the steps.")
    return g


async def _crash(handle: cp.RunHandle, entered: asyncio.Event) -> None:
    """Stop executing the run the way a dying process would: nothing ends, it stays resumable."""
    await asyncio.wait_for(entered.wait(), WAIT)
    await stop_executing(handle)
    assert handle.state.status is cp.RunStatus.RUNNING


def _by_attempt(store: RunStore, run: RunId, kind: EventKind) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = {}
    for e in _events(store, run, kind):
        grouped.setdefault(e.attempt, []).append(e.data or {})
    return grouped


async def test_resume_replays_turns_and_tool_results(store: RunStore) -> None:
    steps = Steps("two")
    first = ScriptedModel([[_call("step", name="one")], [_call("step", name="two")]])
    handle = await cp.start(_worker(first, steps.tool), store=store)
    await _crash(handle, steps.entered)
    first.verify()
    run = handle.run_id
    assert [d["turn"] for d in _data(_events(store, run, EventKind.AGENT_TURN))] == [1, 2]

    steps.block.clear()
    second = ScriptedModel(["finished"])  # only the answer never given: a repeat fails
    result = await cp.resume(run, store=store, graph=_worker(second, steps.tool))
    assert result.ok and result["work"] == "finished"
    assert result.nodes["work"].attempts == 2
    assert steps.calls == {"one": 1, "two": 2}  # "two" had no recorded result
    (request,) = second.requests
    assert [(m.role, m.content) for m in request.messages] == [
        ("user", "Do the steps."), ("assistant", ""), ("tool", "one done"),
        ("assistant", ""), ("tool", "two done")]
    model_calls = _by_attempt(store, run, EventKind.MODEL_CALL)
    assert {a: len(v) for a, v in model_calls.items()} == {1: 2, 2: 1}
    turns = _by_attempt(store, run, EventKind.AGENT_TURN)
    assert [(d["turn"], d.get("replayed", False)) for d in turns[2]] == \
        [(1, True), (2, True), (3, False)]
    assert result.nodes["work"].usage.calls == 3


async def test_a_second_crash_loses_no_replayed_turn(store: RunStore) -> None:
    steps = Steps("two")
    first = ScriptedModel([[_call("step", name="one")], [_call("step", name="two")]])
    handle = await cp.start(_worker(first, steps.tool), store=store)
    await _crash(handle, steps.entered)

    steps.block, steps.entered = {"three"}, asyncio.Event()
    second = ScriptedModel([[_call("step", name="three")]])
    again = await cp.start_resume(handle.run_id, store=store,
                                  graph=_worker(second, steps.tool))
    await _crash(again, steps.entered)
    assert len(second.requests) == 1

    steps.block.clear()
    third = ScriptedModel(["finished"])
    result = await cp.resume(handle.run_id, store=store, graph=_worker(third, steps.tool))
    assert result["work"] == "finished"
    (request,) = third.requests
    assert [m.content for m in request.messages if m.role == "tool"] == \
        ["one done", "two done", "three done"]
    assert steps.calls == {"one": 1, "two": 2, "three": 2}
    calls = _by_attempt(store, handle.run_id, EventKind.MODEL_CALL)
    assert {a: len(v) for a, v in calls.items()} == {1: 2, 2: 1, 3: 1}


async def test_resume_replays_a_structured_answer_and_numbers_repeated_loops(
        store: RunStore) -> None:
    gate = Steps("wait")

    def graph(model: ScriptedModel) -> cp.Graph:
        lister = Agent("lister", model=Model(model, cache=False), output=list[str])

        async def twice() -> list[Any]:
            first = await lister.run("First list.")
            await gate.tool.call({"name": "wait"})
            second = await lister.run("Second list.")
            # replayed turns count their recorded usage: budgets hold across a resume
            return [first.output, first.replayed_turns, first.usage.calls, second.output,
                    second.scope]

        g = cp.Graph("lists")
        g.add("lists", twice)
        return g

    handle = await cp.start(graph(ScriptedModel([{"value": ["a", "b"]}])), store=store)
    await _crash(handle, gate.entered)
    gate.block.clear()
    later = ScriptedModel([{"value": ["c"]}])
    result = await cp.resume(handle.run_id, store=store, graph=graph(later))
    assert result["lists"] == [["a", "b"], 1, 1, ["c"], "lister#2"]
    assert len(later.requests) == 1 and "Second list." in later.requests[0].messages[-1].content


# --------------------------------------------------------- side effects
def _clerk(model: ScriptedModel, sent: Path, hang: asyncio.Event | None,
           entered: asyncio.Event, steps: Steps) -> cp.Graph:
    @tool(side_effects=True)
    async def send(text: str, idempotency_key: str | None = None) -> str:
        """Send a message (then, if asked to, hang before its result is recorded)."""
        with sent.open("a") as f:
            f.write(f"{idempotency_key}\n")
        if hang is not None:
            entered.set()
            await hang.wait()
        return f"sent {text}"

    agent = Agent("clerk", model=Model(model, cache=False), tools=[send, steps.tool])
    g = cp.Graph("clerk")
    g.add("clerk", agent, task="Send hi, then wait.")
    return g


async def test_a_side_effect_with_a_durable_result_is_not_repeated(store: RunStore,
                                                                   tmp_path: Path) -> None:
    sent = tmp_path / "sent.txt"
    steps = Steps("wait")
    first = ScriptedModel([[_call("send", text="hi")], [_call("step", name="wait")]])
    handle = await cp.start(_clerk(first, sent, None, steps.entered, steps), store=store)
    await _crash(handle, steps.entered)
    steps.block.clear()
    result = await cp.resume(handle.run_id, store=store, graph=_clerk(
        ScriptedModel(["Sent."]), sent, None, asyncio.Event(), steps))
    assert result["clerk"] == "Sent."
    (key,) = sent.read_text().split()  # one effect
    results = _by_attempt(store, handle.run_id, EventKind.TOOL_RESULT)
    sends = [(a, d["key"], d.get("replayed", False)) for a, ds in results.items() for d in ds
             if d["tool"] == "send"]
    assert sends == [(1, key, False), (2, key, True)]


async def test_a_side_effect_cut_off_before_its_result_is_retried_with_the_same_key(
        sqlite_store: SQLiteStore, tmp_path: Path) -> None:
    sent = tmp_path / "sent.txt"
    steps = Steps()
    entered = asyncio.Event()
    first = ScriptedModel([[_call("send", text="hi")]])
    handle = await cp.start(_clerk(first, sent, asyncio.Event(), entered, steps),
                            store=sqlite_store)
    await asyncio.wait_for(entered.wait(), WAIT)
    # everything up to the call was durable before the effect began
    durable = {e.kind for e in sqlite_store.events(handle.run_id)}
    assert {EventKind.AGENT_TURN, EventKind.TOOL_CALL} <= durable
    await _crash(handle, entered)
    result = await cp.resume(handle.run_id, store=sqlite_store, graph=_clerk(
        ScriptedModel(["Sent."]), sent, None, asyncio.Event(), steps))
    assert result["clerk"] == "Sent."
    keys = sent.read_text().split()
    assert len(keys) == 2 and keys[0] == keys[1]  # the external system can drop the repeat
    tool_calls = _by_attempt(sqlite_store, handle.run_id, EventKind.TOOL_CALL)
    assert [d["key"] for a in (1, 2) for d in tool_calls[a]] == keys


def _run_agent_process(command: str, db: Path, run_id: str, folder: Path,
                       phase: str) -> subprocess.Popen[str]:
    env = {**os.environ, "AGENT_CRASH_DIR": str(folder), "AGENT_CRASH_PHASE": phase}
    return subprocess.Popen([sys.executable, str(FIXTURES / "agent_runner.py"), command,
                             str(db), run_id], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def _wait_for(condition: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the runner exited ({proc.returncode}) too early:\n{out}\n{err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the runner never reached the point where it is killed")
        time.sleep(0.01)


def test_sigkill_mid_loop_then_resume(tmp_path: Path) -> None:
    db, run_id = tmp_path / "runs.db", "r-agent-crash"
    proc = _run_agent_process("run", db, run_id, tmp_path, "run")
    _wait_for((tmp_path / "ready.flag").exists, proc)  # sent; charged; result not recorded
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)

    resumed = _run_agent_process("resume", db, run_id, tmp_path, "resume")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary == {"status": "succeeded", "outputs": {"clerk": "all done"}, "requests": 1}
    assert len((tmp_path / "sent.txt").read_text().split()) == 1  # durable result: not again
    charged = (tmp_path / "charged.txt").read_text().split()
    assert len(charged) == 2 and charged[0] == charged[1]  # cut off: again, same key
    store = SQLiteStore(db)
    try:
        calls = _by_attempt(store, RunId(run_id), EventKind.MODEL_CALL)
        assert {a: len(v) for a, v in calls.items()} == {1: 2, 2: 1}
    finally:
        store.close()
