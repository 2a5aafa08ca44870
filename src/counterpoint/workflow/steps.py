"""The callables a compiled workflow's nodes run.

Every step node receives the values its templates reference as keyword
arguments (``input:NAME`` for workflow inputs, ``step:ID`` for other steps'
outputs, ``item`` for a map's item), renders its templates from them, and runs
its agent, tool or Python function. A step with ``loop`` runs that body up to
``max`` times inside the one node and returns ``{"output": last, "iterations":
[...], "stopped": "until" | "max"}``; ``${steps.ID.output}`` reads ``output``.

A step with ``when`` is preceded by a :class:`Guard` node that evaluates the
condition and chooses the step (or nothing, which skips it and, through data
edges, whatever consumes its output).

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
from ..errors import NodeFailed
from ..graph import Choose
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
    """Base of the step callables: render, run once or in a loop, report failures."""

    def __init__(self, info: StepInfo, loop: Loop | None) -> None:
        self.info = info
        self.loop = loop
        self.__qualname__ = info.qualname

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info.qualname!r})"

    async def __call__(self, **values: Any) -> Any:
        scope = Scope(self.info, values)
        try:
            if self.loop is None:
                return await self.once(scope)
            return await self._iterate(scope, self.loop)
        except (TemplateError, ConditionError) as exc:
            raise NodeFailed(f"{self.info.label}: {exc}", retryable=False) from None

    async def _iterate(self, scope: Scope, loop: Loop) -> dict[str, Any]:
        iterations: list[Any] = []
        for index in range(1, loop.max + 1):
            scope.index = index
            output = await self.once(scope)
            iterations.append(output)
            scope.previous = output
            if loop.until is not None:
                scope.current = output
                scope.lenient = True
                done = loop.until.evaluate(scope.resolve)
                scope.lenient = False
                if done:
                    return {"output": output, "iterations": iterations, "stopped": "until"}
        return {"output": scope.previous, "iterations": iterations, "stopped": "max"}

    async def once(self, scope: Scope) -> Any:
        """One run of the step's body (one iteration of a loop)."""
        raise NotImplementedError


class AgentStep(StepRunner):
    """Runs an agent on a rendered task and context."""

    def __init__(self, info: StepInfo, loop: Loop | None, *, agent: Agent, task: Template,
                 context: Template | tuple[tuple[str, Template], ...] | None) -> None:
        super().__init__(info, loop)
        self.agent = agent
        self.task = task
        self.context = context

    async def once(self, scope: Scope) -> Any:
        task = to_text(self.task.render(scope.resolve))
        context: Any = None
        if isinstance(self.context, Template):
            context = self.context.render(scope.resolve)
        elif self.context is not None:
            context = {key: t.render(scope.resolve) for key, t in self.context}
        # repeated runs in one node (a loop) get numbered journal scopes from the agent
        return await self.agent(task, context)


class ToolStep(StepRunner):
    """Calls a tool with rendered arguments (validated against its schema)."""

    def __init__(self, info: StepInfo, loop: Loop | None, *, tool: Tool, args: Any) -> None:
        super().__init__(info, loop)
        self.tool = tool
        self.args = args

    async def once(self, scope: Scope) -> Any:
        return _jsonable(await self.tool.call(render_nested(self.args, scope.resolve)))


class PythonStep(StepRunner):
    """Calls a Python function with rendered keyword arguments (sync ones in a thread)."""

    def __init__(self, info: StepInfo, loop: Loop | None, *, fn: Callable[..., Any],
                 args: Any) -> None:
        super().__init__(info, loop)
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
        super().__init__(info, None)
        self.value = value
        self.__qualname__ = f"{info.qualname}.{role}"  # its own duration estimate

    async def once(self, scope: Scope) -> Any:
        return render_nested(self.value, scope.resolve)


class Guard:
    """Chooses step ``step`` when ``condition`` holds; otherwise chooses nothing, so the
    step ends skipped. Its inputs are optional: a skipped step reads as ``null``."""

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


def _jsonable(value: Any) -> Any:
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    return value
