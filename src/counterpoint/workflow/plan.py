"""Checking a parsed workflow and resolving everything it names, before a graph is built.

:func:`plan_workflow` walks the validated spec once and collects every problem
(unknown steps, agents and inputs with the closest match, bad templates and
conditions, references out of place, cycles, Python references that do not
resolve, sub-workflows missing or included recursively) together with its
``file:line``. If there is none it returns a :class:`WorkflowPlan`: templates
parsed, agents built (model overrides applied), functions imported, sub-workflows
loaded, ready for :mod:`.compile` to turn into a graph.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agents import Agent, Tool, graph_tool
from ..agents.agent import DEFAULT_TURN_TOKENS
from ..agents.tools import from_function
from ..errors import ConfigError, UserError
from ..graph import Graph, find_cycle
from ..ids import NodeId
from ..models import Model, ModelRegistry, Provider, load_registry
from .conditions import Condition, parse_condition
from .errors import Problem, WorkflowError
from .imports import ImportProblem, resolve
from .inputs import InputProblem, convert
from .schemas import SchemaProblem, model_from_spec
from .spec import KINDS, AgentSpec, InputSpec, StepSpec, WorkflowSpec
from .templates import Ref, Template, TemplateSyntaxError, parse_template
from .yamlsource import KeyPath, YamlDocument

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
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


@dataclass(frozen=True, kw_only=True, slots=True)
class StepPlan:
    """One step, checked and resolved."""

    id: str
    where: str
    kind: str
    """``agent``, ``tool``, ``python``, ``workflow`` or ``first_of``."""
    agent: Agent | None = None
    task: Template | None = None
    context: Template | tuple[tuple[str, Template], ...] | None = None
    tool: Tool | None = None
    fn: Callable[..., Any] | None = None
    args: Any = None
    """``args`` (tool, python) or ``inputs`` (workflow), with templates parsed."""
    sub: SubWorkflow | None = None
    first_of: tuple[str, ...] = ()
    """The candidate steps of a ``first_of`` step, in the order written."""
    refs: tuple[Ref, ...] = ()
    """References the body reads (task, context, args, inputs): the node's inputs."""
    needs: tuple[str, ...] = ()
    map: Ref | None = None
    when: Condition | None = None
    loop_max: int | None = None
    until: Condition | None = None
    retries: int | None = None
    timeout: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkflowPlan:
    """A workflow ready to compile."""

    name: str
    description: str
    path: Path
    folder: Path
    """The workflow file's folder, resolved (``${workflow.dir}``, relative references)."""
    inputs: Mapping[str, InputSpec]
    input_lines: Mapping[str, str]
    """Input name -> ``file:line`` where it is declared."""
    steps: Mapping[str, StepPlan]
    output: tuple[str, str, tuple[str | int, ...]] | None
    """``(step id, "output" | "iterations", path)`` of the workflow's output, if named."""

    @property
    def loop_steps(self) -> frozenset[str]:
        return frozenset(s.id for s in self.steps.values() if s.loop_max is not None)


@dataclass(kw_only=True, slots=True)
class _Use:
    """A reference in a step, where it was written and in which role."""

    ref: Ref
    at: KeyPath
    role: str
    """``body``, ``map``, ``when`` or ``until``."""


@dataclass(kw_only=True, slots=True)
class _Planner:
    doc: YamlDocument
    spec: WorkflowSpec
    models: Mapping[str, ModelChoice]
    load_sub: SubLoader
    stack: tuple[Path, ...]
    problems: list[Problem] = field(default_factory=list)
    agents: dict[str, Agent] = field(default_factory=dict)
    deps: dict[str, set[str]] = field(default_factory=dict)
    _registry: ModelRegistry | bool | None = None

    @property
    def folder(self) -> Path:
        return self.doc.path.resolve().parent

    def report(self, at: KeyPath, message: str, hint: str = "") -> None:
        self.problems.append(self.doc.problem(at, message, hint))

    # ------------------------------------------------------------------- whole file
    def run(self) -> WorkflowPlan:
        spec = self.spec
        for kind, names in (("input", spec.input_names), ("agent", spec.agent_names),
                            ("step", spec.step_ids)):
            for name in names:
                if not NAME.fullmatch(name):
                    self.report((f"{kind}s", name), f"{kind} name {name!r} is not allowed",
                                "use letters, digits, _ and - (not starting with a digit "
                                "or -)")
        for name, input_spec in spec.inputs.items():
            self._input(name, input_spec)
        for name, agent_spec in spec.agents.items():
            self._agent(name, agent_spec)
        steps: dict[str, StepPlan] = {}
        for step_id, step_spec in spec.steps.items():
            planned = self._step(step_id, step_spec)
            if planned is not None:
                steps[step_id] = planned
        self._cycles()
        output = self._output()
        if self.problems:
            self.problems.sort(key=Problem.order)
            raise WorkflowError(self.problems, file=str(self.doc.path))
        return WorkflowPlan(
            name=spec.name, description=spec.description, path=self.doc.path,
            folder=self.folder, inputs=dict(spec.inputs),
            input_lines={n: self.doc.where(("inputs", n)) for n in spec.inputs},
            steps=steps, output=output)

    def _input(self, name: str, spec: InputSpec) -> None:
        if spec.required or spec.default is None:
            return
        try:
            convert(spec.type, spec.default)
        except InputProblem as exc:
            self.report(("inputs", name, "default"), f"input {name!r}: default {exc}",
                        f"give a default of type {spec.type}, or remove it to make the input "
                        "required")

    def _cycles(self) -> None:
        cycle = find_cycle({NodeId(k): [NodeId(d) for d in sorted(v)]
                            for k, v in self.deps.items()})
        if cycle:
            self.report(("steps", cycle[0]), f"steps form a cycle: {' -> '.join(cycle)}",
                        "remove one of these references or needs")

    def _output(self) -> tuple[str, str, tuple[str | int, ...]] | None:
        text = self.spec.output
        if text is None:
            return None
        at: KeyPath = ("output",)
        if NAME.fullmatch(text):
            if text not in self.spec.step_ids:
                self.report(at, f"output names unknown step {text!r}",
                            _closest(text, self.spec.step_ids, "steps"))
                return None
            return text, "output", ()
        template = self._template(text, at)
        ref = template.single if template is not None else None
        if template is not None and (ref is None or ref.root != "steps"):
            self.report(at, f"output {text!r} must name one step",
                        "write output: STEP_ID or output: ${steps.ID.output.path}")
            return None
        if ref is None:
            return None
        if ref.name not in self.spec.step_ids:
            self.report(at, f"output refers to unknown step {ref.name!r}",
                        _closest(ref.name, self.spec.step_ids, "steps"))
            return None
        step = self.spec.steps.get(ref.name)
        if ref.field == "iterations" and step is not None and step.loop is None:
            self.report(at, f"output: step {ref.name!r} has no loop, so no iterations",
                        f"write ${{steps.{ref.name}.output}}")
            return None
        return ref.name, ref.field, ref.path

    # ------------------------------------------------------------------- agents
    def _agent(self, name: str, spec: AgentSpec) -> None:
        at: KeyPath = ("agents", name)
        tools: list[Tool] = []
        for index, text in enumerate(spec.tools):
            found = self._tool(text, (*at, "tools", index))
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
                          deadline=spec.deadline, temperature=spec.temperature)
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
        if registry is not None:
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

    def _python(self, text: str, at: KeyPath) -> Any:
        try:
            return resolve(text, self.folder)
        except ImportProblem as exc:
            self.report(at, exc.message, exc.hint)
            return None

    # ------------------------------------------------------------------- steps
    def _step(self, step_id: str, spec: StepSpec) -> StepPlan | None:
        """The step's plan (``None`` if it is too broken to say); problems are reported."""
        at: KeyPath = ("steps", step_id)
        kinds = [k for k in KINDS if getattr(spec, k) is not None]
        self.deps[step_id] = set()
        if not kinds:
            self.report(at, f"step {step_id!r} does not say what to run",
                        "give it one of agent:, tool:, python:, workflow: or first_of:")
            return None
        if len(kinds) > 1:
            self.report((*at, kinds[1]), f"step {step_id!r} has both {kinds[0]}: and "
                        f"{kinds[1]}:", "a step runs one thing; split it into two steps")
            return None
        kind = kinds[0]
        self._misplaced(step_id, spec, kind)
        uses: list[_Use] = []
        plan: dict[str, Any] = {}
        if kind == "agent":
            plan.update(self._agent_body(step_id, spec, uses))
        elif kind == "tool" and spec.tool is not None:
            plan["tool"] = self._tool(spec.tool, (*at, "tool"))
            plan["args"] = self._nested(spec.args, (*at, "args"), uses)
            if plan["tool"] is not None:
                self._check_tool_args(step_id, plan["tool"], spec.args)
        elif kind == "python" and spec.python is not None:
            fn = self._python(spec.python, (*at, "python"))
            if fn is not None and not callable(fn):
                self.report((*at, "python"), f"{spec.python!r} is not callable",
                            "name a function")
                fn = None
            plan["fn"] = fn
            plan["args"] = self._nested(spec.args, (*at, "args"), uses)
            if fn is not None:
                self._check_call_args(step_id, fn, spec.args)
        elif kind == "workflow" and spec.workflow is not None:
            plan["sub"] = self._sub(step_id, spec.workflow)
            plan["args"] = self._nested(spec.inputs, (*at, "inputs"), uses)
            if plan["sub"] is not None:
                self._check_sub_inputs(step_id, plan["sub"], spec.inputs)
        elif kind == "first_of" and spec.first_of is not None:
            plan["first_of"] = self._first_of(step_id, spec.first_of)
        body = [u.ref for u in uses]
        plan["map"] = self._map(step_id, spec, kind, uses)
        if spec.when is not None:
            plan["when"] = self._condition(spec.when, (*at, "when"), "when", uses)
        if spec.loop is not None:
            if kind == "workflow":
                self.report((*at, "loop"), f"step {step_id!r}: a workflow step cannot loop",
                            "put the loop on a step inside the sub-workflow")
            elif kind == "first_of":
                self.report((*at, "loop"), f"step {step_id!r}: a first_of step cannot loop",
                            "loop in the steps it joins")
            if spec.loop.until is not None:
                plan["until"] = self._condition(spec.loop.until, (*at, "loop", "until"),
                                                "until", uses, self_id=step_id)
            plan["loop_max"] = spec.loop.max
        for need in spec.needs:
            self._need(step_id, need)
        for use in uses:
            self._check_ref(step_id, spec, use)
        return StepPlan(id=step_id, where=self.doc.where(at), kind=kind, refs=tuple(body),
                        needs=tuple(spec.needs), retries=spec.retries, timeout=spec.timeout,
                        **plan)

    def _misplaced(self, step_id: str, spec: StepSpec, kind: str) -> None:
        at: KeyPath = ("steps", step_id)
        rules = (("task", ("agent",), spec.task is not None),
                 ("context", ("agent",), spec.context is not None),
                 ("model", ("agent",), spec.model is not None),
                 ("args", ("tool", "python"), bool(spec.args)),
                 ("inputs", ("workflow",), bool(spec.inputs)),
                 ("retries", KINDS[:4], spec.retries is not None),
                 ("timeout", KINDS[:4], spec.timeout is not None))
        for key, kinds, given in rules:
            if given and kind not in kinds:
                names = [f"{k}:" for k in kinds]
                where = names[0] if len(names) == 1 else \
                    f"{', '.join(names[:-1])} and {names[-1]}"
                self.report((*at, key), f"step {step_id!r}: {key}: applies to {where} "
                            f"steps, not {kind}:", _misplaced_hint(key, kind))
        if kind == "agent" and spec.task is None:
            self.report(at, f"step {step_id!r}: an agent step needs a task",
                        "add task: \"what the agent should do\"")

    def _agent_body(self, step_id: str, spec: StepSpec, uses: list[_Use]) -> dict[str, Any]:
        at: KeyPath = ("steps", step_id)
        assert spec.agent is not None
        agent = self.agents.get(spec.agent)
        if agent is None and spec.agent not in self.spec.agent_names:
            self.report((*at, "agent"), f"step {step_id!r}: unknown agent {spec.agent!r}",
                        _closest(spec.agent, self.spec.agent_names, "agents"))
        if agent is not None and spec.model is not None:
            agent = copy_agent(agent, self._model(spec.model, (*at, "model")))
        task = self._template(spec.task, (*at, "task"), uses) if spec.task is not None \
            else None
        context: Template | tuple[tuple[str, Template], ...] | None = None
        if isinstance(spec.context, str):
            context = self._template(spec.context, (*at, "context"), uses)
        elif isinstance(spec.context, list):
            entries: list[tuple[str, Template]] = []
            for index, text in enumerate(spec.context):
                entry = self._context_entry(text, (*at, "context", index), uses)
                if entry is not None:
                    entries.append(entry)
            context = tuple(entries)
        return {"agent": agent, "task": task, "context": context}

    def _context_entry(self, text: str, at: KeyPath,
                       uses: list[_Use]) -> tuple[str, Template] | None:
        if NAME.fullmatch(text):  # a bare step id
            ref = Ref("steps", text, "output", (), f"steps.{text}.output")
            uses.append(_Use(ref=ref, at=at, role="body"))
            return text, Template(parts=(ref,), source=f"${{{ref.text}}}")
        template = self._template(text, at, uses)
        if template is None:
            return None
        single = template.single
        key = single.name if single is not None and single.root == "steps" and \
            not single.path else (single.text if single is not None else text)
        return key, template

    def _template(self, text: str, at: KeyPath,
                  uses: list[_Use] | None = None, role: str = "body") -> Template | None:
        try:
            template = parse_template(text)
        except TemplateSyntaxError as exc:
            self.report(at, f"bad template: {exc.message}", exc.hint)
            return None
        if uses is not None:
            uses.extend(_Use(ref=r, at=at, role=role) for r in template.refs)
        return template

    def _nested(self, value: Any, at: KeyPath, uses: list[_Use]) -> Any:
        if isinstance(value, str):
            if "${" not in value:
                return value
            return self._template(value, at, uses)
        if isinstance(value, Mapping):
            return {k: self._nested(v, (*at, k), uses) for k, v in value.items()}
        if isinstance(value, list):
            return [self._nested(v, (*at, i), uses) for i, v in enumerate(value)]
        return value

    def _condition(self, text: str, at: KeyPath, role: str, uses: list[_Use],
                   self_id: str | None = None) -> Condition | None:
        try:
            condition = parse_condition(text)
        except TemplateSyntaxError as exc:
            self.report(at, f"bad condition: {exc.message}", exc.hint)
            return None
        if self_id is not None:  # ${steps.SELF.output} in until is this iteration's output
            condition = Condition(source=condition.source, tree=condition.tree, refs={
                k: Ref("output", "", "", r.path, r.text)
                if r.root == "steps" and r.name == self_id and r.field == "output" else r
                for k, r in condition.refs.items()})
        uses.extend(_Use(ref=r, at=at, role=role) for r in condition.refs.values())
        return condition

    def _map(self, step_id: str, spec: StepSpec, kind: str, uses: list[_Use]) -> Ref | None:
        if spec.map is None:
            return None
        at: KeyPath = ("steps", step_id, "map")
        template = self._template(spec.map, at, uses, role="map")
        if template is None:
            return None
        single = template.single
        if single is None or single.root not in ("inputs", "steps"):
            self.report(at, f"step {step_id!r}: map must be one reference to a list, got "
                        f"{spec.map!r}", "write map: ${steps.ID.output} or "
                        "map: ${inputs.NAME}")
            return None
        if kind in ("workflow", "first_of"):
            self.report(at, f"step {step_id!r}: a {kind} step cannot be mapped",
                        "map an agent, tool or python step, or move the map into the "
                        "sub-workflow" if kind == "workflow" else
                        "map the steps it joins, or map over its output in a later step")
        if spec.loop is not None:
            self.report(("steps", step_id, "loop"), f"step {step_id!r}: map and loop "
                        "cannot be combined", "loop inside a sub-workflow, or map over a "
                        "loop step's output")
        return single

    def _first_of(self, step_id: str, names: list[str]) -> tuple[str, ...]:
        """The candidates of a ``first_of`` step (problems reported)."""
        at: KeyPath = ("steps", step_id, "first_of")
        if len(names) < 2:
            self.report(at, f"step {step_id!r}: first_of needs at least two steps, got "
                        f"{len(names)}", "list the steps whose outputs it joins: "
                        "first_of: [then_step, else_step]")
        seen: list[str] = []
        for index, name in enumerate(names):
            where: KeyPath = (*at, index)
            if name == step_id:
                self.report(where, f"step {step_id!r}: first_of names the step itself",
                            "list other steps")
            elif name in seen:
                self.report(where, f"step {step_id!r}: first_of names {name!r} twice",
                            "remove one")
            elif name not in self.spec.step_ids:
                hint = "write step ids, not templates: first_of: [a, b]" if "${" in name \
                    else _closest(name, self.spec.step_ids, "steps")
                self.report(where, f"step {step_id!r}: first_of names unknown step "
                            f"{name!r}", hint)
            else:
                self.deps[step_id].add(name)
                seen.append(name)
        return tuple(seen)

    def _need(self, step_id: str, need: str) -> None:
        at: KeyPath = ("steps", step_id, "needs")
        if need == step_id:
            self.report(at, f"step {step_id!r} needs itself", "remove it from needs")
        elif need not in self.spec.step_ids:
            self.report(at, f"step {step_id!r}: needs unknown step {need!r}",
                        _closest(need, self.spec.step_ids, "steps"))
        else:
            self.deps[step_id].add(need)

    def _check_ref(self, step_id: str, spec: StepSpec, use: _Use) -> None:
        ref, at, role = use.ref, use.at, use.role
        label = f"step {step_id!r}: ${{{ref.text}}}"
        if ref.root == "inputs" and ref.name not in self.spec.input_names:
            self.report(at, f"{label}: unknown input {ref.name!r}",
                        _closest(ref.name, self.spec.input_names, "inputs") +
                        ("" if self.spec.input_names else "; declare it under inputs:"))
        elif ref.root == "steps":
            if ref.name == step_id:
                self.report(at, f"{label}: a step cannot read its own output",
                            "in a loop step use ${loop.previous}; in loop.until use ${output}")
            elif ref.name not in self.spec.step_ids:
                self.report(at, f"{label}: unknown step {ref.name!r}",
                            _closest(ref.name, self.spec.step_ids, "steps"))
            else:
                self.deps[step_id].add(ref.name)
                other = self.spec.steps.get(ref.name)
                if ref.field == "iterations" and other is not None and other.loop is None:
                    self.report(at, f"{label}: step {ref.name!r} has no loop, so no "
                                "iterations", f"write ${{steps.{ref.name}.output}}")
        elif ref.root == "item" and (spec.map is None or role in ("when", "map")):
            self.report(at, f"{label}: ${{item}} exists only in the body of a map step",
                        "add map: ${steps.ID.output} to this step" if spec.map is None
                        else "when: is evaluated once, before the map; filter the list in "
                        "an earlier step instead")
        elif ref.root == "loop" and (spec.loop is None or role in ("when", "map")):
            self.report(at, f"{label}: ${{loop...}} exists only in a loop step's body and "
                        "until", "add loop: {max: N, until: ...} to this step")
        elif ref.root == "output" and role != "until":
            self.report(at, f"{label}: ${{output}} exists only in loop.until",
                        "write ${steps.ID.output}")

    def _check_tool_args(self, step_id: str, tool: Tool, args: Mapping[str, Any]) -> None:
        props = tool.parameters.get("properties", {})
        required = tool.parameters.get("required", [])
        self._check_names(step_id, f"tool {tool.name}", list(props), required, args)

    def _check_call_args(self, step_id: str, fn: Callable[..., Any],
                         args: Mapping[str, Any]) -> None:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            return
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return
        names = [n for n, p in params.items()
                 if p.kind not in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY)]
        required = [n for n in names if params[n].default is params[n].empty]
        self._check_names(step_id, getattr(fn, "__qualname__", "the function"), names,
                          required, args)

    def _check_names(self, step_id: str, what: str, names: list[str], required: Iterable[str],
                     args: Mapping[str, Any]) -> None:
        at: KeyPath = ("steps", step_id, "args")
        for name in args:
            if name not in names:
                self.report((*at, name), f"step {step_id!r}: {what} has no parameter "
                            f"{name!r}", _closest(name, names, "parameters"))
        missing = [n for n in required if n not in args]
        if missing:
            self.report(at if args else ("steps", step_id), f"step {step_id!r}: {what} "
                        f"needs {', '.join(map(repr, missing))}",
                        f"add args: {{{missing[0]}: ...}}")

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

    def _check_sub_inputs(self, step_id: str, sub: SubWorkflow,
                          given: Mapping[str, Any]) -> None:
        at: KeyPath = ("steps", step_id, "inputs")
        for name in given:
            if name not in sub.inputs:
                self.report((*at, name), f"step {step_id!r}: sub-workflow {sub.name!r} has no "
                            f"input {name!r}", _closest(name, list(sub.inputs), "inputs"))
        for name, spec in sub.inputs.items():
            if spec.required and name not in given:
                self.report(at if given else ("steps", step_id),
                            f"step {step_id!r}: sub-workflow {sub.name!r} needs input "
                            f"{name!r}", f"add inputs: {{{name}: ...}}")


def copy_agent(agent: Agent, model: ModelChoice | None) -> Agent:
    """``agent`` with another model (a step's ``model:`` override)."""
    clone = Agent(agent.name, model=model, instructions=agent.instructions,
                  tools=agent.tools, output=agent.output, description=agent.description,
                  max_turns=agent.max_turns, max_tokens=agent.max_tokens,
                  turn_tokens=agent.turn_tokens, deadline=agent.deadline,
                  temperature=agent.temperature)
    return clone


def _closest(word: str, known: Iterable[str], what: str) -> str:
    names = sorted(known)
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    listed = f"{what}: {', '.join(names)}" if names else f"no {what} are declared"
    return f"did you mean {close[0]!r}? ({listed})" if close else listed


def _misplaced_hint(key: str, kind: str) -> str:
    if kind == "first_of":
        return "a first_of step only passes on the output of a step it names; put " \
               f"{key}: on those steps"
    return {"task": "tool and python steps take args:",
            "context": "pass values to tools and functions through args:",
            "model": "set the model on the agent (or on this agent step)",
            "args": "pass values to an agent through task: or context:, to a sub-workflow "
                    "through inputs:",
            "inputs": "pass values through args: (tool, python) or task:/context: (agent)",
            }.get(key, "remove it")


def plan_workflow(doc: YamlDocument, spec: WorkflowSpec, *, models: Mapping[str, ModelChoice],
                  load_sub: SubLoader, stack: tuple[Path, ...]) -> WorkflowPlan:
    """Check ``spec`` (read from ``doc``) and resolve it; raises :class:`WorkflowError`
    listing every problem found."""
    return _Planner(doc=doc, spec=spec, models=models, load_sub=load_sub, stack=stack).run()
