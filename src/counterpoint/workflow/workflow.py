"""Loading a workflow file: :func:`load_workflow` and the :class:`Workflow` it returns, and
the hooks through which :mod:`counterpoint.loader` finds a workflow's graph again
(:func:`workflow_module` for ``.yaml`` files, :func:`rebuild_recorded` for the recorded
source of a run)."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..errors import SourceError
from ..graph import Graph, GraphSource
from ..health.registry import health
from ..health.settings import HealthSettings
from ..loader import module_name_for
from .compile import build_graph
from .errors import Problem, WorkflowError
from .inputs import bind
from .plan import plan_workflow
from .resolver import ModelChoice, SubWorkflow
from .spec import InputSpec, parse_spec
from .yamlsource import load_yaml

WORKFLOW_KIND = "workflow"
"""The source kind a workflow's graph is recorded with (see :func:`rebuild_recorded`)."""


@dataclass(frozen=True, slots=True)
class WorkflowSource(GraphSource):
    """Where a workflow's graph came from: ``file`` is the workflow file, resolved."""

    kind: ClassVar[str] = WORKFLOW_KIND


@dataclass(frozen=True, kw_only=True)
class Workflow:
    """A loaded workflow: its graph and what it needs to run.

    Run it with ``cp.run(wf.graph, inputs=wf.bind_inputs({...}))``: the graph takes
    every declared input, and :meth:`bind_inputs` fills in defaults.
    """

    name: str
    description: str
    source_path: Path
    """The file it was loaded from, as given."""
    graph: Graph
    inputs: Mapping[str, InputSpec]
    """Declared inputs, by name (type, default, description; ``.required``)."""
    input_lines: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Input name -> ``file:line`` of its declaration (for error messages)."""
    health: HealthSettings = field(default_factory=HealthSettings)
    """The file's ``health:``, put in force (for every run of the process) when loaded."""

    def bind_inputs(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Every input's value for a run: ``values`` converted to the declared types
        (text from ``--input key=value`` is parsed), defaults for the rest.

        Raises :class:`WorkflowError` naming each missing required input (and how to
        pass it), unknown input, and value that does not fit its type.
        """
        return bind(self.name, self.inputs, self.input_lines, str(self.source_path), values)


def load_workflow(path: str | os.PathLike[str], *,
                  models: Mapping[str, ModelChoice] | None = None) -> Workflow:
    """Read, check and compile the workflow file at ``path``.

    ``models`` overrides the models agents use, without editing the file: a key is a
    model name as written in the file (an agent's, a step's or the workflow's
    ``model:``), or ``"*"`` for every agent; a value is a model name, a
    :class:`~counterpoint.models.Model` or a provider such as
    :class:`~counterpoint.models.ScriptedModel`. Overrides apply to sub-workflows too.

    Raises :class:`WorkflowError` listing every problem found, each with ``file:line``
    and a hint. Loading imports the Python modules and files the workflow names.
    The same file always compiles to the same graph (same fingerprint), so a run
    can be resumed with ``cp.resume(run_id, graph=load_workflow(path).graph)``;
    ``cp.resume(run_id)`` finds the graph too: within the process that loaded it, this
    graph (with its model overrides), in another process the file's (with its models).
    """
    loader = _Loader(dict(models or {}))
    workflow = loader.load(Path(path), ())
    _register(workflow)
    return workflow


class _Loader:
    """Loads a file and its sub-workflows (each file once per load)."""

    def __init__(self, models: Mapping[str, ModelChoice]) -> None:
        self.models = models
        self.loaded: dict[Path, Workflow] = {}

    def load(self, path: Path, stack: tuple[Path, ...]) -> Workflow:
        key = path.resolve()
        if key in self.loaded:
            return self.loaded[key]
        doc = load_yaml(path)
        spec, problems = parse_spec(doc)
        if spec is None:
            raise WorkflowError(sorted(problems, key=Problem.order), file=str(path))
        try:
            plan = plan_workflow(doc, spec, models=self.models, load_sub=self.sub,
                                 stack=stack)
        except WorkflowError as exc:
            found = sorted([*problems, *exc.problems], key=Problem.order)
            raise WorkflowError(found, file=str(path)) from None
        if problems:
            raise WorkflowError(problems, file=str(path))
        graph = build_graph(plan)
        graph.source = WorkflowSource(module=module_name_for(path), file=str(key),
                                      name=plan.name)
        workflow = Workflow(name=plan.name, description=plan.description, source_path=path,
                            graph=graph, inputs=plan.inputs, input_lines=plan.input_lines,
                            health=spec.health)
        # the breakers are the process's, shared by its runs; over counterpoint.toml's
        health().adopt(spec.health, layer="workflow")
        self.loaded[key] = workflow
        return workflow

    def sub(self, path: Path, stack: tuple[Path, ...]) -> SubWorkflow:
        workflow = self.load(path, stack)
        return SubWorkflow(name=workflow.name, path=path, graph=workflow.graph,
                           inputs=workflow.inputs)


def workflow_module(path: str | os.PathLike[str]) -> types.ModuleType:
    """Load the workflow at ``path`` and return the module its graph's source record
    names: what :func:`counterpoint.loader.load_file` needs to resume a workflow run in
    a new process (the file's models are used: overrides given at the first load are
    not recorded)."""
    workflow = load_workflow(path)
    return sys.modules[workflow.graph.source.module]


def _register(workflow: Workflow) -> None:
    """Make the graph findable where its source record points (``cp.resume`` re-finds a
    file's graph by the module name :func:`~counterpoint.loader.module_name_for` gives the
    file), so a run of this workflow resumes in this process without ``graph=``."""
    name = workflow.graph.source.module
    module = types.ModuleType(name, f"workflow {workflow.name} ({workflow.source_path})")
    module.__file__ = workflow.graph.source.file
    module.graph = workflow.graph  # type: ignore[attr-defined]
    module.workflow = workflow  # type: ignore[attr-defined]
    sys.modules[name] = module


def rebuild_recorded(source: Mapping[str, Any], run: str) -> Graph:
    """The graph of a recorded workflow run (:data:`WORKFLOW_KIND`): the one this process
    loaded from the same file, if it is the same graph, else the file loaded again."""
    module = sys.modules.get(str(source.get("module")))
    loaded = getattr(module, "graph", None)
    if isinstance(loaded, Graph) and loaded.fingerprint() == source.get("fingerprint"):
        return loaded
    file = source.get("file")
    if not file or not Path(str(file)).is_file():
        raise SourceError(f"run {run}: its workflow file {file or '(not recorded)'} no longer "
                          "exists; restore it, or resume from Python with "
                          "graph=load_workflow(PATH).graph")
    return load_workflow(str(file)).graph
