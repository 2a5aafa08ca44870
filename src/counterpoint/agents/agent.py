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
event of the node, under the loop's *scope*: the agent's name, prefixed by the
calling agent's tool call when it runs as a tool (``outer/2.0/inner``), and
suffixed ``#2``, ``#3`` when one node attempt runs the same agent again. If the
process dies mid-loop, the node's next attempt replays the recorded turns and
tool results instead of calling the model or the tools again
(``NodeContext.journal``), and records them once more (marked ``replayed``) so
that a second crash loses nothing either. Side-effecting tools are called only
after everything before them is durable, and their results are made durable
before the loop goes on.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pydantic

from .. import codec, loop
from ..budget import Budget, remaining, spending
from ..checks import number, seconds, whole
from ..context import NodeContext, current_context
from ..errors import (
    AgentError,
    BoardConflict,
    InvalidOutput,
    OutputNotSerializable,
    PermissionDenied,
    ToolError,
    UserError,
)
from ..events import EventKind
from ..health.tools import call_healed
from ..ids import NodeId
from ..models import Message, Model, Provider, Response, ToolCall, Usage
from ..permissions import Capabilities, acting_as
from .approving import ask_approval
from .effects import made_before
from .graph_tools import graph_tool
from .prompting import key as _key
from .prompting import task_text as _task_text
from .roles import check_capabilities, denial, refused
from .scope import _SCOPE
from .tools import Tool, Toolset, arguments_schema, from_function

if TYPE_CHECKING:
    from ..graph import Graph

DEFAULT_TURN_TOKENS = 512

_FINAL_ANSWER = "Now give your final answer as JSON matching the required schema."



@dataclass(frozen=True, kw_only=True, slots=True)
class AgentResult:
    """What one agent run produced."""

    output: Any
    """The validated output (an instance of the agent's output type) or the final text."""
    text: str
    """The final answer's text (for structured output: its JSON)."""
    turns: int
    """Model answers the loop used, replayed ones included."""
    tool_calls: int
    usage: Usage
    """Tokens of every turn, replayed ones included (what the token budget counts)."""
    replayed_turns: int = 0
    """Turns taken from the run log instead of asking the model again (after a resume)."""
    scope: str = ""
    """Where the loop's events are in the run log (see the module docstring)."""
    messages: tuple[Message, ...] = field(default=(), repr=False)


class Agent:
    """See the module docstring. All options are keyword-only after the name.

    ``max_turns`` bounds model answers, ``max_tokens`` the tokens of one run of the
    loop (input + output, all turns), ``deadline`` its seconds (tools included);
    ``turn_tokens`` is the ``max_tokens`` of each model call.
    """

    def __init__(self, name: str, *, model: str | Model | Provider | None = None,
                 instructions: str = "",
                 tools: Sequence[Tool | Toolset | Agent | Graph | Callable[..., Any]] = (),
                 output: type[Any] | None = None, description: str = "", max_turns: int = 8,
                 max_tokens: int | None = None, turn_tokens: int = DEFAULT_TURN_TOKENS,
                 deadline: float | None = None, temperature: float = 0.0,
                 capabilities: Capabilities | None = None,
                 budget: Budget | None = None, samples: int = 1) -> None:
        if not isinstance(name, str) or not name or "/" in name or "#" in name:
            raise UserError(f"agent name {name!r} must be a non-empty string without '/' or "
                            "'#' (they separate scopes in the run log)")
        for option, count in (("max_turns", max_turns), ("samples", samples),
                              ("max_tokens", max_tokens), ("turn_tokens", turn_tokens)):
            if count is not None:
                whole(count, f"agent {name}: {option}", least=1)
        if deadline is not None:
            seconds(deadline, f"agent {name}: deadline")
        number(temperature, f"agent {name}: temperature")
        Budget.checked(budget, where=f"agent {name}")
        self.name = name
        self.__qualname__ = f"Agent.{name}"  # names the step in estimates and events
        self.model = model if isinstance(model, Model) else Model(model)
        self.instructions = instructions
        self.tools: tuple[Tool, ...] = tuple(_as_tool(t) for t in tools
                                             if not isinstance(t, Toolset))
        self.toolsets: tuple[Toolset, ...] = tuple(t for t in tools if isinstance(t, Toolset))
        """Tools found when a run starts (MCP servers'): see :class:`Toolset`."""
        duplicated = _duplicated(self.tools)
        if duplicated:
            raise UserError(f"agent {name}: two tools are called {duplicated}; rename one")
        if capabilities is not None:
            # a toolset's tools are known only when a run starts: grants are checked against
            # the static tools here, and every call against the grants when it is made
            check_capabilities(name, capabilities, [t.name for t in self.tools],
                               open_ended=bool(self.toolsets))
        self.capabilities = capabilities
        """What this role may do (``None``: anything its tools do); enforced, see
        :mod:`counterpoint.permissions`."""
        self.output = output
        self._adapter: pydantic.TypeAdapter[Any] | None = \
            pydantic.TypeAdapter(output) if output is not None else None
        self.description = description or instructions.split("\n")[0][:200] or name
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self.turn_tokens = turn_tokens
        self.deadline = deadline
        self.temperature = temperature
        self.budget = budget
        """Money and tokens one run of the loop may spend (its model calls reserve in it),
        within what is left of the budgets it runs under (its node's, its run's)."""
        self.samples = samples
        """Parallel samples of each model turn, the majority answer kept (fewer when the
        budget or deadline left covers fewer; see :mod:`counterpoint.models.sampling`)."""

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, model={self.model.name!r}, tools={len(self.tools)})"

    # ------------------------------------------------------------ entry points
    async def __call__(self, task: str, context: Any = None) -> Any:
        """Run as a graph node: returns the output (JSON-compatible for the log)."""
        result = await self.run(task, context=context)
        if self._adapter is None:
            return result.output
        return self._adapter.dump_python(result.output, mode="json")

    def run_sync(self, task: str, *, context: Any = None) -> AgentResult:
        """:meth:`run` from synchronous code (outside any event loop)."""
        return loop.run(self.run(task, context=context))

    def as_tool(self, *, name: str | None = None, description: str | None = None) -> Tool:
        """This agent as a tool another agent can call with a ``task`` string."""
        async def runner(arguments: dict[str, Any]) -> Any:
            return await self.__call__(arguments["task"], arguments["context"])

        tool_name = name or self.name
        validator, schema = arguments_schema(tool_name, {
            "task": (str, ..., "What to do, in full."),
            "context": (str | None, None, "Facts the task needs (optional).")})
        return Tool(name=tool_name, description=description or self.description,
                    parameters=schema, validator=validator, runner=runner)

    async def run(self, task: str, *, context: Any = None,
                  ctx: NodeContext | None = None) -> AgentResult:
        """Run the loop on ``task`` (with ``context``: text, or a mapping of named inputs).

        ``ctx`` defaults to the running node's context, if any. Raises
        :class:`AgentError` when a bound is reached, and whatever the model raises.
        """
        ctx = ctx if ctx is not None else current_context()
        prompt = _task_text(task, context)
        loop = _Loop(self, ctx, _scope(self.name, ctx), prompt)
        left = remaining().seconds  # the run's (or an enclosing agent's) deadline
        seconds = min((s for s in (self.deadline, left) if s is not None), default=None)
        limit = asyncio.timeout(seconds)
        try:
            with acting_as(f"agent {self.name}", self.capabilities), \
                    spending(self.budget, where=f"agent {self.name} ({loop.where()})",
                             deadline=self.deadline):
                async with limit:
                    if self.toolsets:
                        await loop.add_toolsets()
                    loop.recorded_results = {**await made_before(ctx, loop.scope),
                                             **loop.recorded_results}  # (the journal's win)
                    return await loop.run(prompt)
        except TimeoutError:
            if not limit.expired():
                raise  # a tool's own timeout, not this agent's deadline
            if self.deadline is None or (left is not None and left < self.deadline):
                raise AgentError(f"{loop.where()}: the run's deadline passed after "
                                 f"{loop.turns} turn(s) ({seconds:g}s were left when the "
                                 "agent started)") from None
            raise AgentError(f"{loop.where()}: deadline of {self.deadline:g}s passed after "
                             f"{loop.turns} turn(s); raise the agent's deadline or give it "
                             "a smaller task") from None


# ----------------------------------------------------------------------- loop
class _Loop:
    """One run of an agent's loop: everything that changes while it runs lives here."""

    def __init__(self, agent: Agent, ctx: NodeContext | None, scope: str, prompt: str) -> None:
        self.agent = agent
        self.ctx = ctx
        self.scope = scope
        self.task = hashlib.sha256(prompt.encode()).hexdigest()[:16]
        """Digest of the first message: a journal recorded for another task is not replayed."""
        self.turns = 0
        self.calls = 0
        self.replayed = 0
        self.usage = Usage()
        self.tools = {t.name: t for t in agent.tools}
        turns = ctx.journal(EventKind.AGENT_TURN) if ctx is not None else []
        self.recorded_turns = {d["turn"]: d for d in turns
                               if d.get("scope") == scope and d.get("task") == self.task}
        results = ctx.journal(EventKind.TOOL_RESULT) if ctx is not None else []
        self.recorded_results = {d["key"]: d for d in results if d.get("scope") == scope}

    def where(self) -> str:
        """The agent, and where it runs, for error messages."""
        name = self.agent.name if self.scope == self.agent.name else \
            f"{self.agent.name} (scope {self.scope})"
        ctx = self.ctx
        if ctx is None:
            return f"agent {name}"
        return f"run {ctx.run_id}, node {ctx.node!r}, attempt {ctx.attempt}: agent {name}"

    async def add_toolsets(self) -> None:
        """Add the tools of the agent's toolsets (in order) to the static ones."""
        tools = list(self.agent.tools)
        for toolset in self.agent.toolsets:
            tools.extend(await toolset.resolve_tools(self.ctx))
        duplicated = _duplicated(tools)
        if duplicated:
            raise AgentError(f"{self.where()}: two tools are called {duplicated}; give "
                             "the toolsets distinct prefixes (mcp_tools(prefix=...)) or "
                             "include= fewer tools")
        self.tools = {t.name: t for t in tools}

    async def run(self, prompt: str) -> AgentResult:
        agent = self.agent
        conversation = [Message.user(prompt)]
        structured = agent.output is not None and not self.tools
        while True:
            if self.turns >= agent.max_turns:
                raise AgentError(f"{self.where()}: no final answer after {agent.max_turns} "
                                 "turns; raise max_turns or simplify the task")
            if agent.max_tokens is not None and self.usage.total_tokens >= agent.max_tokens:
                raise AgentError(f"{self.where()}: token budget of {agent.max_tokens} used "
                                 f"up ({self.usage.total_tokens}) after {self.turns} turn(s); "
                                 "raise max_tokens or simplify the task")
            response, output = await self.turn(conversation, structured=structured)
            conversation.append(response.message())
            if response.tool_calls:
                conversation.extend(await self.run_tools(response.tool_calls))
                continue
            if agent.output is not None and not structured:
                # the tool loop is over; ask once more, for the typed answer
                conversation.append(Message.user(_FINAL_ANSWER))
                structured = True
                continue
            return AgentResult(output=output if agent.output is not None else response.text,
                               text=response.text, turns=self.turns, tool_calls=self.calls,
                               usage=self.usage, replayed_turns=self.replayed,
                               scope=self.scope, messages=tuple(conversation))

    async def turn(self, conversation: list[Message], *,
                   structured: bool) -> tuple[Response, Any]:
        """One model answer: replayed from the log if this turn was recorded, else asked."""
        agent = self.agent
        self.turns += 1
        recorded = self.recorded_turns.get(self.turns)
        if recorded is not None and (not structured or "output" in recorded):
            self.replayed += 1
            self.record(EventKind.AGENT_TURN, {**recorded, "replayed": True})
            self.usage = self.usage + Usage.model_validate(recorded.get("usage") or {})
            response = Response.model_validate(recorded["response"])
            if not structured:
                return response, None
            assert agent._adapter is not None
            return response, agent._adapter.validate_python(recorded["output"])
        generation = await agent.model.generate(
            conversation, system=agent.instructions or None,
            tools=[t.spec for t in self.tools.values()] if not structured else (),
            output=agent.output if structured else None, temperature=agent.temperature,
            max_tokens=agent.turn_tokens, ctx=self.ctx, samples=agent.samples,
            purpose=f"agent {self.scope} turn {self.turns}")
        self.usage = self.usage + generation.usage
        response = generation.response
        data: dict[str, Any] = {
            "agent": agent.name, "scope": self.scope, "turn": self.turns, "task": self.task,
            "text": response.text[:2000], "usage": generation.usage.model_dump(mode="json")}
        output = None
        if structured:
            assert agent._adapter is not None
            response = response.model_copy(update={"tool_calls": ()})
            output = generation.output
            data["output"] = agent._adapter.dump_python(output, mode="json")
        data["tool_calls"] = [c.name for c in response.tool_calls]
        data["response"] = response.model_dump(mode="json")
        self.record(EventKind.AGENT_TURN, data)
        return response, output

    async def run_tools(self, calls: Sequence[ToolCall]) -> list[Message]:
        """Run one turn's tool calls concurrently; results come back in the calls' order.

        If a tool raises (anything but a :class:`ToolError`), the turn's other calls
        are cancelled and that exception is raised as it is, not in a group.
        """
        async def one(index: int, call: ToolCall) -> Message:
            return Message.tool(call, await self.call_tool(index, call))
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(one(i, c)) for i, c in enumerate(calls)]
        except BaseExceptionGroup as failed:
            first = _first_leaf(failed)
            others = len(failed.exceptions) - 1
            if others:
                first.add_note(f"{others} other tool call(s) of the same turn failed too")
            raise first from first.__cause__
        return [t.result() for t in tasks]

    async def call_tool(self, index: int, call: ToolCall) -> str:
        """One tool call: its recorded result if there is one, else the tool's answer."""
        self.calls += 1
        key = _key(self.ctx, self.scope, self.task, self.turns, index, call)
        recorded = self.recorded_results.get(key)
        if recorded is not None:
            self.record(EventKind.TOOL_RESULT, {**recorded, "replayed": True})
            if recorded.get("side_effects") and self.ctx is not None:
                await self.ctx.flush()  # so that a second crash cannot lose it either
            return str(recorded["content"])
        base = {"scope": self.scope, "key": key, "tool": call.name, "turn": self.turns,
                "index": index}
        tool = self.tools.get(call.name)
        if tool is None:  # models validate names; this catches a log from other tools
            content = f"error: there is no tool called {call.name!r}; available: " \
                      f"{sorted(self.tools)}"
            self.record(EventKind.TOOL_RESULT, {**base, "ok": False, "content": content,
                                                "side_effects": False, "seconds": 0.0})
            return content
        refusal = refused(self.agent, tool, call.arguments)
        if refusal is not None:  # before anything of the tool runs, whatever the prompt said
            return self.deny(call.arguments, refusal, base)
        arguments = call.arguments
        if tool.approval:
            approved = await self.approve(tool, call, key, base)
            if isinstance(approved, str):
                return approved  # rejected, or made already under this approval
            if approved is not None:
                arguments = approved
                refusal = refused(self.agent, tool, arguments)
                if refusal is not None:  # an edit cannot widen what the role may do
                    return self.deny(arguments, refusal, base)
        self.record(EventKind.TOOL_CALL, {**base, "arguments": arguments,
                                          "side_effects": tool.side_effects})
        if tool.side_effects and self.ctx is not None:
            # the effect cannot be taken back: everything up to here must be durable first
            await self.ctx.flush()
        started = time.perf_counter()
        ok = True
        _SCOPE.set(f"{self.scope}/{self.turns}.{index}")  # this task's own context
        _TOOL_CALL.set(key)
        try:
            value = await call_healed(tool, arguments, key=key, ctx=self.ctx,
                                      options=self.substitutes(tool, arguments))
            content = value if isinstance(value, str) else codec.encode(value)
        except OutputNotSerializable as exc:
            raise OutputNotSerializable(f"{self.where()}: tool {call.name} returned a value "
                                        f"that is not JSON: {exc}") from exc
        except (ToolError, AgentError, InvalidOutput, PermissionDenied, BoardConflict) as exc:
            # the tool (or a nested agent) gave up, or was refused (capabilities, a
            # blackboard conflict): tell the model, let it try otherwise
            ok, content = False, f"error: {exc}"
        except Exception as exc:
            exc.add_note(f"raised by tool {call.name}, called by {self.where()} in turn "
                         f"{self.turns}")
            raise
        self.record(EventKind.TOOL_RESULT, {
            **base, "ok": ok, "content": content, "side_effects": tool.side_effects,
            "seconds": round(time.perf_counter() - started, 6)})
        if tool.side_effects and self.ctx is not None:
            await self.ctx.flush()  # the result is durable: a resume will not repeat it
        return content

    def substitutes(self, tool: Tool, arguments: dict[str, Any]) -> dict[str, Tool]:
        """The agent's other tools a re-planner may pick when ``tool`` has no healthy path
        left: only those called without approval, without side effects, and permitted
        with these arguments (the substitute skips the checks this call went through)."""
        return {name: other for name, other in self.tools.items()
                if other is not tool and not other.approval and not other.side_effects
                and refused(self.agent, other, arguments) is None}

    def deny(self, arguments: dict[str, Any], refusal: tuple[str, str],
             base: dict[str, Any]) -> str:
        denied, result, content = denial(self.agent.name, arguments, refusal, base)
        self.record(EventKind.PERMISSION_DENIED, denied)
        self.record(EventKind.TOOL_RESULT, result)
        return content

    async def approve(self, tool: Tool, call: ToolCall, key: str,
                      base: dict[str, Any]) -> dict[str, Any] | str | None:
        return await ask_approval(tool, call, key, base, ctx=self.ctx, where=self.where,
                                  record=self.record)

    def record(self, kind: EventKind, data: dict[str, Any]) -> None:
        if self.ctx is not None:
            self.ctx.record(kind, data)


# --------------------------------------------------------------------- helpers
_TOOL_CALL: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "counterpoint_tool_call", default=None)
"""The idempotency key of the tool call the caller runs under (see :func:`current_tool_call`)."""


def current_tool_call() -> str | None:
    """The key of the agent tool call the caller runs inside, if any: a run a tool starts
    (a graph tool) is traced under that call."""
    return _TOOL_CALL.get()


_STARTED: weakref.WeakKeyDictionary[Any, dict[tuple[NodeId, int, str], int]] = \
    weakref.WeakKeyDictionary()
"""Per run execution: loops started so far per (node, attempt, scope), to number repeats."""


def _scope(name: str, ctx: NodeContext | None) -> str:
    """Where a new loop sits: the agent's name, under the calling agent's tool call,
    numbered when the same node attempt already ran a loop there.

    Numbers follow the order loops start in, which is the same on a resume as long as
    the node starts them in a deterministic order (the journal is also matched on the
    task, so a different order costs replays, never wrong answers).
    """
    parent = _SCOPE.get()
    scope = f"{parent}/{name}" if parent else name
    if ctx is None:
        return scope
    # the execution lives exactly as long as the run: counts die with it
    started = _STARTED.setdefault(ctx._execution, {})
    slot = (ctx.node, ctx.attempt, scope)
    count = started[slot] = started.get(slot, 0) + 1
    return scope if count == 1 else f"{scope}#{count}"


def _duplicated(tools: Sequence[Tool]) -> list[str]:
    names = [t.name for t in tools]
    return sorted({n for n in names if names.count(n) > 1})


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


def _as_tool(item: Tool | Agent | Graph | Callable[..., Any]) -> Tool:
    from ..graph import Graph
    if isinstance(item, Tool):
        return item
    if isinstance(item, Agent):
        return item.as_tool()
    if isinstance(item, Graph):
        return graph_tool(item)
    if callable(item):
        return from_function(item)
    raise UserError(f"not a tool: {item!r}; pass a @tool function, an Agent or a Graph")
