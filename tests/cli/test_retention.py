"""``counterpoint delete`` and ``counterpoint prune``, run as a user runs them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support import run_cli

GRAPH = '''
import counterpoint as cp

async def big(n: int) -> str:
    return "x" * 5000 + str(n)

async def size(s: str) -> int:
    return len(s)

inner = cp.Graph("inner")
inner.add("len", size, s=inner.input("s"))
graph = cp.Graph("demo")
b = graph.add("big", big, n=1)
graph.add("sub", inner, s=b)
'''


@pytest.fixture
def three_runs(tmp_path: Path) -> tuple[Path, list[str]]:
    """A store holding three finished runs of a graph with a sub-graph, oldest first."""
    (tmp_path / "g.py").write_text(GRAPH)
    for _ in range(3):
        done = run_cli("run", "g.py:graph", "-q", "--db", "runs.db", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        ids = [r[0] for r in conn.execute("SELECT run_id FROM runs WHERE parent IS NULL "
                                          "ORDER BY created_at")]
    assert len(ids) == 3
    return tmp_path, ids


def _left(cwd: Path) -> list[str]:
    with sqlite3.connect(cwd / "runs.db") as conn:
        return [r[0] for r in conn.execute("SELECT run_id FROM runs ORDER BY run_id")]


def test_delete_removes_a_run_with_its_sub_run(three_runs: tuple[Path, list[str]]) -> None:
    cwd, ids = three_runs
    done = run_cli("delete", ids[0][:-4], "--db", "runs.db", cwd=cwd)  # a unique prefix
    assert done.returncode == 0, done.stderr
    assert f"deleted 2 run(s) ({ids[0]}, {ids[0]}/sub)" in done.stdout
    assert ids[0] not in " ".join(_left(cwd))
    shown = run_cli("show", ids[0], "--db", "runs.db", cwd=cwd)
    assert shown.returncode == 2 and f"run {ids[0]} not found" in shown.stderr


def test_prune_keeps_the_newest_and_a_dry_run_deletes_nothing(
        three_runs: tuple[Path, list[str]]) -> None:
    cwd, ids = three_runs
    dry = run_cli("prune", "--keep", "1", "--dry-run", "--db", "runs.db", cwd=cwd)
    assert dry.returncode == 0, dry.stderr
    assert "would delete 2 run(s)" in dry.stdout and "nothing was deleted" in dry.stdout
    assert len(_left(cwd)) == 6
    done = run_cli("prune", "--keep", "1", "--vacuum", "--db", "runs.db", cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert "deleted 4 run(s)" in done.stdout and "(vacuumed)" in done.stdout
    assert _left(cwd) == [ids[2], f"{ids[2]}/sub"]
    shown = run_cli("show", ids[2], "--db", "runs.db", cwd=cwd)  # its blob is still there
    assert shown.returncode == 0, shown.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["prune"], "say which runs to delete: --older-than AGE"),
    (["prune", "--older-than", "soon"], "'soon' is not an age"),
    (["prune", "--keep", "1", "--status", "done"], "unknown status 'done'"),
    (["delete", "r-nope"], "run r-nope not found"),
])
def test_mistakes_are_clear_errors_that_delete_nothing(
        three_runs: tuple[Path, list[str]], args: list[str], message: str) -> None:
    cwd, _ = three_runs
    done = run_cli(*args, "--db", "runs.db", cwd=cwd)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert len(_left(cwd)) == 6


def test_a_store_that_is_not_there_is_a_clear_error(tmp_path: Path) -> None:
    done = run_cli("prune", "--keep", "0", "--db", "missing.db", cwd=tmp_path)
    assert done.returncode == 2
    assert "store missing.db does not exist" in done.stderr
    assert not (tmp_path / "missing.db").exists()


def test_runs_lists_top_level_runs_unless_asked_for_sub_runs(
        three_runs: tuple[Path, list[str]]) -> None:
    cwd, ids = three_runs
    listed = run_cli("runs", "--db", "runs.db", cwd=cwd).stdout
    assert all(run in listed for run in ids) and "/sub" not in listed
    two = run_cli("runs", "--limit", "2", "--db", "runs.db", cwd=cwd).stdout
    assert ids[2] in two and ids[1] in two and ids[0] not in two  # the two newest roots
    everything = run_cli("runs", "--sub-runs", "--db", "runs.db", cwd=cwd).stdout
    assert all(f"{run}/sub" in everything for run in ids)
