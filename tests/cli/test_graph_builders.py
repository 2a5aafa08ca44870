"""``FILE.py:NAME`` naming a function that builds the graph, as a user writes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import run_cli

BUILDERS = '''
import counterpoint as cp


async def one() -> int:
    return 1


def needs(n):
    return cp.Graph("needs")


def breaks():
    return {}["missing"]


def fine():
    graph = cp.Graph("fine")
    graph.add("one", one)
    return graph
'''


@pytest.mark.parametrize(("command", "message"), [
    ("run", "builders.py:needs is a function that needs arguments (n); name a Graph, or a "
            "function of no arguments that returns one"),
    ("graph", "builders.py:needs is a function that needs arguments (n)"),
])
def test_a_builder_that_needs_arguments_is_a_clear_error(tmp_path: Path, command: str,
                                                          message: str) -> None:
    (tmp_path / "builders.py").write_text(BUILDERS)
    extra = ["--db", "runs.db"] if command == "run" else []
    done = run_cli(command, "builders.py:needs", *extra, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_builder_that_raises_names_where(tmp_path: Path) -> None:
    (tmp_path / "builders.py").write_text(BUILDERS)
    done = run_cli("run", "builders.py:breaks", "--db", "runs.db", cwd=tmp_path)
    assert done.returncode == 2
    assert (f"builders.py:breaks: calling it to build the graph raised KeyError at "
            f"{tmp_path / 'builders.py'}:14: 'missing'") in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs.db").exists()  # nothing ran, nothing was made


def test_a_builder_of_no_arguments_runs(tmp_path: Path) -> None:
    (tmp_path / "builders.py").write_text(BUILDERS)
    done = run_cli("run", "builders.py:fine", "-q", "--db", "runs.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("target", ["", " ", ".hidden"])
def test_a_target_that_names_nothing_is_a_clear_error(tmp_path: Path, target: str) -> None:
    done = run_cli("run", target, "--db", "runs.db", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "error:" in done.stderr


def test_a_file_that_raises_on_import_names_its_line(tmp_path: Path) -> None:
    (tmp_path / "wrong.py").write_text('import counterpoint as cp\n\ng = cp.Graph("wrong")\n\n\n'
                                       'async def a() -> int:\n    return 1\n\ng.add(a)\n')
    (tmp_path / "decodes.py").write_text('import json\n\nCONFIG = json.loads("{")\n')
    done = run_cli("run", "wrong.py", "--db", "runs.db", cwd=tmp_path)
    assert done.returncode == 2
    # the GraphError names its g.add line itself: said once, with the file as named
    assert done.stderr.startswith("error: wrong.py:9: graph 'wrong': g.add got function a "
                                  "where the node id goes"), done.stderr
    assert done.stderr.count("wrong.py:9") == 1
    done = run_cli("run", "decodes.py", "--db", "runs.db", cwd=tmp_path)
    assert done.returncode == 2
    assert "decodes.py:3 (raised at " in done.stderr and "json/decoder.py:" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs.db").exists()
