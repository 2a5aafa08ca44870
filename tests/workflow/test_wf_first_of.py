"""``first_of`` joins the branches of ``when`` conditions: its output is the output of the
first listed step that ran, and it is skipped (with what reads it) when none did."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.state import NodeStatus
from counterpoint.workflow import Workflow, WorkflowError, load_workflow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "workflows" / "grade.yaml"

HELPERS = '''
def label(text: str) -> str:
    return text


def nothing() -> None:
    return None


def count_up(previous: int | None) -> int:
    return (previous or 0) + 1


def report(value) -> str:
    return f"got {value}"
'''

BRANCHES = """
name: branches
inputs:
  n: integer
steps:
  small:
    when: ${inputs.n} < 10
    python: helpers.py:label
    args: {text: small}
  large:
    when: ${inputs.n} >= 10 and ${inputs.n} < 100
    python: helpers.py:label
    args: {text: large}
  size:
    first_of: [small, large]
  report:
    python: helpers.py:report
    args: {value: "${steps.size.output}"}
output: report
"""


def write(folder: Path, text: str) -> Path:
    (folder / "helpers.py").write_text(HELPERS)
    path = folder / "wf.yaml"
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def run(wf: Workflow, **inputs: Any) -> cp.RunResult:
    return cp.run_sync(wf.graph, inputs=wf.bind_inputs(inputs), store="memory")


def test_first_of_takes_whichever_branch_ran(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, BRANCHES))
    small = run(wf, n=3)
    assert small.ok, small.nodes
    assert small["size"] == "small" and small.output == "got small"
    assert small.nodes["large"].status is NodeStatus.SKIPPED
    large = run(wf, n=42)
    assert large["size"] == "large" and large.output == "got large"
    assert large.nodes["small"].status is NodeStatus.SKIPPED


def test_first_of_is_skipped_with_its_readers_when_no_branch_ran(tmp_path: Path) -> None:
    result = run(load_workflow(write(tmp_path, BRANCHES)), n=500)
    assert result.ok, result.nodes
    for node in ("small", "large", "size", "report"):
        assert result.nodes[node].status is NodeStatus.SKIPPED, node


def test_a_branch_that_ran_and_gave_null_is_taken(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, """
        name: null-branch
        steps:
          empty:
            when: "true"
            python: helpers.py:nothing
          other:
            python: helpers.py:label
            args: {text: other}
          either:
            first_of: [empty, other]
        """))
    result = run(wf)
    assert result.nodes["either"].status is NodeStatus.SUCCEEDED
    assert result["either"] is None  # ``empty`` ran (and came first); null is its output


def test_first_of_a_loop_step_reads_its_last_iteration(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, """
        name: loop-branch
        inputs:
          go: {type: boolean, default: true}
        steps:
          counted:
            when: ${inputs.go}
            python: helpers.py:count_up
            args: {previous: "${loop.previous}"}
            loop: {max: 3}
          fallback:
            when: not ${inputs.go}
            python: helpers.py:label
            args: {text: none}
          result:
            first_of: [counted, fallback]
        output: result
        """))
    assert run(wf).output == 3
    assert run(wf, go=False).output == "none"


def test_first_of_mistakes_are_reported_with_lines(tmp_path: Path) -> None:
    path = write(tmp_path, """
        name: bad-joins
        steps:
          a:
            python: helpers.py:label
            args: {text: a}
          one:
            first_of: [a]
          typo:
            first_of: [a, bb]
          template:
            first_of: [a, "${steps.a.output}"]
          itself:
            first_of: [a, itself]
          busy:
            first_of: [a, one]
            args: {text: x}
            loop: {max: 2}
            retries: 1
          reader:
            python: helpers.py:label
            args: {text: "${steps.typo.iterations}"}
        """)
    with pytest.raises(WorkflowError) as caught:
        load_workflow(path)
    text = str(caught.value)
    assert f"{path}:7: step 'one': first_of needs at least two steps, got 1" in text
    assert f"{path}:9: step 'typo': first_of names unknown step 'bb'" in text
    assert f"{path}:11: step 'template': first_of names unknown step '${{steps.a.output}}'; " \
        "write step ids, not templates" in text
    assert f"{path}:13: step 'itself': first_of names the step itself" in text
    assert f"{path}:16: step 'busy': args: applies to tool: and python: steps, not " \
        "first_of:" in text
    assert f"{path}:17: step 'busy': a first_of step cannot loop" in text
    assert f"{path}:18: step 'busy': retries: applies to agent:, tool:, python: and " \
        "workflow: steps, not first_of:" in text
    assert "step 'typo' has no loop, so no iterations" in text


def test_the_readme_example_is_the_example_file_and_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Workflow files"):readme.index("## The command line")]
    shown = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert shown is not None, "the YAML section shows the first_of example"
    assert shown.group(1) == EXAMPLE.read_text()
    wf = load_workflow(EXAMPLE)
    assert run(wf, score=72).output == "72: passed, well done"
    assert run(wf, score=31).output == "31: not yet, revise chapter 3"
