"""Healing a tool call: a failing or open-circuit tool is rerouted to its alternatives.

A tool declares alternatives (``tool(..., alternatives=[other])``), each a tool taking
the same arguments, and may have alternatives of its own: they form a cost-weighted
:class:`~.routes.RouteGraph` (a tool's ``cost``; default 1), over which
:func:`call_healed` takes the cheapest path whose tools are healthy, with no model
asked. A tool's failure (a :class:`~counterpoint.ToolError`, an MCP server's, an
``OSError`` or a timeout) counts against its breaker and reroutes. A side-effect-free
call's last answer (kept by the registry, by tool and arguments) is an alternative too,
at the registry's ``cached_cost``: taking it is a ``rerouted`` event with
``kind="cache"``, ``cached=True`` and its ``age``. When no path is left it is an
escalation: if the registry has a :class:`~.escalation.Replanner` and the caller gave
``options`` (other tools it may use instead), the re-planner is asked once (an
``escalated`` event with ``to="replanner"``) and the tool it names is called instead
(a ``rerouted`` event with ``by="replanner"``); otherwise, or if it names none, an
``escalated`` event with ``to="agent model"`` and the error goes back to the agent's
model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import MCPServerError, ToolError
from ..events import EventKind
from .escalation import Escalation
from .registry import health, tool_target
from .routes import Edge, RouteGraph

if TYPE_CHECKING:
    from ..agents.tools import Tool
    from ..context import NodeContext

FAILURES = (ToolError, MCPServerError, OSError, TimeoutError)
_START, _END, _CACHED = "call", "answer", "cached answer"  # (no tool name has a space)


def _graph(tool: Tool) -> tuple[RouteGraph, dict[str, Tool]]:
    graph, tools, queue = RouteGraph(), {tool.name: tool}, [tool]
    graph.add(_START, tool.name, tool.cost)
    while queue:
        current = queue.pop(0)
        graph.add(current.name, _END, 0.0, uses=tool_target(current.name))
        for alt in current.alternatives:
            graph.add(current.name, alt.name, alt.cost)
            if alt.name not in tools:
                tools[alt.name] = alt
                queue.append(alt)
    return graph, tools


async def call_healed(tool: Tool, arguments: Mapping[str, Any], *, key: str | None,
                      ctx: NodeContext | None, options: Mapping[str, Tool] | None = None
                      ) -> Any:
    """Call ``tool`` with ``arguments``, rerouted over its alternatives while it fails
    (see the module docstring); raises the last failure when no healthy path is left and
    no re-planner names one of ``options`` (tools the caller may call instead with the
    same arguments: the caller checks they need no approval and are permitted)."""
    registry = health()
    left = {n: t for n, t in (options or {}).items() if n != tool.name}
    to = "replanner" if registry.replanner is not None and left else "agent model"
    try:
        return await _healed(tool, arguments, key=key, ctx=ctx, to=to,
                             options=sorted(left) if left else None)
    except FAILURES as exc:
        if registry.replanner is None or not left:
            raise
        problem = Escalation(kind="tool", name=tool.name, why=str(exc)[:300] or
                             type(exc).__name__, tried=(tool.name,), unavailable=(),
                             options=tuple(sorted(left)),
                             arguments=json.dumps(dict(arguments), default=str)[:2000])
        chosen = await registry.replanner.replan(problem, ctx)
        if chosen not in left:
            _record(ctx, EventKind.ESCALATED, {"kind": "tool", "from": tool.name,
                                               "why": problem.why, "to": "agent model",
                                               "replanner": "named no tool"})
            raise
        _record(ctx, EventKind.REROUTED, {"kind": "tool", "from": tool.name, "to": chosen,
                                          "why": problem.why, "by": "replanner"})
        return await _healed(left[chosen], arguments, key=key, ctx=ctx, to="agent model",
                             options=None)


async def _healed(tool: Tool, arguments: Mapping[str, Any], *, key: str | None,
                  ctx: NodeContext | None, to: str, options: list[str] | None) -> Any:
    registry = health()
    remembered = _remembered(tool, arguments)
    if not tool.alternatives and remembered is None:
        return await _one(tool, arguments, key, ctx, remembered)
    graph, tools = _graph(tool)
    if remembered is not None and registry.cached_cost is not None:
        graph.add(_START, _CACHED, registry.cached_cost, uses="cache")
        graph.add(_CACHED, _END, 0.0)
    failed: set[str] = set()
    last: BaseException | None = None

    def allowed(edge: Edge) -> bool:
        if edge.source == _CACHED or edge.target == _CACHED:
            return remembered is not None and registry.cached(remembered)[0]
        return edge.uses is None or (edge.source not in failed and
                                     registry.available(edge.uses))

    frm, why = tool.name, ""
    while True:
        route = graph.cheapest(_START, _END, allowed)
        if route is None:
            _record(ctx, EventKind.ESCALATED, {
                "kind": "tool", "from": tool.name, "why": why or "circuit open",
                "to": to, "tried": sorted(failed),
                "unavailable": sorted(n for n in tools if n not in failed and
                                      not registry.available(tool_target(n))),
                **({"options": options} if options else {})})
            if last is not None:
                raise last
            raise ToolError(f"tool {tool.name} and its alternatives are unavailable (circuit "
                            "open); try again later or do without it")
        if route.nodes[1] == _CACHED and remembered is not None:
            found, value, age = registry.cached(remembered)
            if found:
                _record(ctx, EventKind.REROUTED, {
                    "kind": "cache", "from": frm, "to": "cache", "why": why or "circuit open",
                    "cost": route.cost, "path": ["cache"], "cached": True,
                    "age": round(age, 3)})
                return value
        chosen = tools[route.nodes[-2]]
        if chosen.name != tool.name or why:
            _record(ctx, EventKind.REROUTED, {
                "kind": "tool", "from": frm, "to": chosen.name, "why": why or "circuit open",
                "cost": route.cost, "path": list(route.nodes[1:-1])})
        try:
            return await _one(chosen, arguments, key, ctx, remembered)
        except FAILURES as exc:
            failed.add(chosen.name)
            last, frm, why = exc, chosen.name, str(exc)[:300] or type(exc).__name__


def _remembered(tool: Tool, arguments: Mapping[str, Any]) -> str | None:
    """The key a side-effect-free call's answer is kept under (``None``: never kept, nor
    answered from what was kept: a call with side effects, or one needing approval)."""
    if tool.side_effects or tool.approval:
        return None
    return f"{tool.name} {json.dumps(dict(arguments), sort_keys=True, default=str)}"


async def _one(tool: Tool, arguments: Mapping[str, Any], key: str | None,
               ctx: NodeContext | None, remembered: str | None = None) -> Any:
    registry = health()
    target = tool_target(tool.name)
    if not registry.acquire(target, ctx):
        raise ToolError(f"tool {tool.name} is unavailable (circuit open after repeated "
                        "failures); use another tool or try later")
    started = registry.clock.now()
    try:
        value = await tool.call(arguments, key=key)
    except FAILURES as exc:
        registry.failed(target, str(exc)[:300] or type(exc).__name__, ctx)
        raise
    registry.succeeded(target, max(0.0, registry.clock.now() - started), ctx)
    if remembered is not None:
        registry.remember(remembered, value)
    return value


def _record(ctx: NodeContext | None, kind: EventKind, data: dict[str, Any]) -> None:
    if ctx is not None:
        ctx.record(kind, data)
