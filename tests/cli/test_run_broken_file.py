"""``counterpoint run FILE.py`` (or ``package.module``) whose code fails while it is
imported: one ``error: FILE:LINE: ...`` line on stderr, the offending line shown for a
syntax error, exit 2, no traceback, no run recorded (counterpoint.loader).

Regression: a syntax error read ``bad.py: importing it raised SyntaxError: invalid
syntax (bad.py, line 4)``, and a module target that failed printed rich's traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import run_cli


@pytest.mark.parametrize(("target", "message"), [
    ("bad.py", "error: bad.py:4: SyntaxError: invalid syntax: `def a(:`; fix that line"),
    ("qa_flows.bad", "error: qa_flows/bad.py:4: SyntaxError: invalid syntax: `def a(:`; "
                     "fix that line"),
    ("qa_flows.raises", "error: qa_flows/raises.py:2: importing it raised "
                        "ZeroDivisionError: division by zero"),
])
def test_a_file_that_fails_to_import_is_one_line_naming_where(
        tmp_path: Path, target: str, message: str) -> None:
    broken = "import counterpoint as cp\n\ng = cp.Graph('x')\ndef a(:\n    return 1\n"
    (tmp_path / "bad.py").write_text(broken)
    package = tmp_path / "qa_flows"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "bad.py").write_text(broken)
    (package / "raises.py").write_text("import counterpoint as cp\nvalue = 1 / 0\n")
    done = run_cli("run", target, "--db", "runs.db", "--no-preflight", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == message + "\n"
    assert done.stdout == "" and not (tmp_path / "runs.db").exists()
