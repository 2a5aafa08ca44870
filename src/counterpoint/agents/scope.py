"""The tool call an agent runs under, shared by agents and the graphs they call as tools."""

from __future__ import annotations

import contextvars

_SCOPE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "counterpoint_agent_scope", default=None)
"""The tool call an agent runs under (``outer/turn.index``), when it runs as a tool."""
