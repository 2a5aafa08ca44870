"""A loop step runs each iteration as a node of its own (``ID.1``, ``ID.2``, ...), added by
the iteration before it; node ``ID`` collects them into ``{"output", "iterations",
"stopped"}``."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import counterpoint as cp
from counterpoint.state import NodeStatus
from counterpoint.workflow import Workflow, load_workflow

HELPERS = '''
def converge(previous: int | None) -> int:
    return min((previous or 0) + 3, 7)


def bump(previous: int | None) -> int:
    return (previous or 0) + 1


def flaky_once(index: int, marker: str) -> int:
    from pathlib import Path
    seen = Path(marker)
    if index == 2 and not seen.exists():
        seen.write_text("failed once")
        raise ConnectionError("transient")
    return index
'''


def write(folder: Path, text: str) -> Path:
    (folder / "helpers.py").write_text(HELPERS)
    path = folder / "wf.yaml"
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def run(wf: Workflow, **inputs: Any) -> cp.RunResult:
    return cp.run_sync(wf.graph, inputs=wf.bind_inputs(inputs), store="memory")


def test_each_iteration_is_a_node_and_the_step_node_collects_them(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, """
        name: nodes
        steps:
          count:
            python: helpers.py:bump
            args: {previous: "${loop.previous}"}
            loop: {max: 4, until: "${output} == 3"}
        """))
    assert [n for n in wf.graph.nodes] == ["count.1", "count"]
    result = run(wf)
    assert result.ok, result.nodes
    assert [result.nodes[f"count.{i}"].output for i in (1, 2, 3)] == [1, 2, 3]
    assert "count.4" not in result.nodes
    assert result["count"] == {"output": 3, "iterations": [1, 2, 3], "stopped": "until"}


def test_until_reads_the_previous_iteration_and_workflow_inputs(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, """
        name: converging
        inputs:
          most: {type: integer, default: 10}
        steps:
          settle:
            python: helpers.py:converge
            args: {previous: "${loop.previous}"}
            loop:
              max: 10
              until: ${output} == ${loop.previous} or ${loop.index} >= ${inputs.most}
        """))
    assert run(wf)["settle"] == {"output": 7, "iterations": [3, 6, 7, 7], "stopped": "until"}
    assert run(wf, most=2)["settle"]["iterations"] == [3, 6]


def test_retries_apply_to_each_iteration(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, f"""
        name: retried
        steps:
          steps3:
            python: helpers.py:flaky_once
            args: {{index: "${{loop.index}}", marker: "{tmp_path / 'marker'}"}}
            loop: {{max: 3}}
            retries: 1
        """))
    result = run(wf)
    assert result["steps3"] == {"output": 3, "iterations": [1, 2, 3], "stopped": "max"}
    assert [result.nodes[f"steps3.{i}"].attempts for i in (1, 2, 3)] == [1, 2, 1]


def test_a_loop_skipped_by_when_is_skipped_whole(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, """
        name: skipped-loop
        steps:
          count:
            when: "false"
            python: helpers.py:bump
            args: {previous: "${loop.previous}"}
            loop: {max: 3}
          after:
            python: helpers.py:bump
            args: {previous: "${steps.count.output}"}
        """))
    result = run(wf)
    assert result.ok
    for node in ("count.1", "count", "after"):
        assert result.nodes[node].status is NodeStatus.SKIPPED, node


def test_a_loop_inside_a_sub_workflow_adds_its_iterations_to_the_sub_run(
        tmp_path: Path) -> None:
    (tmp_path / "inner.yaml").write_text(textwrap.dedent("""
        name: inner
        inputs:
          start: integer
        steps:
          grow:
            python: helpers.py:bump
            args: {previous: "${loop.previous}"}
            loop: {max: 5, until: "${output} >= ${inputs.start}"}
        output: grow
        """).lstrip())
    wf = load_workflow(write(tmp_path, """
        name: outer
        steps:
          sub:
            workflow: inner.yaml
            inputs: {start: 2}
        output: sub
        """))
    result = run(wf)
    assert result.ok, result.nodes
    assert result.output == 2  # output: grow reads the loop's last iteration
