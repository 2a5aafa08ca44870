"""The README's budgets example runs as shown and prints what the README says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_budgets_example_runs_as_shown(tmp_path: Path) -> None:
    section = (ROOT / "README.md").read_text().split("### Budgets and deadlines", 1)[1]
    example = re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "failed 3 3",
        "$0.3000 of $0.35 spent, $0.0000 reserved, $0.0500 left; 300 tokens spent, "
        "0 reserved; 5 call(s) refused"]
    shown = section.split("```", 2)[2]
    assert "`failed 3 3`" in shown and "$0.0500 left; 300 tokens spent" in " ".join(
        shown.split())
