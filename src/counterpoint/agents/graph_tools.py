"""A graph as a tool of an agent: its declared inputs are the arguments, its output the
result (:func:`graph_tool`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import RunFailure, ToolError
from .scope import _SCOPE
from .tools import Tool, arguments_schema

if TYPE_CHECKING:
    from ..graph import Graph


def graph_tool(graph: Graph, *, name: str | None = None,
               description: str | None = None) -> Tool:
    """A graph as a tool: its declared inputs are the arguments, its output the result.

    Each call is a separate run in memory; a failed run is a :class:`ToolError` the
    calling agent reads.
    """
    from ..api import run
    tool_name = name or graph.name
    validator, schema = arguments_schema(tool_name, {
        k: (annotation, ..., None) for k, annotation in sorted(graph.inputs.items())})

    async def runner(arguments: dict[str, Any]) -> Any:
        token = _SCOPE.set(None)  # agents inside the graph run in a run of their own
        try:
            result = await run(graph, inputs=arguments, store="memory")
        finally:
            _SCOPE.reset(token)
        try:
            result.raise_for_status()
        except RunFailure as exc:
            raise ToolError(f"graph {graph.name}: {exc}") from exc
        return result.output

    return Tool(name=tool_name, description=description or f"Run graph {graph.name}",
                parameters=schema, validator=validator, runner=runner)
