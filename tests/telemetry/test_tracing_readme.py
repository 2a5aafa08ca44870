"""The README's "Tracing and logs" examples run as shown, against the test receiver."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from counterpoint.testing.otlp import OTLPReceiver

ROOT = Path(__file__).resolve().parents[2]
SECTION = (ROOT / "README.md").read_text().split("## Tracing and logs\n", 1)[1] \
    .split("\n## ", 1)[0]
DEFAULT = "http://127.0.0.1:4318"


def _block(language: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", SECTION, flags=re.S)
    assert len(blocks) == 1, f"one {language} block expected in the section"
    return str(blocks[0])


def _env(receiver: OTLPReceiver, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"),
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "COUNTERPOINT_DB": str(tmp_path / "runs.db")}


def test_the_python_example(receiver: OTLPReceiver, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _block("py")], cwd=tmp_path,
                          env=_env(receiver, tmp_path), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "succeeded\n"
    assert re.search(r"^counterpoint\.run INFO run \S+ of graph traced started",
                     done.stderr, flags=re.M), done.stderr
    assert re.search(r"^counterpoint\.run INFO run \S+ succeeded$", done.stderr, flags=re.M)
    spans = receiver.wait_for(lambda spans: len(spans) == 2)
    assert sorted(s.name for s in spans) == ["node paris", "run traced"]


def test_the_command_line_example(receiver: OTLPReceiver, tmp_path: Path) -> None:
    line = _block("bash").strip()
    assert DEFAULT in line
    words = shlex.split(line.replace(DEFAULT, receiver.endpoint))
    settings = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
    command = [w for w in words if w.split("=", 1)[0] not in settings]
    assert command[0] == "counterpoint" and settings["COUNTERPOINT_OTEL"] == "1"
    done = subprocess.run([sys.executable, "-m", "counterpoint.cli", *command[1:]], cwd=ROOT,
                          env={**_env(receiver, tmp_path), **settings}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    spans = receiver.spans  # the process exported them before it exited
    run = next(s for s in spans if s.name == "run trip")
    assert run.attributes["counterpoint.status"] == "succeeded"
    assert any(s.parent_span_id == run.span_id and s.name.startswith("node ") for s in spans)
