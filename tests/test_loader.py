"""Loading a user's Python graph file (:func:`counterpoint.loader.load_file`)."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import counterpoint as cp
from counterpoint.loader import find_graph, load_file


def test_a_file_beside_the_graph_named_like_a_library_does_not_stand_in_for_it(
        tmp_path: Path) -> None:
    """Regression: the graph file's folder stayed first on ``sys.path``, so a file there
    named like a library (``openai.py``, ``json.py``) was what the program got when it
    imported that library later (counterpoint imports its model clients lazily). The
    graph file's own imports still find the modules beside it first."""
    (tmp_path / "colorsys.py").write_text("SHADOW = True\n")  # stdlib's name, unused so far
    (tmp_path / "helpers.py").write_text("def greeting() -> str:\n    return 'hi'\n")
    (tmp_path / "flow.py").write_text(textwrap.dedent("""
        import counterpoint as cp
        from helpers import greeting

        async def hello() -> str:
            return greeting()

        graph = cp.Graph("beside")
        graph.add("hello", hello)
    """))
    sys.modules.pop("colorsys", None)
    path = list(sys.path)
    try:
        graph = find_graph(load_file(tmp_path / "flow.py"), None, where=str(tmp_path))
        assert cp.run_sync(graph, store="memory")["hello"] == "hi"
        colorsys = importlib.import_module("colorsys")
        assert not hasattr(colorsys, "SHADOW"), colorsys.__file__
        assert str(tmp_path) in sys.path  # a step's later `import helpers` still works
    finally:
        sys.path[:] = path
        sys.modules.pop("colorsys", None)
        sys.modules.pop("helpers", None)
