"""How an agent's task reads as a prompt, and the idempotency key of its tool calls: both
must come out the same after a crash and resume (inputs then come back from the log)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pydantic_core

if TYPE_CHECKING:
    from ..context import NodeContext
    from ..models import ToolCall


def task_text(task: str, context: Any) -> str:
    if context is None or (isinstance(context, str | Mapping) and not context):
        return task
    if isinstance(context, str):
        body = context
    elif isinstance(context, Mapping):
        body = "\n\n".join(f"## {k}\n{text(v)}" for k, v in context.items())
    else:
        body = text(context)
    return f"{task}\n\n# Context\n{body}"


def text(value: Any) -> str:
    """``value`` as prompt text: the same for an object and for its JSON round trip, so
    a resumed run (whose inputs come back from the log) sends the same prompt."""
    if isinstance(value, str):
        return value
    try:
        return pydantic_core.to_json(value, indent=1).decode()
    except (pydantic_core.PydanticSerializationError, TypeError, ValueError):
        return str(value)


def key(ctx: NodeContext | None, scope: str, task: str, turn: int, index: int,
         call: ToolCall) -> str:
    """The idempotency key of a tool call: the same after a crash and resume."""
    where = f"{ctx.run_id}/{ctx.node}" if ctx is not None else "-"
    body = json.dumps([where, scope, task, turn, index, call.name, call.arguments],
                      sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:32]
