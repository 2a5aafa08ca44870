"""The README's health example runs as shown and prints what the README says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_health_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    section = (ROOT / "README.md").read_text().split("### Health and self-healing", 1)[1]
    section = section.split("\n### ", 1)[0]
    example = re.findall(r"```py\n(.*?)```", section, flags=re.S)[0]
    shown = re.findall(r"```text\n(.*?)```", section, flags=re.S)[0]
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == shown
