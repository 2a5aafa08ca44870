"""A blank ``--db`` is a usage error in every command that takes one (cli/args.py ``Db``,
which they all share now), before anything is opened or created.

Regression: ``--db " "`` made a store file named by a space in the working directory,
and ``--db ""`` (``--db "$DB"`` with ``DB`` unset) used the default store silently."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from counterpoint.cli.app import app

COMMANDS = [["runs"], ["run", "flow.py", "--no-preflight"], ["show", "last"],
            ["resume", "last"], ["cancel", "last"], ["delete", "last"], ["prune", "--keep", "1"],
            ["fork", "last"], ["trace", "last", "-o", "t.svg"], ["approvals"],
            ["approve", "ap-1"], ["reject", "ap-1", "--reason", "no"], ["mcp"], ["ui"]]


@pytest.mark.parametrize("blank", ["", " "])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_blank_db_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               command: list[str], blank: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.py").write_text("import counterpoint as cp\ng = cp.Graph('g')\n"
                                      "g.add('a', lambda: 1)\n")
    done = CliRunner().invoke(app, [*command, "--db", blank])
    assert done.exit_code == 2, done.output
    assert f"Invalid value for '--db': {blank!r} is blank; give a store's path (e.g. " \
           "./runs.db) or a postgresql:// URL, or leave --db out" in " ".join(
               done.output.split())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flow.py"]
