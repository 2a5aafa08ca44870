"""Loading a user's Python graph file (:func:`counterpoint.loader.load_file`)."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

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


# ---- a graph file or module that fails while it is imported (load_target)

def _failing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str) -> str:
    """The message of loading ``target`` in ``tmp_path`` (the working directory)."""
    from counterpoint.loader import load_target
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(cp.SourceError) as caught:
        load_target(target)
    for name in [m for m in sys.modules if m.startswith(("qa_pkg", "qa_help"))]:
        del sys.modules[name]
    return str(caught.value)


def test_a_syntax_error_names_the_file_the_line_and_shows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: ``bad.py: importing it raised SyntaxError: invalid syntax (bad.py,
    line 4)``: no line number where an editor reads it, and the line not shown."""
    (tmp_path / "bad.py").write_text("import counterpoint as cp\n\ng = cp.Graph('x')\n"
                                     "def a(:\n    return 1\n")
    assert _failing(tmp_path, monkeypatch, "bad.py") == \
        "bad.py:4: SyntaxError: invalid syntax: `def a(:`; fix that line"


def test_an_indentation_error_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bad.py").write_text("x = 1\n    y = 2\n")
    assert _failing(tmp_path, monkeypatch, "bad.py") == \
        "bad.py:2: IndentationError: unexpected indent: `y = 2`; fix that line"


def test_a_syntax_error_in_a_module_the_file_imports_names_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "qa_help_broken.py").write_text("def f(:\n")
    (tmp_path / "flow.py").write_text("import counterpoint as cp\nimport qa_help_broken\n")
    assert _failing(tmp_path, monkeypatch, "flow.py") == (
        "qa_help_broken.py:1: SyntaxError: invalid syntax: `def f(:`; fix that line "
        "(imported from flow.py:2)")


def test_a_module_target_that_fails_is_named_by_its_file_and_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: ``counterpoint run package.module`` printed the whole traceback for a
    module with a syntax error or one that raised, and called a module importing a
    missing one "no such file or importable module"."""
    package = tmp_path / "qa_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "syntax.py").write_text("def a(:\n")
    (package / "raises.py").write_text("x = 1\nvalue = 1 / 0\n")
    (package / "needs.py").write_text("import qa_not_installed_anywhere\n")
    assert _failing(tmp_path, monkeypatch, "qa_pkg.syntax") == \
        "qa_pkg/syntax.py:1: SyntaxError: invalid syntax: `def a(:`; fix that line"
    assert _failing(tmp_path, monkeypatch, "qa_pkg.raises:g") == \
        "qa_pkg/raises.py:2: importing it raised ZeroDivisionError: division by zero"
    assert _failing(tmp_path, monkeypatch, "qa_pkg.needs") == (
        "qa_pkg/needs.py:1: importing it raised ModuleNotFoundError: No module named "
        "'qa_not_installed_anywhere'")
    assert _failing(tmp_path, monkeypatch, "qa_pkg.absent") == (
        "qa_pkg.absent: no such file or importable module (No module named "
        "'qa_pkg.absent')")
    assert _failing(tmp_path, monkeypatch, "a..b") == \
        "a..b: no such file or importable module (not a module name)"


def test_a_folder_or_a_file_that_is_not_python_says_what_to_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a folder was imported as a namespace package and said "defines no Graph
    at module level"; a text file, "cannot be imported as Python" and no more."""
    (tmp_path / "qa_pkg_flows").mkdir()
    (tmp_path / "notes.txt").write_text("hello\n")
    assert _failing(tmp_path, monkeypatch, "qa_pkg_flows") == (
        "qa_pkg_flows: a folder (a namespace package) holds no graph; pass one of its "
        "files (qa_pkg_flows/FILE.py) or modules (qa_pkg_flows.MODULE)")
    assert _failing(tmp_path, monkeypatch, "notes.txt") == (
        "notes.txt: cannot be imported as Python (not a .py file); pass FILE.py[:GRAPH], a "
        "workflow FILE.yaml or a goal in quotes")


def test_a_blank_target_says_what_run_takes(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert _failing(tmp_path, monkeypatch, "   ") == (
        "'   ' names no file or module; give FILE.py[:GRAPH], package.module[:GRAPH], a "
        "workflow file or a goal in quotes")


def test_a_graph_whose_module_is_not_in_sys_modules_can_be_given_to_resume(
        tmp_path: Path) -> None:
    """A module executed without being registered (importlib's module_from_spec and
    exec_module, as notebooks and plugin loaders do): resume(graph=...) rebuilt the run's
    steps from it with a TypeError from vars()."""
    import asyncio
    import importlib.util

    from support import stop_executing
    (tmp_path / "flows.py").write_text(textwrap.dedent("""
        import counterpoint as cp

        async def one() -> int:
            return 1

        def build() -> cp.Graph:
            graph = cp.Graph("unregistered")
            graph.add("one", one)
            return graph
    """))
    spec = importlib.util.spec_from_file_location("flows_unregistered", tmp_path / "flows.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert "flows_unregistered" not in sys.modules
    graph = module.build()
    store = cp.MemoryStore()

    async def interrupted_then_resumed() -> cp.RunResult:
        handle = await cp.start(graph, store=store)
        await stop_executing(handle)  # left resumable, as a process that died leaves it
        return await cp.resume(handle.run_id, store=store, graph=graph)

    result = asyncio.run(interrupted_then_resumed())
    assert result.status is cp.RunStatus.SUCCEEDED and result["one"] == 1
