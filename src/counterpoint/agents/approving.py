"""An agent asks a person before a tool call declared ``approval=...``
(:mod:`counterpoint.approval`): approved once, the call is made once."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import AgentError, ToolError
from ..events import EventKind

if TYPE_CHECKING:
    from ..context import NodeContext
    from ..models import ToolCall
    from .tools import Tool


async def ask_approval(tool: Tool, call: ToolCall, key: str, base: dict[str, Any], *,
                       ctx: NodeContext | None, where: Callable[[], str],
                       record: Callable[[EventKind, dict[str, Any]], None]
                       ) -> dict[str, Any] | str | None:
    """Ask a person before ``call`` of ``tool`` (declared ``approval=...``): the
    arguments to call it with (edited or not; ``base`` gets the approval's id), or the
    content the model gets instead (rejected: the reason; made already under this
    approval: its recorded result), or ``None`` if this call needs no approval."""
    try:
        needed = tool.needs_approval(call.arguments)
    except ToolError:
        needed = True  # invalid arguments: the tool's own validation reports them
    if not needed:
        return None
    if ctx is None:
        raise AgentError(f"{where()}: tool {tool.name} needs approval, which needs a "
                         "run to wait in; call the agent inside a step")
    answer = await ctx.ask_tool_call(tool.name, call.arguments, tool.parameters,
                                          key=key)
    assert answer.id is not None
    base["approval"] = answer.id
    made = ctx.approved_call_result(answer.id)
    if made is not None:  # approved once, made once: a retry gets what it returned
        record(EventKind.TOOL_RESULT, {**made, "replayed": True})
        return str(made["content"])
    if not answer.approved:
        who = f" by {answer.by}" if answer.by else ""
        content = f"error: the call was rejected{who}: {answer.reason or 'no reason given'}"
        record(EventKind.TOOL_RESULT, {**base, "ok": False, "content": content,
                                            "side_effects": tool.side_effects,
                                            "seconds": 0.0})
        return content
    edited = answer.edit
    return dict(edited) if isinstance(edited, dict) else dict(call.arguments)

