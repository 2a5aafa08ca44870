"""A side-effecting tool call whose result is in the log is not made again by a retry of
its node: the retried agent, asked afresh, that makes the same call gets the recorded
result (the effect ran once), while a different call, and a tool without side effects,
runs."""

from __future__ import annotations

from typing import Any

import counterpoint as cp
from counterpoint.agents import Agent, tool
from counterpoint.events import EventKind
from counterpoint.models import ScriptedModel, ToolCall


def _mailer(script: list[Any], sent: list[tuple[str, str]],
            looked: list[str]) -> cp.Graph:
    @tool(side_effects=True)
    def send_email(to: str, idempotency_key: str) -> str:
        """Send an email.

        Args:
            to: Who gets it.
        """
        sent.append((to, idempotency_key))
        return f"sent to {to}"

    @tool
    def lookup(name: str) -> str:
        """Look up an address.

        Args:
            name: Whose.
        """
        looked.append(name)
        return f"{name}@example.org"

    model = cp.Model(ScriptedModel(script, name="mailer"), retries=0)
    agent = Agent("mailer", model=model, tools=[send_email, lookup])
    graph = cp.Graph("mail")
    graph.add("mail", agent, task="Mail ana", retries=1,
              policy=cp.Policy(backoff=cp.Backoff(initial=0.0)))
    return graph


def test_a_retried_agent_does_not_send_again_what_its_failed_attempt_sent() -> None:
    send = ToolCall(id="c1", name="send_email", arguments={"to": "ana"})
    look = ToolCall(id="c2", name="lookup", arguments={"name": "ana"})
    sent: list[tuple[str, str]] = []
    looked: list[str] = []
    store = cp.MemoryStore()
    graph = _mailer([[send, look],
                     cp.NodeFailed("the model's server fell over", retryable=True),
                     [send, look], "done"], sent, looked)
    result = cp.run_sync(graph, store=store)
    assert result.ok, result.nodes["mail"].error
    assert result.nodes["mail"].attempts == 2
    assert [to for to, _ in sent] == ["ana"]  # the email went once...
    assert looked == ["ana", "ana"]  # ...a lookup is asked again
    sends = [(e.attempt, (e.data or {}).get("replayed", False)) for e in
             store.events(result.run_id) if e.kind is EventKind.TOOL_RESULT
             and (e.data or {}).get("tool") == "send_email"]
    assert sends == [(1, False), (2, True)]


def test_a_retried_agent_that_sends_something_else_sends_it() -> None:
    first = ToolCall(id="c1", name="send_email", arguments={"to": "ana"})
    other = ToolCall(id="c1", name="send_email", arguments={"to": "bea"})
    sent: list[tuple[str, str]] = []
    graph = _mailer([[first], cp.NodeFailed("the model's server fell over", retryable=True),
                     [other], "done"], sent, [])
    result = cp.run_sync(graph, store=cp.MemoryStore())
    assert result.ok, result.nodes["mail"].error
    assert [to for to, _ in sent] == ["ana", "bea"]


def test_a_call_the_tool_answered_with_an_error_is_made_again_by_the_retry() -> None:
    from counterpoint.agents import ToolError
    tried: list[str] = []

    @tool(side_effects=True)
    def charge(amount: int, idempotency_key: str) -> str:
        """Charge the card.

        Args:
            amount: Euros.
        """
        tried.append(idempotency_key)
        if len(tried) == 1:
            raise ToolError("the bank is busy")
        return "charged"

    call = ToolCall(id="c1", name="charge", arguments={"amount": 5})
    model = cp.Model(ScriptedModel([[call], cp.NodeFailed("down", retryable=True),
                                    [call], "done"], name="payer"), retries=0)
    graph = cp.Graph("pay")
    graph.add("pay", Agent("payer", model=model, tools=[charge]), task="Pay", retries=1,
              policy=cp.Policy(backoff=cp.Backoff(initial=0.0)))
    result = cp.run_sync(graph, store=cp.MemoryStore())
    assert result.ok, result.nodes["pay"].error
    assert len(tried) == 2 and tried[0] == tried[1]  # again, under the same key
