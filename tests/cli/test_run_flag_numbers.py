"""``run``'s numeric flags that reach ``RunOptions`` or ``Budget``: a bad value is one
error naming the flag as typed (never the Python class), exit 2, nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from counterpoint.cli.app import app

FLOW = """
import counterpoint as cp

def a() -> int:
    return 1

graph = cp.Graph("flow")
graph.add("a", a, resources={"gpu": 1})
"""


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *flags: str) -> tuple[int, str]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.py").write_text(FLOW)
    result = CliRunner().invoke(app, ["run", "flow.py", "--db", str(tmp_path / "runs.db"),
                                      "-q", "--no-preflight", *flags])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.exception
    assert not (tmp_path / "runs.db").exists()
    return result.exit_code, result.output


@pytest.mark.parametrize("value", ["gpu=0", "gpu=-2"])
def test_a_limit_below_one_names_the_flag_not_the_python_class(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    code, output = _run(tmp_path, monkeypatch, "--limit", value)
    assert code == 2
    assert "'--limit'" in output and f"'{value}': N must be a whole number >= 1" in output
    assert "RunOptions" not in output


def test_an_infinite_money_budget_is_refused(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # a goal flag: refused for a graph first, so run a goal (nothing is asked: it fails
    # before any model is built)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "write a haiku", "--budget-usd", "inf",
                                      "--db", str(tmp_path / "runs.db"), "--no-preflight"])
    assert result.exit_code == 2
    assert result.output == ("error: --budget-usd must be a finite number of US dollars, "
                             "got inf; leave it out for no money budget\n")
    assert not (tmp_path / "runs.db").exists()
