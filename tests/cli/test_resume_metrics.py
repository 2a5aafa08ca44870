"""A node attempt cut short by its process's end and run again by the resume is not a
retry: ``show`` said "retries 1" for a run whose only node policy retried nothing."""

from __future__ import annotations

import json
from pathlib import Path

from support import DIES_ONCE, run_cli

FLOW = DIES_ONCE + '''
async def flaky(x: int) -> int:
    if not (HERE / "failed").exists():
        (HERE / "failed").touch()
        raise ValueError("first attempt fails")
    return x


graph = cp.Graph("flow")
graph.add("flaky", flaky, x=graph.add("middle", dies, x=graph.add("first", first)), retries=1)
'''


def test_an_attempt_cut_short_by_a_crash_is_rerun_not_retried(tmp_path: Path) -> None:
    (tmp_path / "flow.py").write_text(FLOW)
    crashed = run_cli("run", "flow.py", "--db", "runs.db", cwd=tmp_path)
    assert crashed.returncode == 9, crashed.stderr
    resumed = run_cli("resume", "last", "--db", "runs.db", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    shown = run_cli("show", "last", "--db", "runs.db", "--json", cwd=tmp_path)
    metrics = json.loads(shown.stdout)["metrics"]
    assert (metrics["retries"], metrics["rerun"]) == (1, 1), metrics  # flaky's retry only
    assert metrics["nodes"]["middle"]["attempts"] == 2
    text = run_cli("show", "last", "--db", "runs.db", cwd=tmp_path).stdout
    assert "1 attempt cut short by its process's end ran again on resume" in text, text
