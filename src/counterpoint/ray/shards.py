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
work as for any run), and :attr:`RunSummary.store` says which file holds a run. A
shard's store commits in its own thread (``writer="thread"``): a single process running
many runs gains from a writer process because that process gets a core the event loop
does not use, but the shards keep every core busy, so there a writer process per shard
would only take their time, with a pipe and the batches' encoding on top (measured:
a few per cent of a run's CPU at most; the commits' SQLite work is the same).

A shard that dies mid-batch is replaced, and its batch is started again on the new shard
as new runs (at most ``restarts`` times); the interrupted runs stay in the shard's file,
resumable.

:class:`ShardPool` keeps its shard actors between calls (starting an actor costs a
process and counterpoint's imports: seconds); :func:`run_many` starts a pool for one call.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CounterpointError, UserError, WorkerLost
from ..graph import Graph
from ..options import RunOptions
from .cluster import connect

BATCH = 200
"""Most runs per batch sent to a shard (fewer when there are too few runs to give every
shard :data:`IN_FLIGHT` batches)."""
IN_FLIGHT = 3
"""Batches each shard holds at once (one runs while the next is on its way)."""
SHARD_GC = (200_000, 100, 20)
"""A shard's collector thresholds (:func:`~counterpoint.tune_gc`; ``COUNTERPOINT_GC=default``
keeps Python's). A shard's live objects are bounded by the runs it holds,
:data:`IN_FLIGHT` batches of up to :data:`BATCH`, about 35 tracked objects each: some
21,000 objects, just over the 20,000 young-generation threshold of
:data:`~counterpoint.garbage.THRESHOLDS`, so there the collector ran a young collection
every few thousand runs for nothing (finished runs are freed by reference counting):
~14 µs of a shard's ~200 µs per run (2026-12-02). At 200,000 a shard running only
counterpoint's runs collects nearly never; cyclic garbage of its steps is still collected,
after 200,000 allocations."""


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


Ended = tuple[list[str], list[str], list[Any]]
"""How a batch's runs ended, as a shard answers: their ids, statuses and outputs, in the
order of the batch. Columns of plain values, not :class:`RunSummary` objects: pickling and
unpickling those cost ~5 µs per run between the shard and the controller, these ~0.2."""


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
    """One shard: a Ray actor that runs whole runs with counterpoint's own scheduler (the
    in-process backend, on this actor's event loop), logging to its own SQLite file.

    A pool sends it a job (a graph, its options, a concurrency bound) once, then batches
    of inputs naming the job."""

    def __init__(self, store: str) -> None:
        from ..garbage import tune_gc
        from ..store import SQLiteStore
        tune_gc(SHARD_GC)  # the actor's process is counterpoint's, as under `counterpoint run`
        self.path = store
        # commits in a thread of this process: a writer process would take time from the
        # cores the shards keep busy, and its pipe costs CPU of its own (see the module)
        self.store = SQLiteStore(store, writer="thread")
        self.jobs: dict[int, tuple[Graph, RunOptions, Any]] = {}

    async def prepare(self, job: int, graph: bytes | str, options: dict[str, Any],
                      concurrency: int) -> None:
        """Load job ``job``'s graph (pickled, or a target ``FILE.py[:GRAPH]``)."""
        import asyncio

        from ray import cloudpickle
        if isinstance(graph, str):
            from ..loader import load_target
            loaded: Graph = load_target(graph)
        else:
            loaded = cloudpickle.loads(graph)
        self.jobs = {job: (loaded, RunOptions.from_data(options), asyncio.Semaphore(concurrency))}

    async def run_batch(self, job: int, batch: list[tuple[int, dict[str, Any]]]) -> Ended:
        """Run every ``(index, inputs)`` of ``batch`` concurrently; how they ended (in the
        order of ``batch``) once all their events are durable."""
        import asyncio

        from ..api import run
        graph, options, slots = self.jobs[job]
        store = self.store

        async def one(inputs: dict[str, Any]) -> tuple[str, str, Any]:
            async with slots:
                result = await run(graph, inputs=inputs, options=options, store=store)
            return result.run_id, str(result.status), result.output if result.ok else None

        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(inputs)) for _, inputs in batch]
        await store.flush()
        ended = [t.result() for t in tasks]
        return ([r[0] for r in ended], [r[1] for r in ended], [r[2] for r in ended])

    async def rss(self) -> int:
        """This actor's resident memory, in bytes (Linux ``/proc``; 0 elsewhere)."""
        return resident_bytes()


def resident_bytes() -> int:
    """The resident memory of this process, in bytes (``VmRSS``; 0 where there is no
    ``/proc``)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class ShardPool:
    """``workers`` shard actors on Ray, kept between :meth:`run_many` calls; shard ``i``
    logs to ``<store_dir>/shard-<i>.db``.

    ``store_dir`` defaults to a ``shards`` folder next to the default store; ``address``
    and ``num_cpus`` are those of :class:`~counterpoint.ray.RayBackend`. Each shard holds
    one Ray CPU: more shards than the cluster's CPUs fail at :meth:`start`, unless
    ``autoscaling`` (the cluster adds nodes on demand). Use it as a context manager, or call
    :meth:`start` and :meth:`close`. Not safe to use from several threads at once.
    """

    def __init__(self, workers: int = 2, *, store_dir: str | Path | None = None,
                 address: str | None = None, num_cpus: int | None = None,
                 autoscaling: bool = False) -> None:
        if workers < 1:
            raise UserError(f"a shard pool needs workers >= 1, got {workers}")
        from ..store import default_location
        self.workers = workers
        self.folder = (Path(store_dir) if store_dir is not None else
                       Path(default_location()).parent / "shards").resolve()  # shards run elsewhere
        self.address = address
        self.num_cpus = num_cpus
        self.autoscaling = autoscaling
        self.shards: list[Any] = []
        self._ray: Any = None
        self._jobs = itertools.count(1)
        self.in_flight = 0
        """Runs placed on the shards by :meth:`stream` that have not ended."""

    def start(self) -> ShardPool:
        """Connect to Ray and start the shards; returns once every one is up. Idempotent."""
        if not self.shards:
            self._ray = connect(self.address, num_cpus=self.num_cpus)
            cpus = self._ray.cluster_resources().get("CPU", 0.0)
            if self.workers > cpus and not self.autoscaling:  # Ray would wait for ever
                raise UserError(
                    f"{self.workers} shards need a CPU each, and the Ray cluster has "
                    f"{cpus:g}: the shards past {cpus:g} would never start. Use --workers "
                    f"{max(1, int(cpus))} (workers={max(1, int(cpus))}) or fewer, a cluster "
                    "with more CPUs, or ShardPool(autoscaling=True) if it adds nodes on "
                    "demand")
            self.folder.mkdir(parents=True, exist_ok=True)
            self.shards = [self._make(i) for i in range(self.workers)]
            self._ray.get([s.rss.remote() for s in self.shards])
        return self

    def _make(self, i: int) -> Any:
        actor = self._ray.remote(Shard).options(num_cpus=1, max_concurrency=IN_FLIGHT + 2)
        return actor.remote(self._store(i))

    def _store(self, i: int) -> str:
        """The SQLite file of shard ``i``."""
        return str(self.folder / f"shard-{i}.db")

    def rss(self) -> list[int]:
        """Each shard's resident memory, in bytes."""
        return list(self._ray.get([s.rss.remote() for s in self.shards]))

    def close(self) -> None:
        """End the shard actors (the Ray cluster stays up)."""
        for handle in self.shards:
            self._ray.kill(handle)
        self.shards = []

    def __enter__(self) -> ShardPool:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run_many(self, graph: Graph | str, inputs: Sequence[Mapping[str, Any]], *,
                 options: RunOptions | None = None, concurrency: int = 1000,
                 batch: int | None = None, restarts: int = 3,
                 progress: Callable[[Progress], None] | None = None) -> list[RunSummary]:
        """:func:`run_many` on this pool's shards."""
        if isinstance(graph, Graph):  # every run's inputs, before the first is placed
            for _ in _checked(graph, enumerate(inputs), options or RunOptions()):
                pass
        if batch is None:
            batch = max(1, min(BATCH, -(-len(inputs) // (self.workers * IN_FLIGHT))))
        results: list[RunSummary | None] = [None] * len(inputs)
        done = failed = 0
        began = time.perf_counter()
        for summaries in self.stream(graph, inputs, options=options, concurrency=concurrency,
                                     batch=batch, restarts=restarts):
            for summary in summaries:
                results[summary.index] = summary
                done += 1
                failed += summary.status != "succeeded"
            if progress is not None:
                progress(Progress(done=done, failed=failed, running=self.in_flight,
                                  total=len(inputs), elapsed=time.perf_counter() - began))
        return [r for r in results if r is not None]

    def stream(self, graph: Graph | str, inputs: Iterable[Mapping[str, Any]], *,
               options: RunOptions | None = None, concurrency: int = 1000,
               batch: int = BATCH, restarts: int = 3) -> Iterator[list[RunSummary]]:
        """Run ``graph`` once per item of ``inputs`` (read lazily, so it may be endless)
        and yield each batch's summaries as it ends, in the order batches end; keeps
        :data:`IN_FLIGHT` batches of ``batch`` runs on every shard (:attr:`in_flight`
        says how many runs are placed and not ended). Nothing is kept once yielded."""
        if batch < 1 or concurrency < 1:
            raise UserError(f"run_many needs batch and concurrency >= 1, got {batch}, "
                            f"{concurrency}")
        self.start()
        ray = self._ray
        from ray import cloudpickle
        job = next(self._jobs)
        shipped: bytes | str = graph if isinstance(graph, str) else \
            cloudpickle.dumps(graph)  # type: ignore[no-untyped-call]
        data = (options or RunOptions()).as_data()
        numbered: Iterator[tuple[int, Mapping[str, Any]]] = enumerate(inputs)
        if isinstance(graph, Graph):  # a run that cannot start fails here, not in a shard
            numbered = _checked(graph, numbered, options or RunOptions())
        stores = [self._store(i) for i in range(self.workers)]

        def prepare(*shards: int) -> None:
            # an async actor may start calls out of order (its arguments arrive at different
            # times), so its batches are sent once it has the job
            ray.get([self.shards[i].prepare.remote(job, shipped, data, concurrency)
                     for i in shards])

        pending: dict[Any, tuple[int, list[tuple[int, dict[str, Any]]]]] = {}

        def place(shard: int, work: list[tuple[int, dict[str, Any]]] | None = None) -> None:
            if work is None:
                work = [(i, dict(item)) for i, item in itertools.islice(numbered, batch)]
            if work:
                pending[self.shards[shard].run_batch.remote(job, work)] = (shard, work)
                self.in_flight += len(work)

        self.in_flight = 0
        prepare(*range(self.workers))
        for shard in range(self.workers):
            for _ in range(IN_FLIGHT):
                place(shard)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            shard, work = pending.pop(ready[0])
            self.in_flight -= len(work)
            try:
                ids, statuses, outputs = ray.get(ready[0])
            except ray.exceptions.RayTaskError as exc:
                raise _user_error(exc) from None
            except ray.exceptions.RayActorError as exc:
                restarts -= 1
                if restarts < 0:
                    raise WorkerLost(f"shard {shard} of run_many died too often "
                                     f"({type(exc).__name__}); the runs it started are "
                                     f"in {self.folder}") from None
                ray.kill(self.shards[shard])
                self.shards[shard] = self._make(shard)
                prepare(shard)
                for ref, (other, lost) in list(pending.items()):
                    if other == shard:  # the dead shard's other batches go again too
                        del pending[ref]
                        self.in_flight -= len(lost)
                        place(shard, lost)
                place(shard, work)
                continue
            place(shard)
            where = stores[shard]
            yield [RunSummary(index=item[0], run_id=run_id, status=status, output=output,
                              store=where)
                   for item, run_id, status, output in zip(work, ids, statuses, outputs,
                                                           strict=True)]


def _checked(graph: Graph, numbered: Iterator[tuple[int, Mapping[str, Any]]],
             options: RunOptions) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """``numbered`` as it is, once each item is checked as inputs of ``graph``."""
    from ..scheduler.execution import check_inputs
    for index, item in numbered:
        try:
            check_inputs(graph, item, options)
        except UserError as exc:
            raise UserError(f"run_many inputs[{index}]: {exc}") from None
        yield index, item


def _user_error(exc: Any) -> BaseException:
    """The counterpoint error a shard's batch raised (a run of a graph given by target
    that cannot start, unwrapped from the task group's and Ray's wrappers), else ``exc``."""
    cause = exc.cause
    while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) >= 1:
        cause = cause.exceptions[0]
    return cause if isinstance(cause, CounterpointError) else exc


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
    every batch. ``address`` and ``num_cpus`` are those of
    :class:`~counterpoint.ray.RayBackend`. Starts the shards for this call and ends them
    after it; :class:`ShardPool` keeps them for several calls.
    """
    if workers < 1 or (batch is not None and batch < 1) or concurrency < 1:
        raise UserError(f"run_many needs workers, batch and concurrency >= 1, got "
                        f"{workers}, {batch}, {concurrency}")
    if isinstance(graph, Graph):  # before the shards start: they cost seconds
        for _ in _checked(graph, enumerate(inputs), options or RunOptions()):
            pass
    with ShardPool(workers, store_dir=store_dir, address=address, num_cpus=num_cpus) as pool:
        return pool.run_many(graph, inputs, options=options, concurrency=concurrency,
                             batch=batch, restarts=restarts, progress=progress)
