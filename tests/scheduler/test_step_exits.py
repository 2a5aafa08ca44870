"""Steps that end in unusual ways fail their node, and the rest of the run goes on."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import counterpoint as cp


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text")


async def _broken_text() -> int:
    raise _Unprintable()


async def _exits() -> int:
    sys.exit(3)


def _exits_in_a_thread() -> int:
    sys.exit("usage: tool [options]")


async def _fine() -> str:
    return "fine"


def _run(step: Any, **options: Any) -> cp.RunResult:
    graph = cp.Graph("ends")
    graph.add("odd", step, **options)
    graph.add("other", _fine)
    return cp.run_sync(graph, store=cp.MemoryStore())


def test_an_exception_whose_str_raises_is_recorded_not_fatal() -> None:
    result = _run(_broken_text)
    error = result.nodes["odd"].error or {}
    assert error["type"] == "_Unprintable"
    assert error["message"] == "<_Unprintable: its __str__ raised ValueError: no text>"
    assert result["other"] == "fine"
    assert result.status is cp.RunStatus.FAILED


@pytest.mark.parametrize(("step", "code"), [(_exits, "3"),
                                             (_exits_in_a_thread, "'usage: tool [options]'")])
def test_sys_exit_in_a_step_fails_its_node_once(step: Any, code: str) -> None:
    result = _run(step, retries=2)
    odd = result.nodes["odd"]
    assert odd.status is cp.NodeStatus.FAILED
    assert odd.attempts == 1  # not retried: it would exit again
    message = (odd.error or {})["message"]
    assert f"node 'odd': the step raised SystemExit({code}): sys.exit() was called" in message
    assert result["other"] == "fine"


def test_applying_what_edit_add_returned_says_what_apply_takes() -> None:
    async def planner(ctx: cp.NodeContext) -> int:
        ctx.apply(cp.Edit().add("more", _fine))  # type: ignore[arg-type]
        return 0

    graph = cp.Graph("edits")
    graph.add("plan", planner)
    result = cp.run_sync(graph, store=cp.MemoryStore())
    error = result.nodes["plan"].error or {}
    assert error["type"] == "PatchError"
    assert "node 'plan': apply takes a cp.Edit, not NodeRef; Edit.add returns a reference" \
        in error["message"]
