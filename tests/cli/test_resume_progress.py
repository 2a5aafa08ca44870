"""The progress lines of a resumed run count the run's nodes, not only this execution's."""

from __future__ import annotations

from pathlib import Path

from support import DIES_ONCE, run_cli

FLOW = DIES_ONCE + '''
async def last(x: int) -> int:
    return x + 1


graph = cp.Graph("flow")
graph.add("last", last, x=graph.add("middle", dies, x=graph.add("first", first)))
'''


def test_a_resumed_run_counts_the_nodes_that_ended_before_it(tmp_path: Path) -> None:
    """It printed "[1/3] middle succeeded": the count started again at the resume."""
    (tmp_path / "flow.py").write_text(FLOW)
    crashed = run_cli("run", "flow.py", "--db", "runs.db", cwd=tmp_path)
    assert crashed.returncode == 9, crashed.stderr
    assert "[1/3] first succeeded" in crashed.stdout, crashed.stdout
    run_id = crashed.stdout.split()[1].rstrip(":")
    resumed = run_cli("resume", run_id, "--db", "runs.db", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    progress = [line.split(" in ")[0] for line in resumed.stdout.splitlines()
                if line.startswith("[")]
    assert progress == ["[2/3] middle succeeded", "[3/3] last succeeded"], resumed.stdout
