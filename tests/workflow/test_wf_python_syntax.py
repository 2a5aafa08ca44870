"""A ``python:`` (or ``tool:``) reference to a Python file or module with a syntax error
is one problem at ``FILE:LINE`` of that file, showing the offending line once and which
line of the workflow names it; ``counterpoint run`` exits 2 and stores nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from counterpoint.cli.app import app
from counterpoint.workflow import WorkflowError, load_workflow

BROKEN = "def f(x):\n    return x +* 2\n"
UNTERMINATED = 'def f(x):\n    s = "unterminated\n    return s\n'


def test_a_file_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tools.py").write_text(BROKEN)
    (tmp_path / "wf.yaml").write_text(
        "name: wf\nsteps:\n  a:\n    python: tools.py:f\n    args: {x: 1}\n")
    result = CliRunner().invoke(app, ["run", "wf.yaml", "--db", str(tmp_path / "runs.db")])
    assert result.exit_code == 2
    assert result.output == ("error: tools.py:2: SyntaxError: invalid syntax: "
                             "`return x +* 2`; fix that line (wf.yaml:4 names "
                             "'tools.py:f')\n")
    assert not (tmp_path / "runs.db").exists()


def test_a_module_reference_among_other_problems(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "broken_mod", raising=False)
    (tmp_path / "broken_mod.py").write_text(UNTERMINATED)
    (tmp_path / "wf.yaml").write_text(
        "name: wf\nsteps:\n  a:\n    python: broken_mod:f\n    args: {x: 1}\n"
        "  b:\n    python: json:nope\n")
    with pytest.raises(WorkflowError) as caught:
        load_workflow("wf.yaml")
    first, second = caught.value.problems
    assert str(first) == ("broken_mod.py:2: SyntaxError: unterminated string literal "
                          "(detected at line 2): `s = \"unterminated`; fix that line "
                          "(wf.yaml:4 names 'broken_mod:f')")
    assert str(second).startswith("wf.yaml:7: 'json:nope': json has no attribute 'nope'")
    assert str(caught.value).count("s = \"unterminated") == 1
