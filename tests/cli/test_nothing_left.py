"""A mistake found before a run starts leaves nothing behind and says where it is."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

NEEDS_INPUT = """
from counterpoint import Graph

graph = Graph("needs")
city = graph.input("city")

def greet(city: str) -> str:
    return f"hello {city}"

graph.add("greet", greet, city=city)
"""

EMPTY = """
from counterpoint import Graph

graph = Graph("empty")
"""


@pytest.mark.parametrize(("source", "message"), [
    (NEEDS_INPUT, "graph 'needs' needs input(s) ['city']"),
    (EMPTY, "graph 'empty' has no nodes"),
], ids=["missing-input", "no-nodes"])
def test_a_graph_that_cannot_run_leaves_no_store_and_names_its_file(
        tmp_path: Path, source: str, message: str) -> None:
    """Regression: both left an empty store file, and neither message named the file."""
    graph_file = tmp_path / "graph.py"
    graph_file.write_text(textwrap.dedent(source))
    env = {k: v for k, v in os.environ.items() if k != "COUNTERPOINT_DB"}
    env["NO_COLOR"] = "1"
    done = subprocess.run([sys.executable, "-m", "counterpoint.cli", "run", "graph.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    assert str(graph_file) in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / ".counterpoint").exists()  # no store, not even its folder
