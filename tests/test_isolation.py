"""Steps isolated in a child process (counterpoint.isolation): really stopped on cancel."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))  # the child imports the steps

import isolated_steps

import counterpoint as cp
from counterpoint.store.owners import process_alive

ISOLATED = cp.Policy(isolation="process")


def test_an_isolated_step_runs_in_another_process_and_returns_its_output() -> None:
    g = cp.Graph("isolated")
    g.add("sq", isolated_steps.square, x=9, policy=ISOLATED)
    g.add("pid", isolated_steps.pid, policy=ISOLATED)
    g.add("asq", isolated_steps.async_square, x=4, policy=ISOLATED)
    result = cp.run_sync(g, store="memory")
    assert result.ok, result.nodes
    assert result["sq"] == 81 and result["asq"] == 16
    assert result["pid"] != os.getpid()


def test_a_timeout_kills_the_isolated_step(tmp_path: Path) -> None:
    """A thread cannot be stopped; a process can: after the timeout nothing of the attempt
    runs on (its process is gone when the run returns)."""
    beats = tmp_path / "beats.txt"
    g = cp.Graph("isolated-timeout")
    g.add("beat", isolated_steps.beat_forever, path=str(beats),
          policy=cp.Policy(isolation="process", timeout=1.0))
    result = cp.run_sync(g, store="memory")
    node = result.nodes["beat"]
    assert node.status is cp.NodeStatus.FAILED
    assert node.error is not None and node.error["type"] == "NodeTimeout"
    pids = {int(line) for line in beats.read_text().split()}
    assert len(pids) == 1 and pids != {os.getpid()}
    assert not process_alive(pids.pop())


def test_an_isolated_steps_exception_reaches_the_node() -> None:
    g = cp.Graph("isolated-fail")
    g.add("f", isolated_steps.fail, message="broken on purpose", policy=ISOLATED)
    result = cp.run_sync(g, store="memory")
    error = result.nodes["f"].error
    assert error is not None and error["type"] == "ValueError"
    assert "broken on purpose" in error["message"]


def test_a_step_that_cannot_be_pickled_is_a_clear_error() -> None:
    def local(x: int) -> int:  # a closure: not importable by the child
        return x

    g = cp.Graph("isolated-closure")
    g.add("c", local, x=1, policy=ISOLATED)
    result = cp.run_sync(g, store="memory")
    error = result.nodes["c"].error
    assert error is not None
    assert "node 'c'" in error["message"] and "pickle" in error["message"]
    assert error["retryable"] is False


def test_an_output_that_cannot_come_back_names_the_node_and_is_not_retried() -> None:
    # it said "the step's output cannot be sent back from its process: ..." naming no run
    # or node, and said nothing of what to do
    g = cp.Graph("isolated-lock")
    g.add("out", isolated_steps.returns_a_lock,
          policy=cp.Policy(isolation="process", retries=2, retry_on=(Exception,)))
    g.add("exc", isolated_steps.raises_locked,
          policy=cp.Policy(isolation="process", retries=2, retry_on=(Exception,)))
    result = cp.run_sync(g, store="memory")
    out, exc = result.nodes["out"], result.nodes["exc"]
    assert (out.attempts, exc.attempts) == (1, 1)
    assert out.error is not None and exc.error is not None
    assert out.error["type"] == "OutputNotSerializable"
    assert out.error["message"].startswith(
        f"run {result.run_id}, node 'out': the step's output (lock) cannot be sent back "
        "from its process (TypeError: cannot pickle '_thread.lock' object); return JSON-compatible")
    assert exc.error["type"] == "NodeFailed"
    assert exc.error["message"].startswith(
        f"run {result.run_id}, node 'exc': the step raised LockedError('locked out'), "
        "which cannot be sent back from its process (TypeError: cannot pickle "
        "'_thread.lock' object)")
    assert (out.error["retryable"], exc.error["retryable"]) == (False, False)


def test_isolation_must_be_thread_or_process() -> None:
    with pytest.raises(cp.UserError, match="isolation must be 'thread' or 'process'"):
        cp.Policy(isolation="fiber")
