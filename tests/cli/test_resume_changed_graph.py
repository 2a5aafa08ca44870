"""Resuming a run whose graph file changed since: refused, saying what changed."""

from __future__ import annotations

from pathlib import Path

from support import DIES_ONCE, run_cli

FLOW = DIES_ONCE + '''
graph = cp.Graph("flow")
graph.add("last", dies, x=graph.add("first", first))
'''


def _interrupted_run(cwd: Path) -> str:
    (cwd / "flow.py").write_text(FLOW)
    crashed = run_cli("run", "flow.py", "-q", "--db", "runs.db", cwd=cwd)
    assert crashed.returncode == 9, crashed.stderr
    listed = run_cli("runs", "--db", "runs.db", cwd=cwd)
    assert "interrupted" in listed.stdout, listed.stdout
    return listed.stdout.splitlines()[1].split()[0]


def test_a_changed_graph_is_refused_naming_the_changes(tmp_path: Path) -> None:
    run_id = _interrupted_run(tmp_path)
    (tmp_path / "flow.py").write_text(FLOW.replace('"last"', '"final"').replace(
        'graph.add("final", dies, x=graph.add("first", first))',
        'graph.add("final", dies, x=graph.add("first", first))\n'
        'graph.add("extra", first)'))
    refused = run_cli("resume", run_id, "--db", "runs.db", cwd=tmp_path)
    assert refused.returncode == 2
    assert (f"run {run_id}: graph 'flow' in {tmp_path / 'flow.py'} changed since the run "
            "started (nodes added: final, extra; nodes removed: last); restore the original "
            "definition to resume") in refused.stderr.replace("\n", "")
    (tmp_path / "flow.py").write_text(FLOW.replace("return x + 1", "return x + 2"))
    resumed = run_cli("resume", run_id, "-q", "--json", "--db", "runs.db", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr  # the same nodes and steps: it resumes
    assert '"last": 3' in resumed.stdout


def test_a_changed_step_is_named_as_such(tmp_path: Path) -> None:
    run_id = _interrupted_run(tmp_path)
    renamed = FLOW.replace("async def dies(", "async def dies_later(")
    (tmp_path / "flow.py").write_text(renamed.replace('graph.add("last", dies,',
                                                      'graph.add("last", dies_later,'))
    refused = run_cli("resume", run_id, "--db", "runs.db", cwd=tmp_path)
    assert refused.returncode == 2
    assert "changed since the run started (a node's step or kind changed)" in refused.stderr


def test_a_changed_graph_given_to_resume_in_python_is_refused_naming_the_changes(
        tmp_path: Path) -> None:
    """resume(graph=...) checks the graph as a resume from the file does; it failed with
    KeyError: 'last' while replaying the log on a graph without that node."""
    import asyncio
    import sys

    import pytest

    import counterpoint as cp
    from counterpoint.store import SQLiteStore
    run_id = _interrupted_run(tmp_path)
    (tmp_path / "renamed.py").write_text(FLOW.replace('"last"', '"final"'))
    sys.path.insert(0, str(tmp_path))
    try:
        import flow  # type: ignore[import-not-found]
        import renamed  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("flow", None)
        sys.modules.pop("renamed", None)
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        with pytest.raises(cp.UserError) as refused:
            asyncio.run(cp.resume(run_id, store=store, graph=renamed.graph))
        assert str(refused.value) == (
            f"run {run_id}: the graph given to resume, 'flow', is not the one the run "
            "started with (nodes added: final; nodes removed: last); pass the graph as it "
            "was when the run started")
        result = asyncio.run(cp.resume(run_id, store=store, graph=flow.graph))
    finally:
        store.close()
    assert result.ok and result["last"] == 2
