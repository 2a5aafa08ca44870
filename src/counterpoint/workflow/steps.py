"""The callables a compiled workflow's nodes run.

Every step node receives the values its templates reference as keyword
arguments (``input:NAME`` for workflow inputs, ``step:ID`` for other steps'
outputs, ``item`` for a map's item), renders its templates from them, and runs
its agent, tool or Python function.

A step with ``loop`` runs each iteration in a node of its own, so that every
finished iteration's output is in the run's log the moment it finishes
(``node_succeeded`` of ``ID.1``, ``ID.2``, ...) and a run interrupted in the
middle of a loop re-runs only the iteration that was in flight. Of the two ways
to make an iteration durable, an event recorded through the step's context (and
read back with ``ctx.journal``) or a node per iteration, nodes are chosen: a node's
output is the log's own unit of durability, replayed on resume by the scheduler
with no reading back in the step; each iteration shows in ``counterpoint show``
with its status, attempts, duration and output; and ``retries``/``timeout``
apply per iteration, as an agent in an iteration gets its own journal. How:

* :class:`Iteration` (node ``ID.N``) runs the body once. If the loop goes on
  (``until`` does not hold and ``N < max``) it adds, in one live edit before it
  returns, node ``ID.N+1`` (reading ``ID.N``'s output as ``${loop.previous}``)
  and an ordering edge from it to ``ID``. If an interrupted attempt of ``ID.N``
  already made that edit (the process died after the edit, before ``ID.N``'s
  output was logged), the re-run keeps it: the recorded decision to go on
  stands.
* :class:`LoopRecord` (node ``ID``, read by ``${steps.ID...}``) runs once the last
  iteration has ended and outputs ``{"output": last, "iterations": [...],
  "stopped": "until" | "max"}``, reading the iterations' outputs from the run.

A step with ``when`` is preceded by a :class:`Guard` node that evaluates the
condition and chooses the step's first node (or nothing, which skips it and,
through data edges, whatever consumes its output). A ``first_of`` step is a
:class:`FirstOfPick` node that waits for its candidates and chooses the
:class:`FirstOf` node with the first candidate that succeeded (or nothing, so the
join is skipped when every candidate was).

Every callable here is async, holds only configuration, and may serve many
nodes and runs concurrently. A reference that cannot be resolved at run time,
or a condition that cannot be evaluated, fails the node (not retryable).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic

from ..agents import Agent, Tool
from ..context import NodeContext
from ..errors import NodeFailed
from ..graph import Choose, InputRef, ref
from ..ids import NodeId
from ..patch import Edit
from ..state import NodeStatus
from .conditions import Condition, ConditionError
from .templates import Ref, Template, TemplateError, follow, render_nested, to_text

ITEM = "item"
"""The node input that receives a map step's item."""


def input_arg(name: str) -> str:
    """The node input carrying workflow input ``name``."""
    return f"input:{name}"


def step_arg(step: str) -> str:
    """The node input carrying step ``step``'s output."""
    return f"step:{step}"


LOOP_INDEX = "loop:index"
"""The literal input of an iteration node: its number, from 1."""
LOOP_PREVIOUS = "loop:previous"
"""The input of iteration ``N > 1``: iteration ``N - 1``'s output."""
LOOP_FIRST = "loop:first"
"""The input of a loop's record node from the first iteration: a data edge, so that a
loop skipped by ``when`` (its first iteration skipped) is skipped as a whole."""
PICKED = "picked"
"""The input of a ``first_of`` node: the id of the candidate its pick node chose."""


def iteration_node(step: str, index: int) -> str:
    """The node of iteration ``index`` (from 1) of loop step ``step``."""
    return f"{step}.{index}"


@dataclass(frozen=True, kw_only=True, slots=True)
class StepInfo:
    """What every callable of one step knows about where it sits."""

    label: str
    """``file:line: step 'ID'``, the prefix of its failure messages."""
    qualname: str
    """Names the step in duration estimates and in the graph's fingerprint."""
    loop_steps: frozenset[str]
    """Steps of the same workflow whose output is a loop record."""
    workflow_dir: Path
    workflow_name: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Loop:
    """A step's bound: at most ``max`` iterations, stopping early once ``until`` holds."""

    max: int
    until: Condition | None


class Scope:
    """The values a step's templates and conditions can read during one call."""

    def __init__(self, info: StepInfo, values: Mapping[str, Any], *,
                 lenient: bool = False) -> None:
        self.info = info
        self.values = values
        self.lenient = lenient
        """Conditions read a path through a skipped (``None``) value as ``None``."""
        self.index = 0
        self.previous: Any = None
        self.current: Any = None

    def resolve(self, ref: Ref) -> Any:
        """The value ``ref`` names; raises :class:`TemplateError`."""
        what = f"${{{ref.text}}}"
        if ref.root == "inputs":
            value = self.values[input_arg(ref.name)]
        elif ref.root == "steps":
            value = self.values[step_arg(ref.name)]
            if ref.name in self.info.loop_steps and value is not None:
                value = value[ref.field]
        elif ref.root == "item":
            value = self.values[ITEM]
        elif ref.root == "loop":
            value = self.index if ref.name == "index" else self.previous
        elif ref.root == "output":
            value = self.current
        else:  # workflow
            return str(self.info.workflow_dir) if ref.name == "dir" \
                else self.info.workflow_name
        return follow(value, ref.path, what=what, lenient=self.lenient)


class StepRunner:
    """Base of the step callables: render, run the body once, report failures."""

    def __init__(self, info: StepInfo) -> None:
        self.info = info
        self.__qualname__ = info.qualname

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info.qualname!r})"

    async def __call__(self, **values: Any) -> Any:
        try:
            return await self.once(Scope(self.info, values))
        except (TemplateError, ConditionError) as exc:
            raise NodeFailed(f"{self.info.label}: {exc}", retryable=False) from None

    async def once(self, scope: Scope) -> Any:
        """One run of the step's body (one iteration of a loop)."""
        raise NotImplementedError


class Iteration:
    """Node ``ID.N`` of a loop step: one run of ``body``, then, if the loop goes on, the
    live edit that adds iteration ``N + 1`` (see the module docstring)."""

    def __init__(self, body: StepRunner, loop: Loop, *, step: str) -> None:
        self.body = body
        self.info = body.info
        self.loop = loop
        self.step = step
        self.__qualname__ = body.info.qualname  # durations are learned per step

    def __repr__(self) -> str:
        return f"Iteration({self.__qualname__!r})"

    async def __call__(self, ctx: NodeContext, **values: Any) -> Any:
        index = int(values[LOOP_INDEX])
        scope = Scope(self.info, values)
        scope.index = index
        scope.previous = values.get(LOOP_PREVIOUS)
        try:
            output = await self.body.once(scope)
            go_on = index < self.loop.max and not _holds(self.loop.until, scope, output)
        except (TemplateError, ConditionError) as exc:
            raise NodeFailed(f"{self.info.label}: iteration {index}: {exc}",
                             retryable=False) from None
        if go_on:
            self._next(ctx, index, values)
        return output

    def _next(self, ctx: NodeContext, index: int, values: Mapping[str, Any]) -> None:
        after = NodeId(iteration_node(self.step, index + 1))
        nodes = ctx.state.nodes
        if after in nodes:
            return  # an interrupted attempt of this node made the edit: it stands
        spec = nodes[ctx.node].spec
        # a live edit cannot add a node that reads a graph input (Edit.build checks the
        # new node against a graph that declares none), so the next iteration gets the
        # input's value, as this one received it
        inputs = {name: values[name] if isinstance(value, InputRef) else value
                  for name, value in spec.inputs.items()}
        edit = Edit(f"loop {self.step!r}: iteration {index + 1} of at most {self.loop.max}")
        edit.add(after, spec.fn, policy=spec.policy,
                 inputs={**inputs, LOOP_INDEX: index + 1, LOOP_PREVIOUS: ref(ctx.node)})
        edit.edge(after, self.step)
        ctx.apply(edit)


class LoopRecord:
    """Node ``ID`` of a loop step: after the last iteration, ``{"output", "iterations",
    "stopped"}`` from the iterations' outputs (in the run's state, as a map's join reads
    its items'). Its inputs are the values ``until`` reads, to tell why the loop
    stopped."""

    def __init__(self, info: StepInfo, loop: Loop, *, step: str) -> None:
        self.info = info
        self.loop = loop
        self.step = step
        self.__qualname__ = f"{info.qualname}.loop"

    def __repr__(self) -> str:
        return f"LoopRecord({self.__qualname__!r})"

    async def __call__(self, ctx: NodeContext, **values: Any) -> dict[str, Any]:
        nodes = ctx.state.nodes
        iterations: list[Any] = []
        # every iteration node is a dependency of this one, so all have succeeded
        while (found := nodes.get(NodeId(iteration_node(self.step,
                                                         len(iterations) + 1)))) is not None:
            iterations.append(found.output)
        scope = Scope(self.info, values)
        scope.index = len(iterations)
        scope.previous = iterations[-2] if len(iterations) > 1 else None
        try:
            held = _holds(self.loop.until, scope, iterations[-1])
        except (TemplateError, ConditionError) as exc:
            raise NodeFailed(f"{self.info.label}: until: {exc}", retryable=False) from None
        return {"output": iterations[-1], "iterations": iterations,
                "stopped": "until" if held else "max"}


def _holds(until: Condition | None, scope: Scope, output: Any) -> bool:
    """Whether ``until`` holds for an iteration that gave ``output`` (``scope`` holds its
    index and the previous iteration's output)."""
    if until is None:
        return False
    scope.current = output
    scope.lenient = True
    try:
        return until.evaluate(scope.resolve)
    finally:
        scope.lenient = False


class AgentStep(StepRunner):
    """Runs an agent on a rendered task and context."""

    def __init__(self, info: StepInfo, *, agent: Agent, task: Template,
                 context: Template | tuple[tuple[str, Template], ...] | None,
                 model_where: str | None = None) -> None:
        super().__init__(info)
        self.agent = agent
        self.task = task
        self.context = context
        self.model_where = model_where
        """``file:line`` of the ``model:`` that named the agent's model (for messages)."""

    async def once(self, scope: Scope) -> Any:
        task = to_text(self.task.render(scope.resolve))
        context: Any = None
        if isinstance(self.context, Template):
            context = self.context.render(scope.resolve)
        elif self.context is not None:
            context = {key: t.render(scope.resolve) for key, t in self.context}
        return await self.agent(task, context)


class ToolStep(StepRunner):
    """Calls a tool with rendered arguments (validated against its schema)."""

    def __init__(self, info: StepInfo, *, tool: Tool, args: Any) -> None:
        super().__init__(info)
        self.tool = tool
        self.args = args

    async def once(self, scope: Scope) -> Any:
        return _jsonable(await self.tool.call(render_nested(self.args, scope.resolve)))


class PythonStep(StepRunner):
    """Calls a Python function with rendered keyword arguments (sync ones in a thread)."""

    def __init__(self, info: StepInfo, *, fn: Callable[..., Any], args: Any) -> None:
        super().__init__(info)
        self.fn = fn
        self.args = args
        self._async = inspect.iscoroutinefunction(fn)

    async def once(self, scope: Scope) -> Any:
        args = render_nested(self.args, scope.resolve)
        if self._async:
            result = await self.fn(**args)
        else:
            result = await asyncio.to_thread(self.fn, **args)
            if inspect.isawaitable(result):
                result = await result
        return _jsonable(result)


class Render(StepRunner):
    """Outputs a rendered value: the items of a map over an input, a sub-workflow's
    inputs."""

    def __init__(self, info: StepInfo, *, value: Any, role: str) -> None:
        super().__init__(info)
        self.value = value
        self.role = role
        self.__qualname__ = f"{info.qualname}.{role}"  # its own duration estimate

    async def once(self, scope: Scope) -> Any:
        rendered = render_nested(self.value, scope.resolve)
        if self.role == "items" and not isinstance(rendered, list):
            # said here in the file's words: the map node would say "over=ref['key']"
            source = self.value.source if isinstance(self.value, Template) else "its value"
            raise NodeFailed(f"{self.info.label}: map: {source} is {yaml_kind(rendered)}, "
                             "not a list; a map runs the step once per item of a list, so "
                             "pass a list there", retryable=False)
        return rendered


def yaml_kind(value: Any) -> str:
    """``value``'s kind as a workflow file names it (``a string``, ``an object``...)."""
    if value is None:
        return "null"
    kinds = ((bool, "a boolean"), (int, "an integer"), (float, "a number"),
             (str, "a string"), (dict, "an object (a mapping)"), (list, "a list"))
    kind = next((text for cls, text in kinds if isinstance(value, cls)),
                f"a {type(value).__name__}")
    shown = repr(value)
    return f"{kind} ({shown if len(shown) <= 40 else shown[:37] + '...'})"


class Guard:
    """Chooses node ``step`` (a step's first node) when ``condition`` holds; otherwise
    chooses nothing, so the step ends skipped. Its inputs are optional: a skipped step
    reads as ``null``."""

    chooses = True
    """It returns :class:`~counterpoint.nodes.Choose` (pictures draw it as a branch)."""

    def __init__(self, info: StepInfo, *, step: str, condition: Condition) -> None:
        self.info = info
        self.step = step
        self.condition = condition
        self.__qualname__ = f"{info.qualname}.when"

    def __repr__(self) -> str:
        return f"Guard({self.__qualname__!r})"

    async def __call__(self, **values: Any) -> Any:
        scope = Scope(self.info, values, lenient=True)
        try:
            holds = self.condition.evaluate(scope.resolve)
        except (TemplateError, ConditionError) as exc:
            raise NodeFailed(f"{self.info.label}: when: {exc}", retryable=False) from None
        return Choose(self.step, value=holds) if holds else Choose(value=holds)


class FirstOfPick:
    """Node ``ID.pick`` of a ``first_of`` step. Ordered after every candidate, so it runs
    once each has ended (a failed one blocks it); chooses node ``ID`` with the id of the
    first candidate, in the order written, that succeeded, or nothing (``ID`` ends
    skipped) when every candidate was skipped."""

    chooses = True
    """It returns :class:`~counterpoint.nodes.Choose` (pictures draw it as a branch)."""

    def __init__(self, info: StepInfo, *, step: str, candidates: tuple[str, ...]) -> None:
        self.info = info
        self.step = step
        self.candidates = candidates
        self.__qualname__ = f"{info.qualname}.pick"

    def __repr__(self) -> str:
        return f"FirstOfPick({self.__qualname__!r})"

    async def __call__(self, ctx: NodeContext) -> Choose:
        nodes = ctx.state.nodes
        for candidate in self.candidates:
            # a skipped candidate and one that output null read alike as inputs: the
            # status tells them apart
            if nodes[NodeId(candidate)].status is NodeStatus.SUCCEEDED:
                return Choose(self.step, value=candidate)
        return Choose(value=None)


class FirstOf:
    """Node ``ID`` of a ``first_of`` step: the output of the candidate its pick chose
    (candidates are optional inputs: the skipped ones read as ``None``)."""

    def __init__(self, info: StepInfo) -> None:
        self.info = info
        self.__qualname__ = f"{info.qualname}.first_of"

    def __repr__(self) -> str:
        return f"FirstOf({self.__qualname__!r})"

    async def __call__(self, **values: Any) -> Any:
        return values[step_arg(str(values[PICKED]))]


def _jsonable(value: Any) -> Any:
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    return value
