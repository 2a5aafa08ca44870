"""The code that runs inside Ray workers: one task function for sync steps and one async
actor class for async steps. Importing this module imports Ray.

Both receive the step itself as an object-store reference (put once per step by the
controller, so a step is pickled once, not at every call), the small keyword arguments
inline, and the big ones as references of their own (``refs``), fetched here.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Callable, Mapping
from typing import Any

import ray

from .shipping import portable


@ray.remote(max_retries=0)  # a crashed worker is counterpoint's attempt failure, not Ray's retry
def call_sync(fn: Callable[..., Any], kwargs: dict[str, Any],
              refs: Mapping[str, Any]) -> Any:
    """Run the sync step ``fn`` in this Ray worker process."""
    if refs:
        kwargs = {**kwargs, **dict(zip(refs, ray.get(list(refs.values())), strict=True))}
    try:
        result = fn(**kwargs)
        if inspect.isawaitable(result):  # a sync step that returned a coroutine
            return asyncio.run(_awaited(result))
    except Exception as exc:
        raise portable(exc) from None
    return result


async def _awaited(value: Any) -> Any:
    return await value


class StepActor:
    """Runs async steps, many at once, on this actor's own event loop."""

    async def call(self, fn: Callable[..., Any], kwargs: dict[str, Any],
                   refs: Mapping[str, Any]) -> Any:
        """Await the async step ``fn``."""
        if refs:
            values = await asyncio.gather(*refs.values())
            kwargs = {**kwargs, **dict(zip(refs, values, strict=True))}
        try:
            result = fn(**kwargs)
            if inspect.isawaitable(result):
                return await result
        except Exception as exc:
            raise portable(exc) from None
        return result

    async def pid(self) -> int:
        """This actor's process id (tests kill it to see an attempt fail over)."""
        return os.getpid()


RemoteStepActor: Any = ray.remote(StepActor)
