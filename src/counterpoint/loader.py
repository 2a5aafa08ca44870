"""Find graphs in user files and modules, and re-import step functions on resume.

A run's log records where its graph came from (:func:`source_record`): a module or
file that defines it, or, for a graph that no file defines (a goal run from the
command line), the module-level function that built it and that function's JSON
arguments (:func:`built_by`). :func:`load_recorded` rebuilds the graph from that
record; :func:`make_resolver` finds the steps of nodes that live edits added.

Files other than Python are read by loaders registered by suffix
(:func:`register_loader`), and recorded sources of other kinds are rebuilt by
functions registered by kind (:func:`register_source_kind`). The workflow layer
registers ``.yaml``/``.yml`` and the ``workflow`` kind when it is imported; so that
this module never imports the layers above it, yet ``counterpoint resume`` of a
workflow run works in a fresh process, a lookup that finds nothing registered
imports the module :data:`PROVIDERS` names for that suffix or kind, once.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pydantic_core

from .errors import SourceError, UserError
from .failures import exception_text, failure_location
from .graph import Graph, GraphSource, step_key
from .loader_messages import import_failed, shown_path
from .texts import some

FileLoader = Callable[[Path], ModuleType]
"""Loads a graph file of a registered suffix: returns the module that holds its graph
(found there by :func:`find_graph`); raises :class:`SourceError` for a bad file."""

SourceRebuild = Callable[[Mapping[str, Any], str], Graph]
"""Rebuilds the graph of a recorded run from its source record (what
:func:`source_record` wrote, with ``kind``) and the run's id (for messages); raises
:class:`SourceError` when it cannot. The graph's fingerprint is checked afterwards."""

PROVIDERS: Mapping[str, str] = {".yaml": "counterpoint.workflow",
                                ".yml": "counterpoint.workflow",
                                "workflow": "counterpoint.workflow"}
"""Suffix or source kind -> the module that registers it when imported. Named here as
text and imported only when a lookup needs it, so that importing this module (which the
runtime does) never imports the workflow, agent and model layers."""

_LOADERS: dict[str, FileLoader] = {}
_KINDS: dict[str, SourceRebuild] = {}


def register_loader(suffixes: Iterable[str], load: FileLoader) -> None:
    """Make :func:`load_file` (and so ``counterpoint run``/``resume``) read files ending in
    any of ``suffixes`` (``".yaml"``, case-insensitive) with ``load``.

    Meant to be called when the module that defines ``load`` is imported; a later
    registration of a suffix replaces the earlier one. Python files (every suffix not
    registered) are imported by this module itself.
    """
    for suffix in suffixes:
        if not suffix.startswith("."):
            raise UserError(f"register_loader: suffix {suffix!r} must start with a dot")
        _LOADERS[suffix.lower()] = load


def register_source_kind(kind: str, rebuild: SourceRebuild) -> None:
    """Make :func:`load_recorded` rebuild the graphs of recorded sources whose ``kind`` is
    ``kind`` with ``rebuild``. A graph is recorded with a kind when its
    :attr:`Graph.source` has a ``kind`` attribute (see :func:`source_record`).

    Meant to be called at import time; a later registration of a kind replaces the
    earlier one.
    """
    _KINDS[kind] = rebuild


def _registered(table: Mapping[str, Any], key: str) -> Any:
    """``table[key]``, importing the module that registers ``key`` if it is not there yet."""
    found = table.get(key)
    if found is None and key in PROVIDERS:
        try:
            importlib.import_module(PROVIDERS[key])  # registers itself on import
        except ImportError as exc:
            raise SourceError(f"reading {key!r} needs {PROVIDERS[key]}, which cannot be "
                              f"imported ({exc}); check the installation") from exc
        found = table.get(key)
    return found

LIVE_STEPS = "__counterpoint_live_steps__"
"""A step whose live edits add nodes with steps that are not module-level functions (bound
methods of an object the graph was built with) names them in this attribute, a sequence
of callables, so a resumed run resolves the step keys its log records to the callables of
the graph it is given (see :func:`make_resolver`)."""


@dataclass(frozen=True, slots=True)
class BuiltSource(GraphSource):
    """A graph that no file defines: ``builder`` (``module:qualname`` of a module-level
    function) called with ``arguments`` (JSON) builds it again."""

    builder: str
    arguments: dict[str, Any] = field(default_factory=dict, hash=False)


def built_by(graph: Graph, builder: Callable[..., Graph], /, **arguments: Any) -> Graph:
    """Record in ``graph`` that ``builder(**arguments)`` builds it, so a run of it resumes in
    a new process (``counterpoint resume``); returns ``graph``.

    ``builder`` must be a module-level function and ``arguments`` JSON data: both go
    into the run's log.
    """
    key = step_key(builder)
    if "<" in key or "." in key.partition(":")[2]:
        raise UserError(f"built_by: {key} is not a module-level function; a resumed run "
                        "must be able to import it")
    try:
        data = pydantic_core.to_jsonable_python(arguments)
    except pydantic_core.PydanticSerializationError as exc:
        raise UserError(f"built_by: the arguments of {key} must be JSON data ({exc})") from exc
    graph.source = BuiltSource(module=key.partition(":")[0], file=None, name=graph.name,
                               builder=key, arguments=data)
    return graph


def module_name_for(path: Path) -> str:
    """A stable module name for a user file (stable names keep step keys stable)."""
    stem = re.sub(r"\W", "_", path.stem)
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    return f"cp_file_{stem}_{digest}"


def load_file(path: str | Path) -> ModuleType:
    """The module holding the graph(s) of a file: a Python file imported as a module (its
    ``__main__`` block does not run), or a file of a registered suffix (a workflow
    ``.yaml``) read by its loader (:func:`register_loader`)."""
    file = Path(path)
    if not file.is_file():
        raise SourceError(f"{path}: no such file; pass FILE.py[:GRAPH]")
    load: FileLoader | None = _registered(_LOADERS, file.suffix.lower())
    if load is not None:
        return load(file)
    return _import_python(file, str(path))


def _import_python(file: Path, path: str) -> ModuleType:
    name = module_name_for(file)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise SourceError(f"{path}: cannot be imported as Python (not a .py file); pass "
                          "FILE.py[:GRAPH], a workflow FILE.yaml or a goal in quotes")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(file.resolve().parent)
    first = folder not in sys.path
    if first:  # its imports find the modules beside it first, as `python FILE.py`'s do
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except SourceError:
        sys.modules.pop(name, None)
        raise
    except Exception as exc:
        sys.modules.pop(name, None)
        raise import_failed(exc, file, path) from exc
    finally:
        if first and folder in sys.path:  # then last: a file named like a library
            sys.path.remove(folder)       # (rich.py, json.py) must not stand in for it
            sys.path.append(folder)       # when the program imports that library later
    return module


def find_graph(module: ModuleType, attr: str | None, *, name: str | None = None,
               where: str) -> Graph:
    """The graph named by ``attr`` (a Graph or a zero-argument function returning one), else
    the module's only graph, else the one called ``name``."""
    if attr:
        target = getattr(module, attr, None)
        if target is None:
            raise SourceError(f"{where}: has no attribute {attr!r}; graphs here: "
                              f"{_graph_names(module) or 'none'}")
        if callable(target) and not isinstance(target, Graph):
            target = _built(target, f"{where}:{attr}")
        if not isinstance(target, Graph):
            raise SourceError(f"{where}:{attr} is {type(target).__name__}, not a Graph")
        return _found_in(target, module)
    graphs = {k: v for k, v in vars(module).items() if isinstance(v, Graph)}
    if name is not None:
        named = [g for g in graphs.values() if g.name == name]
        if len(named) == 1:
            return _found_in(named[0], module)
    if len(graphs) == 1:
        return _found_in(next(iter(graphs.values())), module)
    if not graphs:
        raise SourceError(f"{where}: defines no Graph at module level; define one, or name "
                          "a function returning one as FILE.py:FUNCTION")
    raise SourceError(f"{where}: defines several graphs ({', '.join(graphs)}); choose one "
                      "as FILE.py:NAME")


def _found_in(graph: Graph, module: ModuleType) -> Graph:
    """``graph``, found in ``module``: where its runs record that it is to be found again.

    A graph records the module that called ``Graph(...)``. Built by a function of another
    module (a library's builder, called at the top of the user's file), that module holds
    no such graph, and a resume could not find it there: the graph is re-pointed at the
    module it was found in, unless something else rebuilds it (:func:`built_by`, a
    registered kind)."""
    source = graph.source
    if type(source) is GraphSource and source.module != module.__name__:
        graph.source = GraphSource(module=module.__name__,
                                   file=getattr(module, "__file__", None), name=graph.name)
    return graph


def _built(builder: Callable[..., Any], where: str) -> Any:
    """What the function ``FILE.py:NAME`` names returns when called with no arguments; a
    function that needs some, or that raises, is a :class:`SourceError` saying so."""
    try:
        needed = [p.name for p in inspect.signature(builder).parameters.values()
                  if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                         p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):  # no signature to read (a builtin): just call it
        needed = []
    if needed:
        raise SourceError(f"{where} is a function that needs arguments ({', '.join(needed)}); "
                          "name a Graph, or a function of no arguments that returns one")
    try:
        return builder()
    except Exception as exc:
        location = failure_location(exc)
        at = f" at {location['file']}:{location['line']}" if location else ""
        raise SourceError(f"{where}: calling it to build the graph raised "
                          f"{type(exc).__name__}{at}: {exception_text(exc)}") from exc


def _graph_names(module: ModuleType) -> str:
    return ", ".join(k for k, v in vars(module).items() if isinstance(v, Graph))


def split_target(target: str) -> tuple[str, str | None]:
    """``FILE.py[:ATTR]`` or ``package.module[:ATTR]`` -> (path or module, attr or None)."""
    if re.match(r"^[A-Za-z]:\\", target):  # a Windows drive letter is not an attribute
        return target, None
    path, _, attr = target.partition(":")
    return path, attr or None


def load_target(target: str, name: str | None = None) -> Graph:
    """Load ``FILE.py[:ATTR]`` or ``package.module[:ATTR]``; without ``ATTR``, the only
    graph there, else the one called ``name`` (as :func:`find_graph` chooses)."""
    path, attr = split_target(target)
    if not path.strip():
        raise SourceError(f"{target!r} names no file or module; give FILE.py[:GRAPH], "
                          "package.module[:GRAPH], a workflow file or a goal in quotes")
    if path.endswith(".py") or "/" in path or Path(path).is_file():
        return find_graph(load_file(path), attr or None, name=name, where=path)
    return find_graph(_import_module(path), attr or None, name=name, where=path)


def _import_module(name: str) -> ModuleType:
    """The module ``name`` (``package.module``); a name that finds no module, and a module
    whose code fails while it is imported (:func:`import_failed`: its file and line, no
    traceback), are :class:`SourceError`."""
    if not all(part.isidentifier() for part in name.split(".")):  # ".x", "a..b", "a-b"
        raise SourceError(f"{name}: no such file or importable module (not a module name)")
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if name == missing or name.startswith(missing + "."):  # it, or its package
            raise SourceError(f"{name}: no such file or importable module ({exc})") from exc
        failed: Exception = exc  # a module it imports is missing: its line says which
    except Exception as exc:
        failed = exc
    else:
        if getattr(module, "__file__", None) is None and hasattr(module, "__path__"):
            raise SourceError(f"{name}: a folder (a namespace package) holds no graph; "
                              f"pass one of its files ({name.replace('.', '/')}/FILE.py) or "
                              f"modules ({name}.MODULE)")
        return module
    origin = _origin(name)
    raise import_failed(failed, origin, shown_path(str(origin)) if origin else name) \
        from failed


def _origin(name: str) -> Path | None:
    """The file of module ``name`` (after a failed import of it: its packages are
    imported already), or ``None`` when that cannot be told."""
    try:
        spec = importlib.util.find_spec(name)
    except Exception:  # its package failed to import too
        return None
    if spec is None or not spec.has_location or not spec.origin:
        return None
    return Path(spec.origin)


def source_record(graph: Graph, attr: str | None = None) -> dict[str, Any]:
    """What the log records to rebuild ``graph`` later."""
    record: dict[str, Any] = {"module": graph.source.module, "file": graph.source.file,
                              "graph": graph.name, "attr": attr,
                              "fingerprint": graph.fingerprint()}
    if isinstance(graph.source, BuiltSource):
        record.update(builder=graph.source.builder, arguments=graph.source.arguments)
    kind = getattr(graph.source, "kind", None)
    if isinstance(kind, str):
        record["kind"] = kind
    return record


def load_recorded(source: Mapping[str, Any], run: str,
                  shape: Mapping[str, Any] | None = None) -> Graph:
    """Rebuild the graph of a recorded run from the module or file it came from, with the
    function that built it, or by its kind's registered rebuild
    (:func:`register_source_kind`). ``shape``: the nodes and their dependencies as the
    run's ``run_created`` recorded them (``deps``), to say what changed if the graph did."""
    where = f"run {run}"
    kind = source.get("kind")
    if isinstance(kind, str):
        rebuild: SourceRebuild | None = _registered(_KINDS, kind)
        if rebuild is None:
            raise SourceError(f"{where}: its graph is of kind {kind!r}, which nothing "
                              "registered (register_source_kind); import the package that "
                              "handles it, or resume from Python with graph=")
        return _checked(rebuild(source, run), source, where,
                        f"in {source.get('file') or source.get('module')}", shape)
    if source.get("builder"):
        return _checked(_rebuild(str(source["builder"]), source.get("arguments") or {},
                                 where), source, where, str(source["builder"]), shape)
    module_name = source.get("module")
    file = source.get("file")
    module: ModuleType | None = None
    if module_name and module_name != "__main__" and not str(module_name).startswith(
            "cp_file_"):
        try:
            module = importlib.import_module(str(module_name))
        except ImportError:
            module = None
    if module is None and file:
        if not Path(file).is_file():
            raise SourceError(f"{where}: its graph came from {file}, which no longer exists; "
                              f"restore the file, or give it with `counterpoint resume {run} "
                              "--graph FILE[:GRAPH]` (from Python: resume(run_id, graph=...))")
        module = load_file(file)
    if module is None:
        raise SourceError(f"{where}: the log does not say where its graph was defined; resume "
                          "from Python with resume(run_id, graph=...)")
    try:
        graph = find_graph(module, source.get("attr"), name=source.get("graph"),
                           where=str(file or module_name))
    except SourceError as exc:
        raise SourceError(f"{where}: its graph {source.get('graph')!r} cannot be found again: "
                          f"{exc}. If a function builds it, record that before the run with "
                          "cp.built_by(graph, function, **arguments); or resume from Python "
                          "with resume(run_id, graph=...)") from exc
    return _checked(graph, source, where, f"in {file or module_name}", shape)


def _checked(graph: Graph, source: Mapping[str, Any], where: str, origin: str,
             shape: Mapping[str, Any] | None) -> Graph:
    fingerprint = source.get("fingerprint")
    if fingerprint and graph.fingerprint() != fingerprint:
        raise SourceError(f"{where}: graph {graph.name!r} {origin} changed since the run "
                          f"started ({_changes(shape, graph)}); restore the "
                          "original definition to resume")
    return graph


def check_given(graph: Graph, shape: Mapping[str, Any] | None, where: str) -> Graph:
    """``graph``, given (``graph=``) to resume a run whose ``run_created`` recorded
    ``shape`` (node -> dependencies); refused, naming what differs, if its nodes or their
    inputs do: the run's log cannot be replayed on other nodes. Steps are not compared
    (a graph imported under another module name has other step keys)."""
    if shape:
        now = {str(k): sorted(map(str, spec.deps)) for k, spec in graph.nodes.items()}
        if now != {str(k): sorted(map(str, v or ())) for k, v in shape.items()}:
            raise SourceError(f"{where}: the graph given to resume, {graph.name!r}, is not "
                              f"the one the run started with ({_changes(shape, graph)}); "
                              "pass the graph as it was when the run started")
    return graph


def _changes(shape: Mapping[str, Any] | None, graph: Graph) -> str:
    """What differs between the recorded ``shape`` (node -> dependencies) and ``graph``."""
    if not shape:
        return "different nodes or edges"
    now = {str(k): [str(d) for d in spec.deps] for k, spec in graph.nodes.items()}
    then = {str(k): [str(d) for d in (v or ())] for k, v in shape.items()}
    parts = []
    for label, names in (("nodes added", [n for n in now if n not in then]),
                         ("nodes removed", [n for n in then if n not in now]),
                         ("inputs changed", [n for n in now if n in then
                                             and sorted(now[n]) != sorted(then[n])])):
        if names:
            parts.append(f"{label}: {some(names)}")
    return "; ".join(parts) or "a node's step or kind changed"


def _rebuild(builder: str, arguments: Mapping[str, Any], where: str) -> Graph:
    """``builder(**arguments)``: the graph of a run that no file defines."""
    module_name, _, qualname = builder.partition(":")
    try:
        target: Any = getattr(importlib.import_module(module_name), qualname)
    except (ImportError, AttributeError) as exc:
        raise SourceError(f"{where}: its graph was built by {builder}, which cannot be "
                          f"imported ({exc}); resume from Python with graph=") from exc
    try:
        graph = target(**arguments)
    except Exception as exc:
        raise SourceError(f"{where}: rebuilding its graph with {builder} raised "
                          f"{type(exc).__name__}: {exception_text(exc)}") from exc
    if not isinstance(graph, Graph):
        raise SourceError(f"{where}: {builder} returned {type(graph).__name__}, not a Graph")
    return graph


def make_resolver(graph: Graph, run: str = "?") -> Callable[[str, str], Callable[..., Any]]:
    """Resolve step keys recorded in patches: first among the graph's own steps and the
    steps they name in ``__counterpoint_live_steps__`` (:data:`LIVE_STEPS`), then by
    importing ``module:qualname``."""
    known: dict[str, Any] = {}
    qualnames: dict[str, Any] = {}

    def collect(g: Graph) -> None:
        for spec in g.nodes.values():
            for fn in (spec.fn, spec.policy.fallback):
                if fn is None:
                    continue
                key = step_key(fn)
                known[key] = fn
                qualnames.setdefault(key.partition(":")[2], fn)
                live = getattr(fn, LIVE_STEPS, ())
                for added in live if isinstance(live, tuple | list) else ():
                    known.setdefault(step_key(added), added)
                if isinstance(fn, Graph):
                    collect(fn)
        module = sys.modules.get(g.source.module)  # None: a module never registered there
        for value in getattr(module, "__dict__", {}).values():
            if callable(value):
                qualnames.setdefault(getattr(value, "__qualname__", ""), value)

    collect(graph)

    def resolve(key: str, node: str) -> Callable[..., Any]:
        if key in known:
            return known[key]  # type: ignore[no-any-return]
        module_name, _, qualname = key.partition(":")
        # the graph's own file, whatever name it was loaded under (__main__ or by path):
        # match on the qualname there; any other module is imported by name
        own_file = module_name == "__main__" or module_name.startswith("cp_file_")
        if own_file and qualname in qualnames:
            return qualnames[qualname]  # type: ignore[no-any-return]
        if "<locals>" in qualname or "<lambda>" in qualname:
            raise SourceError(f"run {run}, node {node!r} (added by a live edit): its step {key} "
                              "was a local function or lambda and cannot be re-imported on "
                              "resume; define it at module level")
        try:
            target: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                owner, target = target, getattr(target, part)
        except (ImportError, AttributeError) as exc:
            if qualname in qualnames:  # e.g. the graph moved from __main__ to a module
                return qualnames[qualname]  # type: ignore[no-any-return]
            raise SourceError(f"run {run}, node {node!r}: cannot import its step {key} "
                              f"({exc}); restore it, or resume from Python with graph=") from exc
        if inspect.isclass(owner) and inspect.isfunction(target) and not isinstance(
                inspect.getattr_static(owner, target.__name__, None), staticmethod):
            raise SourceError(f"run {run}, node {node!r} (added by a live edit): its step "
                              f"{key} is a method of an object the graph was built with; "
                              "resume with a graph built the same way (graph=...)")
        return target  # type: ignore[no-any-return]

    return resolve
