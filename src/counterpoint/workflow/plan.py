"""Reading a parsed workflow into a plan: every step checked and resolved, before a graph.

:func:`plan_workflow` walks the validated spec once and collects every problem
(unknown steps, agents and inputs with the closest match, bad templates and
conditions, references out of place, cycles, Python references that do not
resolve, sub-workflows missing or included recursively) together with its
``file:line``. If there is none it returns a :class:`WorkflowPlan`: templates
parsed, agents built (model overrides applied), functions imported, sub-workflows
loaded, ready for :mod:`.compile` to turn into a graph. The planner reads the spec here
(inputs, steps, templates, conditions, the output); finding what the file names is in
:mod:`.resolver`, and the checks of what steps refer to are in :mod:`.checks`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agents import Agent, Tool
from ..budget import Budget
from ..errors import ConfigError
from ..models import Model, ModelRegistry
from .checks import _Checks, _closest, _Use
from .conditions import Condition, parse_condition
from .errors import Problem, WorkflowError
from .health_names import check_health_names
from .inputs import InputProblem, convert
from .resolver import ModelChoice, SubLoader, SubWorkflow, copy_agent
from .routes import check_models, merged, routed
from .spec import KINDS, InputSpec, StepSpec, WorkflowSpec
from .templates import Ref, Template, TemplateSyntaxError, parse_template
from .yamlsource import KeyPath, YamlDocument

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


@dataclass(frozen=True, kw_only=True, slots=True)
class StepPlan:
    """One step, checked and resolved."""

    id: str
    where: str
    kind: str
    """``agent``, ``tool``, ``python``, ``workflow`` or ``first_of``."""
    agent: Agent | None = None
    model_where: str | None = None
    """``file:line`` of the ``model:`` that chose the agent's model (the step's, its
    agent's or the workflow's); ``None`` when an override chose it."""
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
    budget: Budget | None = None


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
    budget: Budget | None = None
    deadline: float | None = None

    @property
    def loop_steps(self) -> frozenset[str]:
        return frozenset(s.id for s in self.steps.values() if s.loop_max is not None)


class _Planner(_Checks):
    """Reads a workflow's spec into a :class:`WorkflowPlan`, step by step (the layers below
    resolve names and check references)."""

    __slots__ = ()

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
        routes = [(("route",), spec.route)] + [(("steps", i, "route"), s.route)
                                                for i, s in spec.steps.items()]
        for at, route in routes:
            if route is not None and route.models:
                check_models(route, at, self._route_registry(), self.report)
        steps: dict[str, StepPlan] = {}
        for step_id, step_spec in spec.steps.items():
            planned = self._step(step_id, step_spec)
            if planned is not None:
                steps[step_id] = planned
        self._cycles()
        check_health_names(spec, overrides=self.models, registry=self._registry_or_none(),
                           tools=[t for a in self.agents.values() for t in a.tools],
                           report=self.report)
        output = self._output()
        if self.problems:
            self.problems.sort(key=Problem.order)
            raise WorkflowError(self.problems, file=str(self.doc.path))
        return WorkflowPlan(
            name=spec.name, description=spec.description, path=self.doc.path,
            folder=self.folder, inputs=dict(spec.inputs),
            input_lines={n: self.doc.where(("inputs", n)) for n in spec.inputs},
            steps=steps, output=output, budget=spec.budget, deadline=spec.deadline)

    def _route_registry(self) -> ModelRegistry | None:
        """The models ``auto`` routes to: an override's registry, else the configuration's."""
        found = self.models.get("auto") or self.models.get("*")
        if isinstance(found, Model):
            try:
                return found.registry
            except ConfigError:
                return None
        return self._registry_or_none()

    def _input(self, name: str, spec: InputSpec) -> None:
        if spec.required or spec.default is None:
            return
        try:
            convert(spec.type, spec.default)
        except InputProblem as exc:
            self.report(("inputs", name, "default"), f"input {name!r}: default {exc}",
                        f"give a default of type {spec.type}, or remove it to make the input "
                        "required")

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
                        needs=tuple(spec.needs), retries=spec.retries,
                        timeout=min((t for t in (spec.timeout, spec.deadline) if t is not None),
                                    default=None),
                        budget=spec.budget.budget() if spec.budget else None, **plan)

    def _agent_body(self, step_id: str, spec: StepSpec, uses: list[_Use]) -> dict[str, Any]:
        at: KeyPath = ("steps", step_id)
        assert spec.agent is not None
        agent = self.agents.get(spec.agent)
        if agent is None and spec.agent not in self.spec.agent_names:
            self.report((*at, "agent"), f"step {step_id!r}: unknown agent {spec.agent!r}",
                        _closest(spec.agent, self.spec.agent_names, "agents"))
        if agent is not None and spec.model is not None:
            agent = copy_agent(agent, self._model(spec.model, (*at, "model")))
        if agent is not None and spec.samples is not None:
            agent = copy_agent(agent, agent.model, spec.samples)
        route = merged(self.spec.route, spec.route)
        if agent is not None and route is not None:
            if agent.model.routed:
                agent = copy_agent(agent, routed(agent.model, route))
            elif spec.route is not None:
                self.report((*at, "route"), f"step {step_id!r}: route: applies to model: "
                            f"auto, and its agent {spec.agent!r} uses {agent.model.name!r}",
                            "set model: auto on the step or its agent, or remove route:")
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
        return {"agent": agent, "task": task, "context": context,
                "model_where": self._model_where(spec, at)}

    def _model_where(self, spec: StepSpec, at: KeyPath) -> str | None:
        """Where the model of agent step ``spec`` (at ``at``) is named, if in this file."""
        named, at = spec.model, (*at, "model")
        if named is None:
            agent = self.spec.agents.get(spec.agent or "")
            named = agent.model if agent is not None else None
            at = ("agents", spec.agent or "", "model")
            if named is None:
                named, at = self.spec.model, ("model",)
        if named is None or named in self.models or "*" in self.models:
            return None  # an override chose it (load_workflow(models=...), --model)
        return self.doc.where(at)

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
        declared = self.spec.inputs.get(single.name) if single.root == "inputs" else None
        if declared is not None and not single.path and declared.type != "list":
            article = "an" if declared.type[0] in "aeiou" else "a"
            self.report(at, f"step {step_id!r}: map: {spec.map} is {article} {declared.type} "
                        f"input {single.name!r}, not a list; a map runs the step once per item "
                        "of a list", f"declare it with type: list (inputs: {single.name}: "
                        "{type: list}), or map over a step's output")
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


def plan_workflow(doc: YamlDocument, spec: WorkflowSpec, *, models: Mapping[str, ModelChoice],
                  load_sub: SubLoader, stack: tuple[Path, ...]) -> WorkflowPlan:
    """Check ``spec`` (read from ``doc``) and resolve it; raises :class:`WorkflowError`
    listing every problem found."""
    return _Planner(doc=doc, spec=spec, models=models, load_sub=load_sub, stack=stack).run()
