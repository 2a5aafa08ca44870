"""The side-effecting tool calls a node's earlier attempts made, for its retry.

A retried node asks its model afresh. A call the retry makes again (the same key: the
same node, loop scope, task, turn, place and arguments) whose result an earlier attempt
logged is not made a second time: the logged result stands in for it, as the results
of the attempt a resume continues do (``NodeContext.journal``). A call that did not
succeed (the tool raised, or answered with an error) is made again, with the same key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..events import EventKind

if TYPE_CHECKING:
    from ..context import NodeContext


async def made_before(ctx: NodeContext | None, scope: str) -> dict[str, dict[str, Any]]:
    """The logged results, by call key, of the side-effecting calls under ``scope`` that
    earlier attempts of ``ctx``'s node made and that succeeded; empty on a first attempt
    and outside a run."""
    if ctx is None or ctx.attempt == 1:
        return {}
    await ctx.flush()  # an earlier attempt's results may still be on their way to the store
    made: dict[str, dict[str, Any]] = {}
    for ev in ctx.store.events(ctx.run_id):
        data = ev.data
        if ev.kind is EventKind.TOOL_RESULT and ev.node == ctx.node and data \
                and ev.attempt < ctx.attempt and data.get("side_effects") \
                and data.get("ok") is True and data.get("scope") == scope and "key" in data:
            made.setdefault(str(data["key"]), data)
    return made
