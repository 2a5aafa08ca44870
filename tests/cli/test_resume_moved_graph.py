"""``counterpoint resume RUN --graph FILE[:ATTR]``: a run whose recorded graph file is not
where the log says (the store copied to another machine, the project moved) resumes from
the file given, checked against the shape the log recorded."""

from __future__ import annotations

import shutil
from pathlib import Path

from support import DIES_ONCE, run_cli

FLOW = DIES_ONCE + '''
graph = cp.Graph("flow")
graph.add("last", dies, x=graph.add("first", first))
other = cp.Graph("other")
other.add("only", first)
'''


def _moved_run(tmp_path: Path) -> tuple[str, Path]:
    """A run interrupted in ``tmp_path/was``, then that folder moved to ``tmp_path/now``."""
    was = tmp_path / "was"
    was.mkdir()
    (was / "flow.py").write_text(FLOW)
    crashed = run_cli("run", "flow.py:graph", "-q", "--db", "runs.db", cwd=was)
    assert crashed.returncode == 9, crashed.stderr
    listed = run_cli("runs", "--db", "runs.db", cwd=was)
    run_id = listed.stdout.splitlines()[1].split()[0]
    now = tmp_path / "now"
    shutil.move(was, now)
    return run_id, now


def test_a_moved_graph_file_is_given_to_resume(tmp_path: Path) -> None:
    run_id, now = _moved_run(tmp_path)
    lost = run_cli("resume", run_id, "--db", "runs.db", cwd=now)
    assert lost.returncode == 2, lost.stdout + lost.stderr
    said = " ".join(lost.stderr.split())
    assert (f"its graph came from {tmp_path / 'was' / 'flow.py'}, which no longer exists; "
            "restore the file, or give it with `counterpoint resume "
            f"{run_id} --graph FILE[:GRAPH]`") in said, said
    resumed = run_cli("resume", run_id, "--graph", "flow.py:graph", "-q", "--json",
                      "--db", "runs.db", cwd=now)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert '"last": 2' in resumed.stdout


def test_a_graph_given_to_resume_that_is_not_the_runs_is_refused(tmp_path: Path) -> None:
    run_id, now = _moved_run(tmp_path)
    refused = run_cli("resume", run_id, "--graph", "flow.py:other", "--db", "runs.db",
                      cwd=now)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    said = " ".join(refused.stderr.split())
    assert said == (f"error: run {run_id}: the graph given to resume, 'other', is not the "
                    "one the run started with (nodes added: only; nodes removed: first, "
                    "last); pass the graph as it was when the run started"), said
    missing = run_cli("resume", run_id, "--graph", "gone.py", "--db", "runs.db", cwd=now)
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "gone.py" in missing.stderr and "Traceback" not in missing.stderr
    listed = run_cli("runs", "--db", "runs.db", cwd=now)  # refused before anything ran
    assert "interrupted" in listed.stdout, listed.stdout
    resumed = run_cli("resume", run_id, "--graph", "flow.py", "-q", "--json",
                      "--db", "runs.db", cwd=now)  # one graph of that name: found by it
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert '"last": 2' in resumed.stdout
