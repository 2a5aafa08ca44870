"""A model whose tool call is malformed (arguments that are not a JSON object, a tool
that does not exist, arguments of the wrong type) is told what was wrong, as the call's
result, and asked again: the agent's node does not fail for one bad call. Served by
the scripted OpenAI server on loopback, through the real OpenAI client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.agents import Agent, tool
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.testing import OpenAIServer, Reply


@tool
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def _run(server: OpenAIServer) -> cp.RunResult:
    model = cp.Model(OpenAIProvider("fake", "m", base_url=server.base_url), retries=0,
                     cache=False)
    g = cp.Graph("malformed")
    g.add("a", Agent("adder", model=model, tools=[add], max_turns=4), task="add 1 and 2")
    return cp.run_sync(g, store="memory")


def _tool_results(request: Any) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize(("arguments", "told"), [
    ("{not json", "the arguments of tool call 'add' are not a JSON object: '{not json'"),
    ("[1, 2]", "the arguments of tool call 'add' are not a JSON object: '[1, 2]'"),
])
def test_arguments_that_are_not_an_object_are_answered_with_the_error(
        server: OpenAIServer, arguments: str, told: str) -> None:
    server.script(Reply.tool_calls([("add", arguments)]),
                  Reply.tool_calls([("add", {"a": 1, "b": 2})]), Reply.text("It is 3."))
    result = _run(server)
    assert result.status == "succeeded", result.nodes["a"].error
    assert result["a"] == "It is 3."
    second, third = server.requests[1], server.requests[2]
    assert len(_tool_results(second)) == 1 and told in _tool_results(second)[0]
    assert "send the arguments as one JSON object" in _tool_results(second)[0]
    assert _tool_results(third)[-1] == "3"  # the corrected call ran


def test_an_unknown_tool_and_wrong_types_are_answered_too(server: OpenAIServer) -> None:
    server.script(Reply.tool_calls([("nosuch", {"a": 1})]),
                  Reply.tool_calls([("add", {"a": "one", "b": None})]), Reply.text("done"))
    result = _run(server)
    assert result.status == "succeeded", result.nodes["a"].error
    assert "called unknown tool(s) ['nosuch']" in _tool_results(server.requests[1])[0]
    assert "invalid arguments for tool add" in _tool_results(server.requests[2])[-1]


def test_a_model_that_never_writes_valid_arguments_fails_the_node_boundedly(
        server: OpenAIServer) -> None:
    server.script(*[Reply.tool_calls([("add", "{oops")])] * 8)
    result = _run(server)
    error = result.nodes["a"].error
    assert result.status == "failed" and error is not None
    assert "did not match the tool calls" in error["message"]
    assert "not a JSON object" in error["message"]
    assert len(server.requests) < 8  # bounded by the model's re-asks, not the script
