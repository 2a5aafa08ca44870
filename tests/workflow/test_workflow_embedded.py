"""The README's main job, exactly as a user runs it: ``counterpoint run
examples/workflows/digest.yaml`` on the embedded model (structure, not wording)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DIGEST = ROOT / "examples" / "workflows" / "digest.yaml"


def test_digest_example_runs_on_the_embedded_model(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "counterpoint.cli", "run", str(DIGEST), "--json",
         "--db", str(tmp_path / "runs.db")],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["status"] == "succeeded"
    documents = sorted(p.name for p in (DIGEST.parent / "docs").glob("*.txt"))
    extractions = result["outputs"]["extract"]
    assert len(extractions) == len(documents) == 4
    for note in extractions:
        assert note["title"].strip()
        assert 2 <= len(note["points"]) <= 3
    digest = result["outputs"]["digest"]
    assert digest["digest"].strip()
    assert [s["file"] for s in digest["sources"]] == documents
    assert result["models"]["calls"] >= 5 and result["models"]["output_tokens"] > 0
    assert result["metrics"]["peak_parallel_width"] >= 2  # extractions overlapped
