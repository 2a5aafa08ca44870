"""Sharded mode: many runs of one graph placed on Ray actors, each running counterpoint's
own scheduler for its runs.

Per-node dispatch stays inside each shard (the in-process backend, one event loop per
shard); only run placement (batches of inputs), results (:class:`RunSummary`) and
progress cross processes.

The log: each shard writes its own SQLite file, ``<store_dir>/shard-<i>.db``. SQLite has
one writer per file, so shards sharing one file would serialise on its lock and lose the
group commit that makes a run's log cheap; shipping every event back to the controller
would put the whole log through one process again, which is what the shards are for. A
file per shard keeps every guarantee of the SQLite store (a prefix of each run's events
survives a crash; ``counterpoint show RUN --db <store_dir>/shard-<i>.db`` and ``resume``
work as for any run), and :attr:`RunSummary.store` says which file holds a run.

A shard that dies mid-batch is replaced, and its batch is started again on the new shard
as new runs (at most ``restarts`` times); the interrupted runs stay in the shard's file,
resumable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError, WorkerLost
from ..graph import Graph
from ..options import RunOptions
from .cluster import connect

BATCH = 200
"""Most runs per batch sent to a shard (fewer when there are too few runs to give every
shard :data:`IN_FLIGHT` batches)."""
IN_FLIGHT = 2
"""Batches each shard holds at once (one runs while the next is on its way)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSummary:
    """How one run of a batch ended."""

    index: int
    """The position of its inputs in the ``inputs`` given."""
    run_id: str
    status: str
    """The run's final status (``succeeded``, ``failed``, ...)."""
    output: Any
    """The graph's output (``None`` unless it succeeded)."""
    store: str
    """The SQLite file that holds the run's log."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Progress:
    """Aggregate progress of a :func:`run_many` call, given to its ``progress`` callback."""

    done: int
    """Runs that ended (in any status)."""
    failed: int
    """Runs that ended in another status than ``succeeded``."""
    running: int
    """Runs placed on a shard that have not ended yet."""
    total: int
    elapsed: float
    """Seconds since the first batch was placed."""


class Shard:
    """One shard: a Ray actor that runs whole runs of one graph with counterpoint's own
    scheduler, logging to its own SQLite file."""

    def __init__(self, graph: bytes | str, store: str, options: dict[str, Any],
                 concurrency: int) -> None:
        import asyncio

        from ray import cloudpickle

        from ..store import open_store
        if isinstance(graph, str):
            from ..loader import load_target
            self.graph: Graph = load_target(graph)
        else:
            self.graph = cloudpickle.loads(graph)
        self.path = store
        self.store = open_store(store)
        self.options = RunOptions.from_data(options)
        self.slots = asyncio.Semaphore(concurrency)

    async def run_batch(self, batch: list[tuple[int, dict[str, Any]]]) -> list[RunSummary]:
        """Run every ``(index, inputs)`` of ``batch`` concurrently; their summaries once
        all their events are durable."""
        import asyncio

        from ..api import run

        async def one(index: int, inputs: dict[str, Any]) -> RunSummary:
            async with self.slots:
                result = await run(self.graph, inputs=inputs, options=self.options,
                                   store=self.store)
            return RunSummary(index=index, run_id=result.run_id, status=str(result.status),
                              output=result.output if result.ok else None, store=self.path)

        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(i, inputs)) for i, inputs in batch]
        await self.store.flush()
        return [t.result() for t in tasks]


def run_many(graph: Graph | str, inputs: Sequence[Mapping[str, Any]], *, workers: int = 2,
             store_dir: str | Path | None = None, options: RunOptions | None = None,
             concurrency: int = 1000, batch: int | None = None, address: str | None = None,
             num_cpus: int | None = None, restarts: int = 3,
             progress: Callable[[Progress], None] | None = None) -> list[RunSummary]:
    """Run ``graph`` once per item of ``inputs`` over ``workers`` shard actors on Ray and
    return the runs' summaries in the order of ``inputs``. Blocks until all have ended.

    ``graph`` is a :class:`Graph` (pickled to the shards) or a target ``FILE.py[:GRAPH]``
    each shard loads itself. ``store_dir`` holds the shards' SQLite files (default: a
    ``shards`` folder next to the default store). ``concurrency`` bounds the runs each
    shard runs at once; ``batch`` is the runs sent to a shard at a time (default: up to
    :data:`BATCH`, fewer so that every shard gets work); ``progress`` is called after
    every batch. ``address`` and
    ``num_cpus`` are those of :class:`~counterpoint.ray.RayBackend`.
    """
    if batch is None:
        batch = max(1, min(BATCH, -(-len(inputs) // (workers * IN_FLIGHT))))
    if workers < 1 or batch < 1 or concurrency < 1:
        raise UserError(f"run_many needs workers, batch and concurrency >= 1, got "
                        f"{workers}, {batch}, {concurrency}")
    ray = connect(address, num_cpus=num_cpus)
    from ray import cloudpickle

    from ..store import default_location
    folder = (Path(store_dir) if store_dir is not None else
              Path(default_location()).parent / "shards").resolve()  # shards run elsewhere
    folder.mkdir(parents=True, exist_ok=True)
    shipped: bytes | str = graph if isinstance(graph, str) else \
        cloudpickle.dumps(graph)  # type: ignore[no-untyped-call]
    data = (options or RunOptions()).as_data()
    actor = ray.remote(Shard).options(num_cpus=1, max_concurrency=IN_FLIGHT + 1)

    def make(i: int) -> Any:
        return actor.remote(shipped, str(folder / f"shard-{i}.db"), data, concurrency)

    shards = [make(i) for i in range(workers)]
    batches: Iterator[list[tuple[int, dict[str, Any]]]] = (
        [(i, dict(inputs[i])) for i in range(start, min(start + batch, len(inputs)))]
        for start in range(0, len(inputs), batch))
    pending: dict[Any, tuple[int, list[tuple[int, dict[str, Any]]]]] = {}
    results: list[RunSummary | None] = [None] * len(inputs)
    done = failed = 0
    began = time.perf_counter()

    def place(shard: int, work: list[tuple[int, dict[str, Any]]] | None = None) -> None:
        work = work if work is not None else next(batches, None)
        if work:
            pending[shards[shard].run_batch.remote(work)] = (shard, work)

    try:
        for shard in range(workers):
            for _ in range(IN_FLIGHT):
                place(shard)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            shard, work = pending.pop(ready[0])
            try:
                summaries: list[RunSummary] = ray.get(ready[0])
            except ray.exceptions.RayActorError as exc:
                restarts -= 1
                if restarts < 0:
                    raise WorkerLost(f"shard {shard} of run_many died too often "
                                     f"({type(exc).__name__}); the runs it started are "
                                     f"in {folder}") from None
                ray.kill(shards[shard])
                shards[shard] = make(shard)
                place(shard, work)
                continue
            for summary in summaries:
                results[summary.index] = summary
                done += 1
                failed += summary.status != "succeeded"
            place(shard)
            if progress is not None:
                running = sum(len(w) for _, w in pending.values())
                progress(Progress(done=done, failed=failed, running=running,
                                  total=len(inputs), elapsed=time.perf_counter() - began))
    finally:
        for handle in shards:
            ray.kill(handle)
    return [r for r in results if r is not None]
