"""The README's approvals section: its example runs as shown, its commands exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECTION = (ROOT / "README.md").read_text().split("### Approvals", 1)[1].split("\n## ", 1)[0]


def test_the_approvals_example_runs_as_shown(tmp_path: Path) -> None:
    [example] = re.findall(r"```py\n(.*?)```", SECTION, flags=re.S)
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["deploy v1.2 to prod? pending", "deployed v1.2"]


def test_the_approval_commands_in_the_readme_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    for command in ("approvals", "approve", "reject"):
        assert f"counterpoint {command} " in readme
        done = subprocess.run([sys.executable, "-m", "counterpoint.cli", command, "--help"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    run_help = subprocess.run([sys.executable, "-m", "counterpoint.cli", "run", "--help"],
                              capture_output=True, text=True, timeout=60)
    assert "--detach-waiting" in run_help.stdout
