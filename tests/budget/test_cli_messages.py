"""The command line's budget and deadline mistakes: one ``error:`` line naming the option
as typed, saying what it got once, exit 2, nothing run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GRAPH = "import counterpoint as cp\ng = cp.Graph('g')\n\n\n@g.step\ndef a() -> int:\n" \
        "    return 1\n"


@pytest.mark.parametrize(("option", "message"), [
    (["--deadline", "30 seconds"],
     "error: --deadline: a deadline must be seconds (30, 30s, 2m, 1h), got '30 seconds'\n"),
    (["--deadline", "0"], "error: --deadline: a deadline must be > 0 seconds, got '0'\n"),
    (["--budget-usd", "0"], "error: --budget-usd must be more than 0 US dollars, got 0; "
                            "leave it out for no money budget\n"),
])
def test_a_bad_budget_or_deadline_option_is_one_line(tmp_path: Path, option: list[str],
                                                     message: str) -> None:
    (tmp_path / "g.py").write_text(GRAPH)
    environment = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "none"), "COLUMNS": "300"}
    proc = subprocess.run([sys.executable, "-m", "counterpoint.cli", "run", "g.py", *option,
                           "--db", "r.db", "--no-preflight"], cwd=tmp_path,
                          capture_output=True, text=True, env=environment, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == message
    assert not (tmp_path / "r.db").exists()
