"""The package's shape: no import cycles, dependencies that point one way, and modules
that can be read in one sitting."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "counterpoint"
LONG_MODULE = 500
"""Lines past which a module must say at its top why it is that long."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(path: Path, modules: set[str], *, deferred: bool) -> set[str]:
    """Package modules that ``path`` imports outside ``if TYPE_CHECKING:``: at module level,
    and with ``deferred`` also inside functions (they run later, but still depend)."""
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
            elif deferred and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef
                                         | ast.ClassDef | ast.With | ast.For | ast.While):
                visit(node.body)
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


def _graph(*, deferred: bool = False) -> dict[str, set[str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in files}
    graph = {_module_name(p): _imports(p, modules, deferred=deferred) for p in files}
    # a package's __init__ importing its own submodules is how packages work, not a cycle
    return {m: {d for d in deps if not d.startswith(m + ".")} for m, deps in graph.items()}


def _cycle(graph: dict[str, set[str]]) -> str | None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return " -> ".join(exc.args[1])
    return None


def test_the_package_has_no_import_cycles() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, f"import cycle: {cycle}"


def test_no_module_depends_on_one_that_depends_on_it_even_through_deferred_imports() -> None:
    """A function-level import still is a dependency: one pointing back up is a cycle."""
    cycle = _cycle(_graph(deferred=True))
    assert cycle is None, f"dependency cycle: {cycle}"


def test_the_scheduler_never_imports_the_layers_above_it() -> None:
    above = ("counterpoint.api", "counterpoint.cli", "counterpoint.workflow",
             "counterpoint.agents", "counterpoint.models", "counterpoint.planning")
    graph = _graph(deferred=True)
    for module, deps in graph.items():
        if module.startswith(("counterpoint.scheduler", "counterpoint.state",
                              "counterpoint.context", "counterpoint.store")):
            bad = sorted(d for d in deps if d.startswith(above))
            assert not bad, f"{module} imports {bad}, a layer above it"


def test_long_modules_say_why_at_their_top() -> None:
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > LONG_MODULE:
            doc = ast.get_docstring(ast.parse(text)) or ""
            assert "long" in doc.lower(), (
                f"{path.relative_to(PACKAGE.parent)} has {text.count(chr(10))} lines; split "
                "it, or say in its docstring why it is long")


def test_test_modules_outside_packages_have_unique_names() -> None:
    # pytest imports a test file outside a package by its basename: two of them with one
    # name stop the collection of the whole suite ("import file mismatch")
    tests = Path(__file__).parent
    seen: dict[str, Path] = {}
    clashes = []
    for path in sorted(tests.rglob("test_*.py")):
        if (path.parent / "__init__.py").exists():
            continue  # imported as package.module
        other = seen.setdefault(path.name, path)
        if other is not path:
            clashes.append(f"{other.relative_to(tests)} and {path.relative_to(tests)}")
    assert not clashes, f"test modules share a name: {clashes}; rename one"
