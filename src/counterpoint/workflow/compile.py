"""Turning a checked :class:`~.plan.WorkflowPlan` into a :class:`~counterpoint.graph.Graph`.

The graph is the one the Python API would build: one node per step (id = the
step id), ``g.map`` for ``map:``, a sub-graph node for ``workflow:``, data edges
from references and ordering edges from ``needs:``. A few helper nodes are
added where the graph API needs a node to hold a value, named after their step
with a dot (step ids cannot contain one):

* ``ID.when``: evaluates ``when:`` and chooses the step's first node or nothing
  (skipping the step);
* ``ID.items``: the list a map step maps over, when it is a workflow input;
* ``ID.inputs``: a sub-workflow's inputs, when some are longer templates;
* ``ID.1``: the first iteration of a ``loop:`` step; each iteration adds the next
  (``ID.2``, ...) while it runs, and node ``ID`` collects them (see :mod:`.steps`);
* ``ID.pick``: chooses which candidate of a ``first_of:`` step node ``ID`` outputs.

Nodes are added in file order and named deterministically, so the same file
always compiles to a graph with the same fingerprint (a run can be resumed with
a freshly loaded graph). Each node's ``where`` is the step's ``file:line``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ..graph import Graph, InputRef, NodeRef, ref
from ..ids import NodeId
from ..policy import Policy
from .inputs import PYTHON_TYPES, convert
from .plan import StepPlan, WorkflowPlan
from .steps import (
    ITEM,
    LOOP_FIRST,
    LOOP_INDEX,
    PICKED,
    AgentStep,
    FirstOf,
    FirstOfPick,
    Guard,
    Iteration,
    Loop,
    LoopRecord,
    PythonStep,
    Render,
    StepInfo,
    StepRunner,
    ToolStep,
    input_arg,
    iteration_node,
    step_arg,
)
from .templates import Ref, Template, nested_templates


def build_graph(plan: WorkflowPlan) -> Graph:
    """The graph of ``plan`` (see the module docstring)."""
    graph = Graph(plan.name)
    graph.budget, graph.deadline = plan.budget, plan.deadline
    for name, spec in plan.inputs.items():
        graph.input(name, PYTHON_TYPES[spec.type])
    loop_steps = plan.loop_steps
    for step in plan.steps.values():
        _Step(graph, plan, step, loop_steps).add()
    if plan.output is not None:
        step_id, field, path = plan.output
        graph.output(ref(step_id, *_path(step_id, field, path, loop_steps)))
    return graph


def _path(step_id: str, field: str, path: tuple[str | int, ...],
          loop_steps: frozenset[str]) -> tuple[str | int, ...]:
    """The index path into node ``step_id``'s output for ``steps.ID.FIELD.PATH``."""
    return (field, *path) if step_id in loop_steps else path


class _Step:
    """Adds one step's node(s) to the graph."""

    def __init__(self, graph: Graph, plan: WorkflowPlan, step: StepPlan,
                 loop_steps: frozenset[str]) -> None:
        self.graph = graph
        self.plan = plan
        self.step = step
        self.loop_steps = loop_steps
        self.info = StepInfo(label=f"{step.where}: step {step.id!r}",
                             qualname=f"{plan.name}.{step.id}", loop_steps=loop_steps,
                             workflow_dir=plan.folder, workflow_name=plan.name)

    def add(self) -> None:
        step = self.step
        after: list[str] = list(step.needs)
        if step.when is not None:
            guard = f"{step.id}.when"
            self._node(guard, Guard(self.info, step=self._entry(), condition=step.when),
                       _wiring(step.when.refs.values(), optional=True))
            after.append(guard)
        options: dict[str, Any] = {"after": after, "retries": step.retries,
                                   "timeout": step.timeout}
        if step.budget is not None:
            options["policy"] = Policy(budget=step.budget)
        if step.kind == "workflow":
            assert step.sub is not None
            self.graph.add(step.id, step.sub.graph, inputs=self._sub_inputs(), **options)
        elif step.kind == "first_of":
            self._first_of(after)
        elif step.map is not None:
            self.graph.map(step.id, self._runner(), over=self._over(step.map), item=ITEM,
                           inputs=_wiring(step.refs), **options)
        elif step.loop_max is not None:
            self._loop(step.loop_max, options)
        else:
            self.graph.add(step.id, self._runner(), inputs=_wiring(step.refs), **options)
        self._locate(step.id)

    def _entry(self) -> str:
        """The step's first node: the one its ``when`` guard chooses."""
        step = self.step
        if step.kind == "first_of":
            return f"{step.id}.pick"
        if step.loop_max is not None:
            return iteration_node(step.id, 1)
        return step.id

    def _loop(self, most: int, options: dict[str, Any]) -> None:
        step = self.step
        loop = Loop(max=most, until=step.until)
        # until may read steps and inputs too; like a when: condition, a skipped step
        # reads as null there (the body's own references, given last, stay required)
        until = _wiring(step.until.refs.values(), optional=True) if step.until else {}
        first = iteration_node(step.id, 1)
        self._node(first, Iteration(self._runner(), loop, step=step.id),
                   {**until, **_wiring(step.refs), LOOP_INDEX: 1}, **options)
        self.graph.add(step.id, LoopRecord(self.info, loop, step=step.id),
                       inputs={**until, LOOP_FIRST: ref(first)})

    def _first_of(self, after: list[str]) -> None:
        step = self.step
        pick = f"{step.id}.pick"
        self._node(pick, FirstOfPick(self.info, step=step.id, candidates=step.first_of),
                   {}, after=list(dict.fromkeys([*step.first_of, *after])))
        inputs: dict[str, Any] = {PICKED: ref(pick)}
        for candidate in step.first_of:
            path = ("output",) if candidate in self.loop_steps else ()
            inputs[step_arg(candidate)] = ref(candidate, *path).or_none()
        self.graph.add(step.id, FirstOf(self.info), inputs=inputs)

    def _runner(self) -> StepRunner:
        step = self.step
        if step.kind == "agent":
            assert step.agent is not None and step.task is not None
            return AgentStep(self.info, agent=step.agent, task=step.task,
                             context=step.context, model_where=step.model_where)
        if step.kind == "tool":
            assert step.tool is not None
            return ToolStep(self.info, tool=step.tool, args=step.args or {})
        assert step.fn is not None
        return PythonStep(self.info, fn=step.fn, args=step.args or {})

    def _over(self, over: Ref) -> NodeRef:
        if over.root == "steps":
            return ref(over.name, *_path(over.name, over.field, over.path, self.loop_steps))
        items = f"{self.step.id}.items"
        template = Template(parts=(over,), source=f"${{{over.text}}}")
        self._node(items, Render(self.info, value=template, role="items"), _wiring([over]))
        return ref(items)

    def _sub_inputs(self) -> dict[str, Any]:
        step = self.step
        assert step.sub is not None
        given: dict[str, Any] = step.args or {}
        inputs: dict[str, Any] = {}
        rendered: dict[str, Any] = {}
        for name, spec in step.sub.inputs.items():
            if name not in given:
                inputs[name] = None if spec.default is None else convert(spec.type,
                                                                         spec.default)
                continue
            value = given[name]
            direct = self._direct(value)
            if direct is not None:
                inputs[name] = direct
            elif any(True for _ in nested_templates(value)):
                rendered[name] = value
            else:
                inputs[name] = value
        if rendered:
            node = f"{step.id}.inputs"
            refs = [r for v in rendered.values() for t in nested_templates(v) for r in t.refs]
            self._node(node, Render(self.info, value=rendered, role="inputs"), _wiring(refs))
            for name in rendered:
                inputs[name] = ref(node, name)
        return inputs

    def _direct(self, value: Any) -> NodeRef | InputRef | None:
        """A graph reference for a template that is one plain reference, else ``None``."""
        single = value.single if isinstance(value, Template) else None
        if single is None:
            return None
        if single.root == "steps":
            return ref(single.name, *_path(single.name, single.field, single.path,
                                           self.loop_steps))
        if single.root == "inputs" and not single.path:
            return InputRef(single.name)
        return None

    def _node(self, node: str, fn: Any, inputs: dict[str, Any], **options: Any) -> None:
        self.graph.add(node, fn, inputs=inputs, **options)
        self._locate(node)

    def _locate(self, node: str) -> None:
        # Graph.add records the caller's line (this file); errors should name the YAML line
        spec = self.graph.nodes[NodeId(node)]
        self.graph.nodes[NodeId(node)] = replace(spec, where=self.step.where)


def _wiring(refs: Iterable[Ref], *, optional: bool = False) -> dict[str, Any]:
    """Node inputs carrying the values ``refs`` read (``optional``: skipped -> ``None``)."""
    inputs: dict[str, Any] = {}
    for r in refs:
        if r.root == "inputs":
            inputs[input_arg(r.name)] = InputRef(r.name)
        elif r.root == "steps":
            node = ref(r.name)
            inputs[step_arg(r.name)] = node.or_none() if optional else node
    return inputs
