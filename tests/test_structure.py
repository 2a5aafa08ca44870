"""The package's shape: no import cycles, and dependencies that point one way."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "counterpoint"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports_at_import_time(path: Path, modules: set[str]) -> set[str]:
    """Package modules that importing ``path`` imports (module level, outside
    ``if TYPE_CHECKING:``; imports inside functions run later and are left out)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                if not _is_type_checking(node):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - node.level + 1]
                    target = ".".join([*base, node.module] if node.module else base)
                else:
                    target = node.module or ""
                if target in modules:
                    found.add(target)
                for alias in node.names:  # from . import sub
                    sub = f"{target}.{alias.name}"
                    if sub in modules:
                        found.add(sub)

    visit(ast.parse(path.read_text()).body)
    found.discard(name)
    # importing a.b.c imports a and a.b first
    return found | {".".join(m.split(".")[:i]) for m in found
                    for i in range(1, m.count(".") + 1)} - {name}


def _graph() -> dict[str, set[str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in files}
    return {_module_name(p): _imports_at_import_time(p, modules) for p in files}


def test_the_package_has_no_import_cycles() -> None:
    graph = _graph()
    # a package's __init__ importing its own submodules is how packages work, not a cycle
    edges = {m: {d for d in deps if not d.startswith(m + ".")} for m, deps in graph.items()}
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None


def test_the_scheduler_never_imports_the_layers_above_it() -> None:
    above = ("counterpoint.api", "counterpoint.cli", "counterpoint.workflow",
             "counterpoint.agents", "counterpoint.models", "counterpoint.planning")
    graph = _graph()
    for module, deps in graph.items():
        if module.startswith(("counterpoint.scheduler", "counterpoint.state",
                              "counterpoint.context", "counterpoint.store")):
            bad = sorted(d for d in deps if d.startswith(above))
            assert not bad, f"{module} imports {bad}, a layer above it"
