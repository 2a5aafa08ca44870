"""The README's Routing section runs as shown: its config and workflow file are valid
together, and its example (simulated models) prints what the text says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from counterpoint.workflow import load_workflow

ROOT = Path(__file__).resolve().parents[2]
SECTION = (ROOT / "README.md").read_text().split("### Routing\n", 1)[1].split("\n### ", 1)[0]


def _block(language: str) -> str:
    [block] = re.findall(rf"```{language}\n(.*?)```", SECTION, flags=re.S)
    return block


def test_the_config_and_workflow_shown_load(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "counterpoint.toml").write_text(_block("toml"))
    monkeypatch.setenv("COUNTERPOINT_CONFIG", str(tmp_path / "counterpoint.toml"))
    (tmp_path / "solve.yaml").write_text(_block("yaml"))
    flow = load_workflow(tmp_path / "solve.yaml")
    assert sorted(flow.graph.nodes) == ["easy", "hard"]


def test_the_example_prints_what_the_text_says(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _block("py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "succeeded True" and len(lines) == 5
    assert "t0003 math,hard sim-tiny -> sim-small -> sim-medium" in lines
    assert "`succeeded True`" in SECTION and "t0003 math,hard sim-tiny -> sim-small -> " \
        "sim-medium" in SECTION
