"""The README's blackboard example runs as shown and prints what its comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
HEADING = "### Shared state, work queues and permissions"


def test_the_readme_blackboard_example_prints_what_it_says(tmp_path: Path) -> None:
    section = README.split(HEADING, 1)[1].split("\n## ", 1)[0]
    example = re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]
    promised = [line.removeprefix("# ") for line in example.strip().splitlines()[-3:]]
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == promised
