"""What a new user types before anything ran, or types nothing at all: ``approvals``
without a store says there is none, as ``runs`` does (exit 0; ``--json``: ``[]``), and
an empty RUN_ID is named as such (cli/approvals.py, cli/recorded.py ``resolve_run``).

Regressions: ``approvals`` in a folder where nothing ran yet was ``error: store ...
does not exist`` (exit 2) where ``runs`` said ``no runs``; ``show ""`` read ``run  not
found in store``."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import run_cli


def test_approvals_before_anything_ran(tmp_path: Path) -> None:
    done = run_cli("approvals", "--db", "runs.db", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (
        0, "no pending approvals: there is no store at runs.db\n", "")
    done = run_cli("approvals", "--db", "runs.db", "--json", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "[]\n")
    ran = run_cli("runs", "--db", "runs.db", cwd=tmp_path)
    assert ran.stdout == "no runs: there is no store at runs.db\n"
    assert not (tmp_path / "runs.db").exists()


@pytest.mark.parametrize("command", ["show", "resume", "cancel", "trace"])
def test_an_empty_run_id_is_named_as_such(tmp_path: Path, command: str) -> None:
    (tmp_path / "flow.py").write_text("import counterpoint as cp\ng = cp.Graph('g')\n"
                                      "g.add('a', lambda: 1)\n")
    assert run_cli("run", "flow.py", "--db", "runs.db", "-q", "--no-preflight",
                   cwd=tmp_path).returncode == 0
    extra = ["--out", "x.svg"] if command == "trace" else []
    done = run_cli(command, " ", "--db", "runs.db", *extra, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == ("error: no run named: RUN_ID is empty; give a run's id, a unique "
                           "start of it, or `last` (list runs with `counterpoint runs`)\n")
