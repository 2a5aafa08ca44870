"""MCP both ways: MCP servers' tools for agents, and counterpoint as an MCP server.

:func:`mcp_tools` gives the tools of one MCP server (started over stdio, or reached
over streamable HTTP) for ``Agent(tools=[...])``; the server runs as long as the run
that uses it. ``counterpoint mcp`` serves counterpoint itself over MCP
(:mod:`counterpoint.mcp.server`). Needs the ``mcp`` extra (``pip install
counterpoint[mcp]``).
"""

from __future__ import annotations

from .client import ServerConfig
from .tools import MCPTools, mcp_tools

__all__ = ["MCPTools", "ServerConfig", "mcp_tools"]
