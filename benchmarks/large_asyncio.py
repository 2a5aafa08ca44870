"""L1's hand-written asyncio baselines: the same 100,000-node graph with no runtime.

:func:`run_l1_asyncio` is the one L1 judges counterpoint against, and the fastest way we
found to write the graph by hand: a task per node, created only when its last input is
produced, by the task that produced it; values in preallocated lists; a countdown of the
inputs each node still waits for. Nothing is allocated for a node before it can run.

The other two are the way the asyncio documentation writes tasks that depend on tasks,
and the way most hand-written orchestration code does: every node's task is created at
the start, and each awaits the tasks of its inputs, one after the other
(:func:`run_l1_asyncio_awaiting`) or together with :func:`asyncio.gather`
(:func:`run_l1_asyncio_gather`). They are reported beside the judged ratio, not judged:
the issue that set the L1 target measured its asyncio baseline at 1.9 s on this machine,
which is what these cost here, not the judged one (on 2026-12-03, tried once each:
0.48 and 1.48 s under ``cp.tune_gc()``, 0.92 and 2.67 s under Python's collector
thresholds; the judged one 0.37-0.39 s under either). The benchmark runs each in the same
invocation as the run it is compared with and prints their ratios.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["BASELINES", "run_l1_asyncio", "run_l1_asyncio_awaiting", "run_l1_asyncio_gather"]

MODULUS = 1_000_003
"""Outputs are kept below this, so they stay small integers over 100 layers."""


async def seed(i: int) -> int:
    """A node of layer 0."""
    return i


async def mix(left: int, right: int) -> int:
    """A node of a later layer: combines its two inputs."""
    return (left * 31 + right) % MODULUS


async def _asyncio_dag(width: int, layers: int) -> list[list[int]]:
    values = [[0] * width for _ in range(layers)]
    waiting = [[2] * width for _ in range(layers)]  # inputs not yet produced
    async with asyncio.TaskGroup() as tg:

        async def run_node(k: int, i: int) -> None:
            if k == 0:
                value = await seed(i)
            else:
                prev = values[k - 1]
                value = await mix(left=prev[i], right=prev[(i + 1) % width])
            values[k][i] = value
            if k + 1 < layers:  # this node is the left input of (k+1, i), the right of i-1
                below = waiting[k + 1]
                for j in (i, (i - 1) % width):
                    below[j] -= 1
                    if below[j] == 0:
                        tg.create_task(run_node(k + 1, j))

        for i in range(width):
            tg.create_task(run_node(0, i))
    return values


async def _awaiting_dag(width: int, layers: int, *, gather: bool) -> list[list[int]]:
    tasks: list[list[asyncio.Task[int]]] = []

    async def run_node(k: int, i: int) -> int:
        if k == 0:
            return await seed(i)
        above = tasks[k - 1]
        if gather:
            left, right = await asyncio.gather(above[i], above[(i + 1) % width])
        else:
            left = await above[i]
            right = await above[(i + 1) % width]
        return await mix(left=left, right=right)

    async with asyncio.TaskGroup() as tg:
        for k in range(layers):  # a layer's inputs exist before its tasks first run
            tasks.append([tg.create_task(run_node(k, i)) for i in range(width)])
    return [[t.result() for t in layer] for layer in tasks]


def _timed(dag: Coroutine[Any, Any, list[list[int]]]) -> tuple[float, list[list[int]]]:
    start = time.perf_counter()
    values = asyncio.run(dag)
    return time.perf_counter() - start, values


def run_l1_asyncio(width: int, layers: int) -> tuple[float, list[list[int]]]:
    """The judged baseline (see the module docstring): (wall seconds, every output)."""
    return _timed(_asyncio_dag(width, layers))


def run_l1_asyncio_awaiting(width: int, layers: int) -> tuple[float, list[list[int]]]:
    """Every node's task created up front, awaiting its inputs' tasks one by one."""
    return _timed(_awaiting_dag(width, layers, gather=False))


def run_l1_asyncio_gather(width: int, layers: int) -> tuple[float, list[list[int]]]:
    """Every node's task created up front, awaiting its inputs' tasks with ``gather``."""
    return _timed(_awaiting_dag(width, layers, gather=True))


BASELINES: dict[str, tuple[str, Callable[[int, int], tuple[float, list[list[int]]]]]] = {
    "awaiting": ("asyncio, every task created up front, awaiting its inputs' tasks",
                 run_l1_asyncio_awaiting),
    "gather": ("asyncio, every task created up front, gather() of its inputs' tasks",
               run_l1_asyncio_gather),
}
"""The baselines reported beside the judged one: name -> (what it is, how to run it)."""
