"""A programming error is not retried by default; a flaky failure is.

A node with retries whose model call hits a bug (``TypeError`` in an adapter,
``AttributeError``, ``NameError``) fails at its first attempt; a ``ValueError`` or
a provider's retryable error is retried as before. ``retry_on=(Exception,)`` asks
for everything to be retried.
"""

from __future__ import annotations

import pytest

import counterpoint as cp
from counterpoint.models import Model, ScriptedModel
from counterpoint.policy import DEFAULT_POLICY, Backoff, Policy
from counterpoint.store import MemoryStore

FAST = Backoff(initial=0.001, factor=1.0, maximum=0.001, jitter=0.0)


@pytest.mark.parametrize("error", [TypeError, AttributeError, NameError, UnboundLocalError,
                                   AssertionError, NotImplementedError, ImportError])
def test_programming_errors_are_not_retried_by_default(error: type[Exception]) -> None:
    assert not isinstance(error("bug"), DEFAULT_POLICY.retry_on)
    assert isinstance(error("bug"), Policy(retry_on=(Exception,)).retry_on)


@pytest.mark.parametrize("error", [ValueError, KeyError, OSError, TimeoutError,
                                   cp.ModelUnavailable, cp.NodeFailed])
def test_other_failures_are_retried_by_default(error: type[Exception]) -> None:
    assert isinstance(error("flaky"), DEFAULT_POLICY.retry_on)


def test_system_exits_are_never_retried() -> None:
    assert not isinstance(KeyboardInterrupt(), DEFAULT_POLICY.retry_on)


async def test_a_node_whose_adapter_has_a_bug_fails_at_once() -> None:
    buggy = ScriptedModel([TypeError("'NoneType' object is not subscriptable"), "never"])
    flaky = ScriptedModel([ValueError("a bad answer this time"), "second time lucky"])
    graph = cp.Graph("bugs")

    async def ask(which: str) -> str:
        model = Model(buggy if which == "buggy" else flaky, cache=False)
        return (await model.generate("hi")).text

    policy = Policy(retries=3, backoff=FAST)
    graph.add("buggy", ask, which="buggy", policy=policy)
    graph.add("flaky", ask, which="flaky", policy=policy)
    result = await cp.run(graph, store=MemoryStore())
    assert result.nodes["buggy"].status is cp.NodeStatus.FAILED
    assert result.nodes["buggy"].attempts == 1 and buggy.remaining == 1
    assert result.outputs["flaky"] == "second time lucky"
