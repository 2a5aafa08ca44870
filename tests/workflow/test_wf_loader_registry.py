"""``counterpoint.loader`` is a registry: loaders by file suffix and source rebuilds by kind.
It never imports the workflow, agent or model layers itself; the workflow package
registers ``.yaml``/``.yml`` and the ``workflow`` kind, and the loader imports it only
when it meets one of those."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint import loader
from counterpoint.errors import SourceError

SRC = Path(cp.__file__).resolve().parents[1]
"""The source tree the counterpoint under test is imported from."""
LAYERS = ("counterpoint.workflow", "counterpoint.agents", "counterpoint.models")

WORKFLOW = """
name: registered
steps:
  a: {python: "json:dumps", args: {obj: [1, 2, 3]}}
output: a
"""


def _fresh(code: str) -> dict[str, object]:
    """Run ``code`` in a new interpreter and return the JSON it prints last."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(SRC)})
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_importing_the_loader_imports_no_layer_above_it() -> None:
    # The package's __init__ imports the public API (models among it), so it is stood in
    # for by a bare package: what is measured is loader.py and what it imports.
    loaded = _fresh(f"""
        import json, sys, types
        package = types.ModuleType("counterpoint")
        package.__path__ = [{str(SRC / "counterpoint")!r}]
        sys.modules["counterpoint"] = package
        import counterpoint.loader
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("counterpoint"))))
    """)
    assert isinstance(loaded, list) and "counterpoint.loader" in loaded
    assert [m for m in loaded if m.startswith(LAYERS)] == []


def test_the_loader_has_no_import_of_a_layer_above_it_even_inside_a_function() -> None:
    # what import-cycle checkers read: an import statement anywhere in the module is an
    # edge of the import graph, whether or not it runs at import time
    tree = ast.parse((SRC / "counterpoint" / "loader.py").read_text())
    imported: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "counterpoint." * (node.level > 0) + (node.module or "")
            imported += [base, *(f"{base}.{alias.name}".replace("..", ".")
                                 for alias in node.names)]
    assert [m for m in imported if m.startswith(LAYERS)] == []


def test_a_yaml_file_loads_in_a_process_that_never_imported_the_workflow_package(
        tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    found = _fresh(f"""
        import json, sys
        from counterpoint.loader import find_graph, load_file
        before = "counterpoint.workflow" in sys.modules
        graph = find_graph(load_file({str(tmp_path / "wf.yaml")!r}), None, where="wf.yaml")
        print(json.dumps([before, graph.name, "counterpoint.workflow" in sys.modules]))
    """)
    assert found == [False, "registered", True]


def test_a_recorded_workflow_source_has_a_kind_and_is_rebuilt_by_it(tmp_path: Path) -> None:
    from counterpoint.workflow import load_workflow

    path = tmp_path / "wf.yaml"
    path.write_text(WORKFLOW)
    wf = load_workflow(path)
    record = loader.source_record(wf.graph)
    assert record["kind"] == "workflow" and record["file"] == str(path.resolve())
    assert loader.load_recorded(record, "R") is wf.graph  # this process's graph
    rebuilt = _fresh(f"""
        import json
        from counterpoint.loader import load_recorded
        graph = load_recorded({record!r}, "R")
        print(json.dumps([graph.name, graph.fingerprint()]))
    """)
    assert rebuilt == ["registered", record["fingerprint"]]
    path.unlink()
    with pytest.raises(SourceError, match=r"run R: its workflow file .*wf.yaml no longer "
                                          r"exists; restore it"):
        loader.load_recorded({**record, "module": "gone"}, "R")


def test_an_unregistered_kind_says_what_to_do() -> None:
    with pytest.raises(SourceError, match=r"run R: its graph is of kind 'notebook', which "
                                          r"nothing registered"):
        loader.load_recorded({"kind": "notebook", "file": "x.ipynb"}, "R")


def test_a_registered_suffix_is_loaded_by_its_loader(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "_LOADERS", dict(loader._LOADERS))
    graph = cp.Graph("toy")
    graph.add("one", _one)

    def load_toy(path: Path) -> types.ModuleType:
        module = types.ModuleType("toy_graphs")
        module.graph = graph  # type: ignore[attr-defined]
        return module

    loader.register_loader([".TOY"], load_toy)
    (tmp_path / "g.toy").write_text("anything")
    assert loader.load_target(str(tmp_path / "g.toy")) is graph
    with pytest.raises(cp.UserError, match="must start with a dot"):
        loader.register_loader(["toy"], load_toy)


def _one() -> int:
    return 1
