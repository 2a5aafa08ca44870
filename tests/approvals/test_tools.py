"""Tools declared ``@tool(approval=...)``: approve, edit the arguments, reject, and an
approved call that runs once even when the node is retried (pydantic-ai#5536)."""

from __future__ import annotations

from typing import Any

import pytest

import counterpoint as cp
from counterpoint.agents import Agent, tool
from counterpoint.events import EventKind
from counterpoint.models import Model, ScriptedModel, ToolCall
from counterpoint.models.types import Request

from .helpers import until_pending

DEPLOYED: list[dict[str, Any]] = []


@tool(side_effects=True, approval=True)
def deploy(target: str, replicas: int = 1) -> str:
    """Deploy to a target."""
    DEPLOYED.append({"target": target, "replicas": replicas})
    return f"deployed {target} x{replicas}"


@tool(approval=lambda args: args["amount"] > 100)
def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


def _last_tool_result(request: Request) -> str:
    return next(m.content for m in reversed(request.messages) if m.role == "tool")


def _graph(scripted: ScriptedModel, tools: list[Any]) -> cp.Graph:
    g = cp.Graph("tooling")
    g.add("ops", Agent("ops", model=Model(scripted, cache=False), tools=tools),
          task="Deploy prod.")
    return g


@pytest.fixture(autouse=True)
def _clean() -> None:
    DEPLOYED.clear()


async def test_an_approved_call_runs_once_with_the_arguments_it_was_asked_with() -> None:
    scripted = ScriptedModel([[ToolCall(id="1", name="deploy", arguments={"target": "prod"})],
                              _last_tool_result])
    store = cp.MemoryStore()
    handle = await cp.start(_graph(scripted, [deploy]), store=store)
    [pending] = await until_pending(handle, 1)
    assert pending.kind == "tool" and DEPLOYED == []  # nothing ran before the approval
    assert pending.payload == {"tool": "deploy", "arguments": {"target": "prod"}}
    handle.approve(pending.id)
    result = await handle.result()
    assert DEPLOYED == [{"target": "prod", "replicas": 1}]
    assert result.outputs["ops"] == "deployed prod x1"


async def test_an_edit_replaces_the_arguments_and_is_checked_against_the_schema() -> None:
    scripted = ScriptedModel([[ToolCall(id="1", name="deploy", arguments={"target": "prod"})],
                              _last_tool_result])
    store = cp.MemoryStore()
    handle = await cp.start(_graph(scripted, [deploy]), store=store)
    [pending] = await until_pending(handle, 1)
    with pytest.raises(cp.ApprovalError, match="replicas: 'two' is not of type 'integer'"):
        cp.approve(store, pending.id, edit={"target": "canary", "replicas": "two"})
    handle.approve(pending.id, edit={"target": "canary", "replicas": 2})
    result = await handle.result()
    assert DEPLOYED == [{"target": "canary", "replicas": 2}]
    assert result.outputs["ops"] == "deployed canary x2"
    [call] = [e.data for e in store.events(result.run_id) if e.kind is EventKind.TOOL_CALL]
    assert call is not None and call["arguments"] == {"target": "canary", "replicas": 2}


async def test_a_rejected_call_does_not_run_and_the_model_is_told_why() -> None:
    scripted = ScriptedModel([[ToolCall(id="1", name="deploy", arguments={"target": "prod"})],
                              _last_tool_result])
    store = cp.MemoryStore()
    handle = await cp.start(_graph(scripted, [deploy]), store=store)
    [pending] = await until_pending(handle, 1)
    handle.reject(pending.id, "freeze until Monday", by="ana")
    result = await handle.result()
    assert DEPLOYED == []
    assert result.outputs["ops"] == "error: the call was rejected by ana: freeze until Monday"


async def test_a_callable_policy_asks_only_for_the_calls_it_names() -> None:
    scripted = ScriptedModel([[ToolCall(id="1", name="pay", arguments={"amount": 5})],
                              [ToolCall(id="2", name="pay", arguments={"amount": 500})],
                              _last_tool_result])
    store = cp.MemoryStore()
    handle = await cp.start(_graph(scripted, [pay]), store=store)
    [pending] = await until_pending(handle, 1)
    assert pending.payload == {"tool": "pay", "arguments": {"amount": 500}}
    handle.approve(pending.id)
    result = await handle.result()
    assert result.outputs["ops"] == "paid 500"
    kinds = [e.kind for e in store.events(result.run_id)]
    assert kinds.count(EventKind.APPROVAL_REQUESTED) == 1


async def test_an_approved_call_is_not_made_again_when_the_node_is_retried() -> None:
    scripted = ScriptedModel([[ToolCall(id="1", name="deploy", arguments={"target": "prod"})],
                              _last_tool_result,
                              # the retry: the model asks for the same call again
                              [ToolCall(id="1", name="deploy", arguments={"target": "prod"})],
                              _last_tool_result])
    agent = Agent("ops", model=Model(scripted, cache=False), tools=[deploy])
    g = cp.Graph("retried-tool")

    async def ops(ctx: cp.NodeContext) -> str:
        text = await agent("Deploy prod.")  # the same task in every attempt
        if ctx.attempt == 1:
            raise cp.Retry("the step failed after the deploy")
        return str(text)
    g.add("ops", ops, policy=cp.Policy(retries=1, backoff=cp.Backoff(initial=0.0, jitter=0.0)))
    store = cp.MemoryStore()
    handle = await cp.start(g, store=store)
    [pending] = await until_pending(handle, 1)
    handle.approve(pending.id)
    result = await handle.result()
    assert result.status is cp.RunStatus.SUCCEEDED
    assert DEPLOYED == [{"target": "prod", "replicas": 1}]  # once, not once per attempt
    assert result.outputs["ops"] == "deployed prod x1"
    results = [e.data for e in store.events(result.run_id) if e.kind is EventKind.TOOL_RESULT]
    assert [bool(r and r.get("replayed")) for r in results] == [False, True]
