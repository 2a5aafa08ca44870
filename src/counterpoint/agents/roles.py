"""An agent role's capabilities checked against its tools: at construction, and before
every tool call (see :mod:`counterpoint.permissions`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..permissions import Capabilities, side_effects_refusal

if TYPE_CHECKING:
    from .agent import Agent
    from .tools import Tool


def check_capabilities(agent: str, capabilities: Capabilities, tools: Iterable[str], *,
                       open_ended: bool = False) -> None:
    """Raise :class:`UserError` if ``capabilities`` grants a tool the agent does not have
    (a misspelt name would otherwise refuse the real tool at run time). ``open_ended``: the
    agent has toolsets whose tools are found at run time, so other names may be real."""
    if not isinstance(capabilities, Capabilities):
        raise UserError(f"agent {agent}: capabilities must be counterpoint.Capabilities(...), "
                        f"got {capabilities!r}")
    unknown = sorted(capabilities.tools - set(tools))
    if unknown and not open_ended:
        raise UserError(f"agent {agent}: capabilities grant tool(s) {unknown} it does not "
                        f"have; its tools: {sorted(tools)}")


def refused(agent: Agent, tool: Tool, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(what, why)`` if ``agent`` may not call ``tool`` with ``arguments``: outside its
    own capabilities, or a side effect an agent it runs under may not cause."""
    capabilities = agent.capabilities
    if capabilities is not None:
        refusal = capabilities.tool_refusal(tool.name, arguments,
                                            side_effects=tool.side_effects)
        if refusal is not None:
            return refusal
    if tool.side_effects:
        outer = side_effects_refusal(tool.name)
        if outer is not None:
            return "side_effects", outer[1]
    return None


def denial(agent: str, arguments: Mapping[str, Any], refusal: tuple[str, str],
           base: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The ``permission_denied`` and ``tool_result`` event data of a refused call, and the
    content the model gets: the refusal, which it can see and work around."""
    what, why = refusal
    content = f"error: permission denied: {why}"
    return ({**base, "role": f"agent {agent}", "what": what, "reason": why,
             "arguments": arguments},
            {**base, "ok": False, "content": content, "side_effects": False, "seconds": 0.0,
             "denied": True},
            content)
