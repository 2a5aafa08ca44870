"""Mistakes in a workflow's ``budget:``, ``deadline:``, ``samples:`` and ``route:``: a
misspelt key names the keys that section accepts (not the workflow's top-level keys), a
quoted number is a type error, and a validator's message says what it got once; each
with its file:line, and exit 2 from ``counterpoint run``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.workflow import WorkflowError, load_workflow

FLOW = """\
name: budgeted
budget: {usd: 0.5, tokens: 20000}
deadline: 30s
route: {policy: quality_first}
agents:
  writer:
    model: scripted
    budget: {tokens: 900}
    samples: 2
steps:
  first:
    python: helpers.py:one
    budget: {usd: 0.1}
    samples: 1
"""


def _problems(tmp_path: Path, line: int, bad: str) -> str:
    lines = FLOW.splitlines()
    lines[line - 1] = bad
    (tmp_path / "helpers.py").write_text("def one() -> int:\n    return 1\n")
    path = tmp_path / "flow.yaml"
    path.write_text(textwrap.dedent("\n".join(lines) + "\n"))
    with pytest.raises(WorkflowError) as info:
        load_workflow(path, models={"scripted": cp.ScriptedModel([])})
    return str(info.value)


@pytest.mark.parametrize(("line", "bad", "message"), [
    (2, "budget: {usdd: 0.5}", "flow.yaml:2: workflow: budget: unknown key 'usdd'; did you "
                               "mean 'usd'? (allowed keys: usd, tokens)"),
    (2, "budget: {dollars: 1}", "flow.yaml:2: workflow: budget: unknown key 'dollars'; "
                                "allowed keys: usd, tokens"),
    (8, "    budget: {tokns: 9}", "flow.yaml:8: agent 'writer': budget: unknown key "
                                  "'tokns'; did you mean 'tokens'? (allowed keys: usd, tokens)"),
    (13, "    budget: {usd: 0.1, tokenz: 5}", "flow.yaml:13: step 'first': budget: unknown "
                                              "key 'tokenz'; did you mean 'tokens'?"),
    (4, "route: {polcy: quality_first}", "flow.yaml:4: workflow: route: unknown key 'polcy'; "
                                         "did you mean 'policy'? (allowed keys: policy, tags, "
                                         "models)"),
])
def test_a_misspelt_key_names_the_keys_of_its_section(tmp_path: Path, line: int, bad: str,
                                                      message: str) -> None:
    text = _problems(tmp_path, line, bad)
    assert message in text, text
    assert "steps" not in text.split(message)[1][:40], text  # not the top-level keys


@pytest.mark.parametrize(("line", "bad", "message"), [
    (2, 'budget: {usd: "0.5"}', "flow.yaml:2: workflow: budget.usd: input should be a valid "
                                "number (got '0.5'); write budget: {usd: 0.5, tokens: 20000}"),
    (2, 'budget: {tokens: "20000"}', "flow.yaml:2: workflow: budget.tokens: input should be "
                                     "a valid integer (got '20000')"),
    (2, "budget: {tokens: 2.5}", "workflow: budget.tokens: input should be a valid integer"),
    (13, "    budget: {usd: true}", "flow.yaml:13: step 'first': budget.usd: input should "
                                    "be a valid number (got True)"),
    (9, '    samples: "2"', "flow.yaml:9: agent 'writer': samples: input should be a valid "
                            "integer (got '2')"),
    (14, "    samples: 2.0", "flow.yaml:14: step 'first': samples: input should be a valid "
                             "integer (got 2.0)"),
    (4, "route: {tags: x}", "flow.yaml:4: workflow: route.tags: input should be a valid "
                            "list (got 'x')"),
])
def test_a_value_of_the_wrong_type_is_refused_with_its_line(tmp_path: Path, line: int,
                                                            bad: str, message: str) -> None:
    text = _problems(tmp_path, line, bad)
    assert message in text, text


def test_a_bad_deadline_says_what_it_got_once(tmp_path: Path) -> None:
    text = _problems(tmp_path, 3, "deadline: 30 seconds")
    assert ("flow.yaml:3: workflow: deadline: a deadline must be seconds (30, 30s, 2m, 1h), "
            "got '30 seconds'") in text, text
    assert text.count("30 seconds") == 1, text


def test_run_exits_2_with_the_problem_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("def one() -> int:\n    return 1\n")
    (tmp_path / "flow.yaml").write_text(FLOW.replace("budget: {usd: 0.5, tokens: 20000}",
                                                     'budget: {usd: "0.5"}'))
    environment = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "none")}
    proc = subprocess.run([sys.executable, "-m", "counterpoint.cli", "run", "flow.yaml",
                           "--db", "r.db", "--no-preflight"], cwd=tmp_path,
                          capture_output=True, text=True, env=environment, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "flow.yaml:2: workflow: budget.usd: input should be a valid number (got '0.5')" \
        in proc.stderr and "Traceback" not in proc.stderr
