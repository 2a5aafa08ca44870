"""Tools and agents behind one callable contract.

``@tool`` makes a typed function a :class:`Tool`; an :class:`Agent` is a model,
instructions, tools and an optional output type in a bounded loop. Agents and
graphs are tools too (``agent.as_tool()``, ``graph_tool(graph)``), and an agent is
a graph node (``g.add("id", agent, task=..., context=...)``).
"""

from __future__ import annotations

from ..errors import AgentError, ToolError
from .agent import Agent, AgentResult
from .graph_tools import graph_tool
from .tools import Tool, tool

__all__ = ["Agent", "AgentError", "AgentResult", "Tool", "ToolError", "graph_tool", "tool"]
