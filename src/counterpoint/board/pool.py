"""A pool of workers draining a work queue: ``pool(g, "workers", work, size=4, queue=...)``.

Each worker is an ordinary node. It claims the oldest open item, runs ``work`` on the
item's payload, completes the claim with the result and makes it durable before the next
claim. When no item is open but other workers still hold claims, it looks again every
``poll`` seconds (each look expires the claims of workers that have ended), so an item
whose worker fails is taken over; it stops once every item is done. Its output is the
ids of the items it completed. A worker that fails or is killed loses its claim
(:mod:`counterpoint.board.queue`): its item is open again for the next claim, by another
worker, the worker's own retry, or the workers of the resumed run, so every item is
completed exactly once.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..errors import UserError

if TYPE_CHECKING:
    from ..graph import Graph, NodeRef


def pool(graph: Graph, name: str, work: Callable[..., Any], *, size: int, queue: str,
         lease: float | None = None, after: Iterable[NodeRef] = (),
         retries: int | None = None, poll: float = 0.05) -> list[NodeRef]:
    """Add ``size`` worker nodes ``<name>-1`` ... ``<name>-<size>`` to ``graph``.

    ``work(payload)`` (or ``work(payload, ctx)`` if it takes a ``ctx`` parameter) may be
    sync (it runs in a worker thread) or async. ``after`` are the nodes that fill the
    queue: workers start when they have finished. ``lease`` bounds each claim in
    seconds (default: the queue's). Returns the workers' refs.
    """
    if not isinstance(size, int) or size < 1:
        raise UserError(f"pool {name!r}: size must be an int >= 1, got {size!r}")
    if not poll > 0:
        raise UserError(f"pool {name!r}: poll must be > 0 seconds, got {poll!r}")
    takes_ctx = "ctx" in inspect.signature(work).parameters
    is_async = inspect.iscoroutinefunction(work)
    ordering = list(after)

    async def worker(ctx: Any) -> list[str]:
        claims = ctx.board.queue(queue)
        done: list[str] = []
        while True:
            claim = claims.claim(lease=lease)
            if claim is None:
                if not claims.counts()["claimed"]:
                    return done  # every item is done (or none was ever put)
                await asyncio.sleep(poll)  # others hold claims: take over any that expire
                continue
            args = (claim.payload, ctx) if takes_ctx else (claim.payload,)
            if is_async:
                result = await work(*args)
            else:
                result = await asyncio.to_thread(work, *args)
            claims.complete(claim, result)
            await ctx.flush()  # a completed item is never redone after a crash
            done.append(claim.item)

    worker.__qualname__ = f"pool.{name}"
    return [graph.add(f"{name}-{i}", worker, after=ordering, retries=retries)
            for i in range(1, size + 1)]
