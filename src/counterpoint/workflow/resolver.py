"""Finding what a workflow file names: Python references, tools, models, agents, files.

The first layer of the workflow planner (:func:`.plan.plan_workflow`): it holds what the
planner reads from and the problems it finds (each reported with its ``file:line``), and
turns names into objects: ``module:function`` and ``file.py:function`` references, tools
(functions, agents and graphs become tools), models (an override from ``models=``, else
a configured name, checked), agents with their tools (``mcp:SERVER`` names a server of
the file's ``mcp:`` section: one :class:`~counterpoint.mcp.MCPTools` per server, shared by
the agents that name it), output type and model, and sub-workflow files, loaded (a file
that includes itself, directly or through others, is a problem). A name that cannot be
found is reported, never raised.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agents import Agent, Tool, graph_tool
from ..agents.agent import DEFAULT_TURN_TOKENS
from ..agents.tools import from_function
from ..errors import ConfigError, UserError
from ..graph import Graph
from ..mcp.tools import MCPTools, mcp_tools
from ..models import Model, ModelRegistry, Provider, load_registry
from .errors import Problem, WorkflowError
from .imports import ImportProblem, resolve
from .schemas import SchemaProblem, model_from_spec
from .spec import AgentSpec, InputSpec, WorkflowSpec
from .yamlsource import KeyPath, YamlDocument

MCP_PREFIX = "mcp:"
"""How an agent's ``tools:`` entry names a server of the file's ``mcp:`` section."""

ModelChoice = str | Model | Provider
"""What a model override maps a name to."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SubWorkflow:
    """A loaded sub-workflow: its graph and the inputs it declares."""

    name: str
    path: Path
    graph: Graph
    inputs: Mapping[str, InputSpec]


SubLoader = Callable[[Path, tuple[Path, ...]], SubWorkflow]
"""Loads a sub-workflow file, given the chain of files including it (for recursion)."""


@dataclass(kw_only=True, slots=True)
class _Resolver:
    """What the planner reads from and the problems it finds; turning names into objects."""

    doc: YamlDocument
    spec: WorkflowSpec
    models: Mapping[str, ModelChoice]
    load_sub: SubLoader
    stack: tuple[Path, ...]
    problems: list[Problem] = field(default_factory=list)
    agents: dict[str, Agent] = field(default_factory=dict)
    servers: dict[str, MCPTools] = field(default_factory=dict)
    """The MCP servers agents named, by name (built at the first mention)."""
    _registry: ModelRegistry | bool | None = None

    @property
    def folder(self) -> Path:
        return self.doc.path.resolve().parent

    def report(self, at: KeyPath, message: str, hint: str = "") -> None:
        self.problems.append(self.doc.problem(at, message, hint))

    def _agent(self, name: str, spec: AgentSpec) -> None:
        at: KeyPath = ("agents", name)
        tools: list[Tool | MCPTools] = []
        for index, text in enumerate(spec.tools):
            found = self._mcp(text[len(MCP_PREFIX):], (*at, "tools", index)) \
                if text.startswith(MCP_PREFIX) else self._tool(text, (*at, "tools", index))
            if found is not None:
                tools.append(found)
        output: Any = None
        if isinstance(spec.output, str):
            output = self._python(spec.output, (*at, "output"))
            if output is not None and not isinstance(output, type):
                self.report((*at, "output"), f"agent {name!r}: output {spec.output!r} is not "
                            "a class", "name a pydantic model or another type")
                output = None
        elif spec.output is not None:
            try:
                output = model_from_spec(spec.output, f"{name}_output")
            except SchemaProblem as exc:
                self.report((*at, "output", *exc.at), f"agent {name!r}: {exc.message}",
                            exc.hint)
        model = self._model(spec.model or self.spec.model, (*at, "model"))
        try:
            agent = Agent(name, model=model, instructions=spec.instructions.strip(),
                          tools=tools, output=output, description=spec.description,
                          max_turns=spec.max_turns, max_tokens=spec.max_tokens,
                          turn_tokens=spec.turn_tokens or DEFAULT_TURN_TOKENS,
                          deadline=spec.deadline, temperature=spec.temperature,
                          budget=spec.budget.budget() if spec.budget else None,
                          samples=spec.samples)
        except UserError as exc:
            self.report(at, str(exc))
            return
        self.agents[name] = agent

    def _model(self, name: str | None, at: KeyPath) -> ModelChoice | None:
        """The model for ``name``: an override if one matches, else the name (checked)."""
        if name is not None and name in self.models:
            return self.models[name]
        if "*" in self.models:
            return self.models["*"]
        if name is None:
            return None
        registry = self._registry_or_none()
        if registry is not None and name != "auto":  # routed: chosen per call (routing)
            try:
                registry.resolve(name)
            except ConfigError as exc:
                self.report(at, str(exc), "or override it: load_workflow(..., "
                            f"models={{{name!r}: ...}})")
        return name

    def _registry_or_none(self) -> ModelRegistry | None:
        if self._registry is None:
            try:
                self._registry = load_registry()
            except ConfigError:
                self._registry = False  # a broken config is reported when a model is used
        return self._registry if isinstance(self._registry, ModelRegistry) else None

    def _tool(self, text: str, at: KeyPath) -> Tool | None:
        found = self._python(text, at)
        if found is None:
            return None
        try:
            if isinstance(found, Tool):
                return found
            if isinstance(found, Agent):
                return found.as_tool()
            if isinstance(found, Graph):
                return graph_tool(found)
            if callable(found):
                return from_function(found)
        except UserError as exc:
            self.report(at, f"{text!r} cannot be a tool: {exc}")
            return None
        self.report(at, f"{text!r} is a {type(found).__name__}, not a function or tool",
                    "name a function (or a @tool)")
        return None

    def _mcp(self, name: str, at: KeyPath) -> MCPTools | None:
        """The tools of the file's MCP server ``name`` (one object per server)."""
        if name in self.servers:
            return self.servers[name]
        spec = self.spec.mcp.get(name)
        if spec is None:
            if name not in self.spec.mcp_names:  # else: its own problem is reported
                known = ", ".join(self.spec.mcp_names) or "none"
                self.report(at, f"no MCP server {name!r} in this file's mcp: section "
                            f"(declared: {known})", f"declare it: mcp: {{{name}: "
                            "{command: [...]}}")
            return None
        cwd = Path(spec.cwd) if spec.cwd is not None else self.folder
        cwd = cwd if cwd.is_absolute() else self.folder / cwd
        if spec.command and not _runnable(spec.command[0], cwd):
            # found now, before a run starts, not as the failure of the first agent using it
            self.report(("mcp", name, "command"), f"MCP server {name!r}: command "
                        f"{spec.command[0]!r} is not found on PATH, nor as a file",
                        "install it, or give its path (relative to the server's cwd)")
            return None
        try:
            tools = mcp_tools(command=spec.command, url=spec.url, name=name,
                              include=spec.include, exclude=spec.exclude, prefix=spec.prefix,
                              read_only=spec.read_only, env=spec.env,
                              cwd=str(cwd),
                              start_timeout=spec.start_timeout,
                              call_timeout=spec.call_timeout)
        except UserError as exc:
            self.report(("mcp", name), str(exc))
            return None
        self.servers[name] = tools
        return tools

    def _python(self, text: str, at: KeyPath) -> Any:
        try:
            return resolve(text, self.folder)
        except ImportProblem as exc:
            if not exc.where:
                self.report(at, exc.message, exc.hint)
                return None
            # the mistake is in the Python file: its line first, then who names it
            self.problems.append(Problem(where=exc.where, message=exc.message,
                                         hint=f"{exc.hint} ({self.doc.where(at)} names "
                                              f"{text!r})"))
            return None

    def _sub(self, step_id: str, relative: str) -> SubWorkflow | None:
        at: KeyPath = ("steps", step_id, "workflow")
        path = Path(relative)
        target = path if path.is_absolute() else self.doc.path.parent / path
        if not target.is_file():
            self.report(at, f"step {step_id!r}: no such workflow file {relative!r} (looked "
                        f"for {target})", "paths are relative to this workflow file")
            return None
        chain = (*self.stack, self.doc.path.resolve())
        if target.resolve() in chain:
            names = " -> ".join(p.name for p in (*chain[chain.index(target.resolve()):],
                                                  target.resolve()))
            self.report(at, f"step {step_id!r}: recursive inclusion: {names}",
                        "a workflow cannot include itself, directly or through others")
            return None
        try:
            return self.load_sub(target, chain)
        except WorkflowError as exc:
            self.problems.extend(exc.problems)
            self.report(at, f"step {step_id!r}: sub-workflow {relative!r} is invalid "
                        f"({len(exc.problems)} problem(s), listed with its file)")
            return None


def copy_agent(agent: Agent, model: ModelChoice | None, samples: int | None = None) -> Agent:
    """``agent`` with another model (a step's ``model:`` override) or number of samples
    (its ``samples:``)."""
    clone = Agent(agent.name, model=model, instructions=agent.instructions,
                  tools=(*agent.tools, *agent.toolsets), output=agent.output,
                  description=agent.description,
                  max_turns=agent.max_turns, max_tokens=agent.max_tokens,
                  turn_tokens=agent.turn_tokens, deadline=agent.deadline,
                  temperature=agent.temperature, budget=agent.budget,
                  samples=agent.samples if samples is None else samples)
    return clone


def _runnable(program: str, cwd: Path) -> bool:
    """Whether ``program`` can be started: on PATH, or a path (from ``cwd``) that exists."""
    if os.sep in program:
        return (cwd / program).exists()
    return shutil.which(program, path=os.environ.get("PATH")) is not None
