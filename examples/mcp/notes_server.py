"""A small MCP server (stdio) for the README's MCP example: notes kept in memory.

Run it with any MCP client, or let counterpoint start it:
``cp.mcp_tools(command=[sys.executable, "examples/mcp/notes_server.py"])``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("notes")
notes: list[str] = []


@server.tool()
def add_note(text: str) -> int:
    """Add a note; answers how many notes there are now."""
    notes.append(text)
    return len(notes)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def list_notes() -> list[str]:
    """Every note, oldest first."""
    return list(notes)


if __name__ == "__main__":
    server.run("stdio")
