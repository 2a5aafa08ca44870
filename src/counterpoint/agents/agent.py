"""Agents: a model, instructions, tools and an optional output type, in a bounded loop.

An :class:`Agent` runs the tool-calling loop: ask the model, run the tools it
calls (concurrently), give it the results, until it answers without calling a
tool, bounded by turns, tokens and a deadline. The same agent is usable

- directly: ``await agent.run("task")`` (or ``agent.run_sync``);
- as a graph node: ``g.add("review", agent, task="...", context=other_node)``;
- as a tool of another agent: ``Agent(..., tools=[researcher.as_tool()])``.

An agent holds configuration only; each run keeps its conversation to itself,
so one agent can serve many parallel nodes.

Inside a run, each turn (the model's answer), tool call and tool result is an
event of the node. If the process dies mid-loop, the node's next attempt
replays the recorded turns and tool results instead of calling the model or the
tools again (``NodeContext.journal``); side-effecting tools are called only after
everything before them is durable.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pydantic

from .. import codec
from ..context import NodeContext, current_context
from ..errors import RunFailure, UserError
from ..events import EventKind
from ..models import Message, Model, Provider, Response, ToolCall, Usage
from .tools import Tool, ToolError, from_function

if TYPE_CHECKING:
    from ..graph import Graph

DEFAULT_TURN_TOKENS = 512


class AgentError(RunFailure):
    """An agent stopped without an answer: too many turns, over its token budget or
    deadline. Not retryable: the same loop would stop the same way."""

    retryable = False


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentResult:
    """What one agent run produced."""

    output: Any
    """The validated output (an instance of the agent's output type) or the final text."""
    text: str
    turns: int
    tool_calls: int
    usage: Usage
    replayed_turns: int = 0
    """Turns taken from the run log instead of asking the model again (after a resume)."""
    messages: tuple[Message, ...] = field(default=(), repr=False)


class Agent:
    """See the module docstring. All options are keyword-only after the name."""

    def __init__(self, name: str, *, model: str | Model | Provider | None = None,
                 instructions: str = "", tools: Sequence[Tool | Agent | Callable[..., Any]] = (),
                 output: type[Any] | None = None, description: str = "", max_turns: int = 8,
                 max_tokens: int | None = None, turn_tokens: int = DEFAULT_TURN_TOKENS,
                 deadline: float | None = None, temperature: float = 0.0) -> None:
        if max_turns < 1:
            raise UserError(f"agent {name}: max_turns must be >= 1, got {max_turns}")
        self.name = name
        self.__qualname__ = f"Agent.{name}"  # names the step in estimates and events
        self.model = model if isinstance(model, Model) else Model(model)
        self.instructions = instructions
        self.tools: tuple[Tool, ...] = tuple(_as_tool(t) for t in tools)
        names = [t.name for t in self.tools]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise UserError(f"agent {name}: two tools are called {duplicated}; rename one")
        self.output = output
        self.description = description or instructions.split("\n")[0][:200] or name
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        """Token budget of one run of the loop (input + output, all turns)."""
        self.turn_tokens = turn_tokens
        """``max_tokens`` of each model call."""
        self.deadline = deadline
        self.temperature = temperature

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, model={self.model.name!r}, tools={len(self.tools)})"

    # ------------------------------------------------------------ entry points
    async def __call__(self, task: str, context: Any = None) -> Any:
        """Run as a graph node: returns the output (JSON-compatible for the log)."""
        result = await self.run(task, context=context)
        output = result.output
        return output.model_dump(mode="json") if isinstance(output, pydantic.BaseModel) \
            else output

    def run_sync(self, task: str, *, context: Any = None) -> AgentResult:
        """:meth:`run` from synchronous code (outside any event loop)."""
        return asyncio.run(self.run(task, context=context))

    def as_tool(self, *, name: str | None = None, description: str | None = None) -> Tool:
        """This agent as a tool another agent can call with a ``task`` string."""
        async def runner(arguments: dict[str, Any]) -> Any:
            return await self.__call__(arguments["task"], arguments.get("context"))
        return Tool(name=name or self.name, description=description or self.description,
                    parameters={"type": "object", "properties": {
                        "task": {"type": "string", "description": "What to do, in full."},
                        "context": {"type": "string",
                                    "description": "Facts the task needs (optional)."}},
                        "required": ["task"]}, runner=runner)

    async def run(self, task: str, *, context: Any = None,
                  ctx: NodeContext | None = None) -> AgentResult:
        """Run the loop on ``task`` (with ``context``: text, or a mapping of named inputs)."""
        ctx = ctx if ctx is not None else current_context()
        loop = _Loop(self, ctx, _scope(self.name))
        try:
            async with asyncio.timeout(self.deadline):
                return await loop.run(task, context)
        except TimeoutError:
            raise AgentError(f"agent {self.name}{_where(ctx)}: deadline of "
                             f"{self.deadline:g}s passed after {loop.turns} turn(s)") from None


# ----------------------------------------------------------------------- loop
class _Loop:
    """One run of an agent's loop: everything that changes while it runs lives here."""

    def __init__(self, agent: Agent, ctx: NodeContext | None, scope: str) -> None:
        self.agent = agent
        self.ctx = ctx
        self.scope = scope
        self.turns = 0
        self.calls = 0
        self.replayed = 0
        self.usage = Usage()
        self.tools = {t.name: t for t in agent.tools}
        journal = ctx.journal(EventKind.AGENT_TURN) if ctx is not None else []
        self.recorded_turns = {d["turn"]: d for d in journal if d.get("scope") == scope}
        results = ctx.journal(EventKind.TOOL_RESULT) if ctx is not None else []
        self.recorded_results = {d["key"]: d for d in results if d.get("scope") == scope}

    async def run(self, task: str, context: Any) -> AgentResult:
        agent = self.agent
        conversation = [Message.user(_task_text(task, context))]
        structured_now = agent.output is not None and not agent.tools
        while True:
            if self.turns >= agent.max_turns:
                raise AgentError(f"agent {agent.name}{_where(self.ctx)}: no final answer "
                                 f"after {agent.max_turns} turns; raise max_turns or simplify "
                                 "the task")
            if agent.max_tokens is not None and self.usage.total_tokens >= agent.max_tokens:
                raise AgentError(f"agent {agent.name}{_where(self.ctx)}: token budget of "
                                 f"{agent.max_tokens} used up after {self.turns} turn(s)")
            response, output = await self.turn(conversation, structured=structured_now)
            conversation.append(response.message())
            if response.tool_calls:
                conversation.extend(await self.run_tools(response.tool_calls))
                continue
            if agent.output is not None and output is None:
                # the tool loop is over; ask once more, for the typed answer
                conversation.append(Message.user(
                    "Now give your final answer as JSON matching the required schema."))
                structured_now = True
                continue
            return AgentResult(output=output if agent.output is not None else response.text,
                               text=response.text, turns=self.turns, tool_calls=self.calls,
                               usage=self.usage, replayed_turns=self.replayed,
                               messages=tuple(conversation))

    async def turn(self, conversation: list[Message], *,
                   structured: bool) -> tuple[Response, Any]:
        """One model answer: replayed from the log if this turn was recorded, else asked."""
        agent = self.agent
        self.turns += 1
        recorded = self.recorded_turns.get(self.turns)
        if recorded is not None:
            self.replayed += 1
            response = Response.model_validate(recorded["response"])
            output = None
            if structured and agent.output is not None:
                output = pydantic.TypeAdapter(agent.output).validate_json(response.text)
            return response, output
        generation = await agent.model.generate(
            conversation, system=agent.instructions or None,
            tools=[t.spec for t in agent.tools] if not structured else (),
            output=agent.output if structured else None, temperature=agent.temperature,
            max_tokens=agent.turn_tokens, ctx=self.ctx,
            purpose=f"agent {self.scope} turn {self.turns}")
        self.usage = self.usage + generation.usage
        response = generation.response
        if structured:
            response = response.model_copy(update={"tool_calls": ()})
        self.record(EventKind.AGENT_TURN, {
            "agent": agent.name, "scope": self.scope, "turn": self.turns,
            "text": response.text[:2000], "tool_calls": [c.name for c in response.tool_calls],
            "response": response.model_dump(mode="json")})
        return response, generation.output if structured else None

    async def run_tools(self, calls: Sequence[ToolCall]) -> list[Message]:
        """Run one turn's tool calls concurrently; results come back in the calls' order."""
        async def one(index: int, call: ToolCall) -> Message:
            return Message.tool(call, await self.call_tool(index, call))
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(i, c)) for i, c in enumerate(calls)]
        return [t.result() for t in tasks]

    async def call_tool(self, index: int, call: ToolCall) -> str:
        self.calls += 1
        key = _key(self.ctx, self.scope, self.turns, index, call)
        recorded = self.recorded_results.get(key)
        if recorded is not None:
            return str(recorded["content"])
        tool = self.tools.get(call.name)
        if tool is None:
            return f"error: there is no tool called {call.name!r}; available: " \
                   f"{sorted(self.tools)}"
        if tool.side_effects and self.ctx is not None:
            # the effect cannot be repeated: everything up to here must be durable first
            self.record(EventKind.TOOL_CALL, {"scope": self.scope, "key": key,
                                              "tool": call.name, "arguments": call.arguments,
                                              "turn": self.turns})
            await self.ctx.flush()
        started = time.perf_counter()
        ok = True
        _SCOPE.set(f"{self.scope}/{self.turns}.{index}")  # this task's own context
        try:
            value = await tool.call(call.arguments, key=key)
            content = value if isinstance(value, str) else codec.encode(value)
        except ToolError as exc:
            ok, content = False, f"error: {exc}"
        except RunFailure as exc:  # a nested agent or model gave up: tell the model
            ok, content = False, f"error: {exc}"
        self.record(EventKind.TOOL_RESULT, {
            "scope": self.scope, "key": key, "tool": call.name, "turn": self.turns,
            "ok": ok, "content": content, "side_effects": tool.side_effects,
            "seconds": round(time.perf_counter() - started, 6)})
        if tool.side_effects and self.ctx is not None:
            await self.ctx.flush()  # the result is durable: a resume will not repeat it
        return content

    def record(self, kind: EventKind, data: dict[str, Any]) -> None:
        if self.ctx is not None:
            self.ctx.record(kind, data)


# --------------------------------------------------------------------- helpers
_SCOPE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "counterpoint_agent_scope", default=None)
"""The tool call an agent runs under (``outer/turn.index``), when it runs as a tool."""


def _scope(name: str) -> str:
    """Where this loop sits: the agent's name, under the calling agent's tool call."""
    parent = _SCOPE.get()
    return f"{parent}/{name}" if parent else name


def _as_tool(item: Tool | Agent | Callable[..., Any]) -> Tool:
    if isinstance(item, Tool):
        return item
    if isinstance(item, Agent):
        return item.as_tool()
    from ..graph import Graph
    if isinstance(item, Graph):
        return graph_tool(item)
    if callable(item):
        return from_function(item)
    raise UserError(f"not a tool: {item!r}; pass a @tool function, an Agent or a Graph")


def graph_tool(graph: Graph, *, name: str | None = None,
               description: str | None = None) -> Tool:
    """A graph as a tool: its declared inputs are the arguments, its output the result."""
    from ..runtime import run
    inputs = sorted(graph.inputs)
    properties = {k: {"type": "string"} for k in inputs}

    async def runner(arguments: dict[str, Any]) -> Any:
        result = await run(graph, inputs=arguments, store="memory")
        result.raise_for_status()
        return result.output

    return Tool(name=name or graph.name, description=description or f"Run graph {graph.name}",
                parameters={"type": "object", "properties": properties, "required": inputs},
                runner=runner)


def _task_text(task: str, context: Any) -> str:
    if context is None or context == "" or context == {}:
        return task
    if isinstance(context, str):
        body = context
    elif isinstance(context, Mapping):
        body = "\n\n".join(f"## {k}\n{_text(v)}" for k, v in context.items())
    else:
        body = _text(context)
    return f"{task}\n\n# Context\n{body}"


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump_json(indent=1)
    try:
        return json.dumps(value, indent=1, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _key(ctx: NodeContext | None, scope: str, turn: int, index: int, call: ToolCall) -> str:
    """The idempotency key of a tool call: the same after a crash and resume."""
    where = f"{ctx.run_id}/{ctx.node}" if ctx is not None else "-"
    body = json.dumps([where, scope, turn, index, call.name, call.arguments], sort_keys=True,
                      default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:32]


def _where(ctx: NodeContext | None) -> str:
    return f" (run {ctx.run_id}, node {ctx.node!r})" if ctx is not None else ""
