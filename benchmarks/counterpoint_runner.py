"""The counterpoint side of the benchmarks: a `Workload` as a `cp.Graph`, run and checked.

Every node is a data edge from each of its dependencies, exactly like the baselines: a
node with a positive duration is `work` (it awaits ``asyncio.sleep(duration)``), a node
with duration 0.0 is `trivial` (it does not sleep at all), and each outputs
``len(inputs) + 1``, its inputs being its dependencies' outputs passed as keyword inputs
``d0=ref0, d1=ref1, ...``.

- `build_graph(w)`: the graph, built once per workload (outside the clock) and reused.
- `run_counterpoint(graph, store, workers)`: one run; the clock covers `cp.run` (which
  creates the run's log) and ``await store.flush()``, so the persisted log is included.
  After the clock stops the result is checked: the run succeeded, every node ran once
  with the right output, and the run's record in the store says it succeeded.
- `run_counterpoint_many(graph, store, count)`: `count` concurrent `cp.run` calls of one
  graph in one event loop, all sharing one store (W3).
- `measure_peak_rss(count)`: W3 in a fresh child process that runs nothing else; returns
  its peak RSS. The child reports ``getrusage(RUSAGE_SELF).ru_maxrss`` and, on Linux,
  ``VmHWM`` from /proc/self/status, which is the one used: Linux carries ru_maxrss over
  ``execve`` from the forking parent, so a child of a big benchmark process would
  otherwise report the parent's peak.

The async runners are coroutines: call them with ``asyncio.run`` (one fresh event loop
per trial, like the baselines). ``python -m benchmarks.counterpoint_runner`` runs a small
self-check; ``--rss-child COUNT`` is the child side of `measure_peak_rss`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import counterpoint as cp
from benchmarks.workloads import Workload, chain, diamond, fanout, layered, topological_order

__all__ = [
    "CounterpointTrial",
    "PeakRss",
    "build_graph",
    "expected_outputs",
    "measure_peak_rss",
    "run_counterpoint",
    "run_counterpoint_many",
    "run_counterpoint_trial",
    "selfcheck",
    "trivial",
    "work",
]

REPO_ROOT = Path(__file__).resolve().parents[1]

_RESERVED = "[]/"
"""Characters counterpoint does not allow in node ids (trace ids are mapped around them)."""


async def work(duration: float, **inputs: int) -> int:
    """A node that takes `duration` seconds: it sleeps, then outputs ``len(inputs) + 1``."""
    if duration:
        await asyncio.sleep(duration)
    return len(inputs) + 1


async def trivial(**inputs: int) -> int:
    """A trivial node (duration 0.0): no sleep at all, outputs ``len(inputs) + 1``."""
    return len(inputs) + 1


_EXPECTED: weakref.WeakKeyDictionary[cp.Graph, dict[str, int]] = weakref.WeakKeyDictionary()
"""Graph built by `build_graph` -> the output every node must produce, by graph node id."""


def _node_ids(w: Workload) -> dict[str, str]:
    """Workload node id -> a valid counterpoint node id (the same unless it is reserved)."""
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for i, node in enumerate(w.nodes):
        safe = node if node and not any(c in node for c in _RESERVED) else f"n{i}"
        while safe in taken:
            safe = f"{safe}_{i}"
        ids[node] = safe
        taken.add(safe)
    return ids


def build_graph(w: Workload) -> cp.Graph:
    """`w` as a counterpoint graph: one node per workload node, one data edge per dependency.

    Each node carries its duration as ``estimate=`` (what a trace replay knows), so the
    scheduler's critical-path order uses the same durations as the list-schedule bound.
    """
    graph = cp.Graph(w.name)
    ids = _node_ids(w)
    refs: dict[str, cp.NodeRef] = {}
    expected: dict[str, int] = {}
    for node in topological_order(w):
        deps, duration = w.nodes[node]
        inputs: dict[str, Any] = {f"d{i}": refs[dep] for i, dep in enumerate(deps)}
        if duration > 0:
            refs[node] = graph.add(ids[node], work, duration=duration, inputs=inputs,
                                   estimate=duration)
        else:
            refs[node] = graph.add(ids[node], trivial, inputs=inputs, estimate=0.0)
        expected[ids[node]] = len(deps) + 1
    graph.validate()
    _EXPECTED[graph] = expected
    return graph


def expected_outputs(graph: cp.Graph) -> Mapping[str, int]:
    """The output each node of a graph built by `build_graph` must produce."""
    try:
        return _EXPECTED[graph]
    except KeyError:
        raise ValueError(f"graph {graph.name!r} was not built by build_graph") from None


def _check_result(graph: cp.Graph, result: cp.RunResult, label: str) -> None:
    """Raise unless `result` succeeded and every node produced exactly its expected output."""
    if not result.ok:
        failed = {k: str(n.status) for k, n in result.nodes.items() if n.status != "succeeded"}
        raise AssertionError(f"{label}: run {result.run_id} {result.status}; nodes not "
                             f"succeeded (first 5): {dict(list(failed.items())[:5])}")
    expected = expected_outputs(graph)
    outputs = result.outputs
    if outputs != expected:
        wrong = [k for k in expected if outputs.get(cp.NodeId(k)) != expected[k]]
        extra = sorted(set(outputs) - set(expected))
        raise AssertionError(f"{label}: run {result.run_id} outputs wrong for {len(wrong)} "
                             f"nodes (e.g. {wrong[:5]}), unexpected nodes {extra[:5]}")
    attempts = [k for k, n in result.nodes.items() if n.attempts != 1]
    if attempts:
        raise AssertionError(f"{label}: run {result.run_id}: nodes not run exactly once: "
                             f"{attempts[:5]}")


def _check_persisted(store: cp.RunStore, result: cp.RunResult, label: str) -> None:
    """Raise unless the store's run record says the run succeeded (the log reached disk)."""
    record = store.run(result.run_id)
    if record.status != "succeeded":
        raise AssertionError(f"{label}: run {result.run_id} is {record.status!r} in the store "
                             "after flush, not 'succeeded'")


@dataclass(frozen=True, slots=True)
class CounterpointTrial:
    """One timed counterpoint run, with what the run's own metrics say about it."""

    elapsed: float
    """Wall seconds (perf_counter) around `cp.run` plus ``store.flush()``."""
    log_makespan: float
    """``result.metrics.makespan``: run creation to run end, from the log's timestamps."""
    log_critical_path: float
    """``result.metrics.critical_path``: longest chain over the nodes' measured run times."""
    events: int
    """Events in the run's in-memory log (its final sequence number)."""


async def run_counterpoint_trial(graph: cp.Graph, store: cp.RunStore,
                                 workers: int | None = None) -> CounterpointTrial:
    """One run of `graph`, timed and verified; see `run_counterpoint`."""
    options = cp.RunOptions(max_concurrency=workers)
    start = time.perf_counter()
    result = await cp.run(graph, store=store, options=options)
    await store.flush()
    elapsed = time.perf_counter() - start
    label = f"counterpoint {graph.name} (workers={workers})"
    _check_result(graph, result, label)
    _check_persisted(store, result, label)
    metrics = result.metrics
    events = len(store.events(result.run_id))
    return CounterpointTrial(elapsed=elapsed, log_makespan=metrics.makespan,
                             log_critical_path=metrics.critical_path, events=events)


async def run_counterpoint(graph: cp.Graph, store: cp.RunStore, workers: int | None) -> float:
    """Run `graph` once with the log in `store`; return elapsed wall seconds.

    The clock covers `cp.run` (creating the run and its log, executing every node) and
    ``await store.flush()``. Raises AssertionError if the run did not succeed, a node's
    output is wrong, or the store does not record the run as succeeded.
    """
    trial = await run_counterpoint_trial(graph, store, workers)
    return trial.elapsed


async def run_counterpoint_many(graph: cp.Graph, store: cp.RunStore, count: int) -> float:
    """Run `count` concurrent runs of `graph` in this event loop, sharing `store` (W3).

    Returns elapsed wall seconds from starting the first run to the last run's events
    being flushed. Every run is verified afterwards, as in `run_counterpoint`.
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    start = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(cp.run(graph, store=store)) for _ in range(count)]
    await store.flush()
    elapsed = time.perf_counter() - start
    results = [task.result() for task in tasks]
    label = f"counterpoint {graph.name} x{count}"
    for result in results:
        _check_result(graph, result, label)
    if len({r.run_id for r in results}) != count:
        raise AssertionError(f"{label}: run ids are not distinct")
    for result in (results[0], results[-1]):
        _check_persisted(store, result, label)
    return elapsed


# --- peak RSS of W3 in a child process -------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeakRss:
    """What the W3 child process reported."""

    count: int
    peak_bytes: int
    """The child's peak resident set: ``VmHWM`` of /proc/self/status where there is one
    (Linux), else ``ru_maxrss``."""
    ru_maxrss_bytes: int
    """``getrusage(RUSAGE_SELF).ru_maxrss`` at the end. Linux carries the high-water mark
    of the process that forked the child across ``execve``, so when the parent is larger
    than the child this is the parent's peak, not the child's: see `start_ru_maxrss_bytes`."""
    start_ru_maxrss_bytes: int
    """``ru_maxrss`` as the child started (non-trivial means it was inherited)."""
    before_bytes: int
    """Peak RSS after imports and building the graph, before any run started."""
    writer_peak_bytes: int
    """Peak RSS of the store's writer process (its VmHWM; 0 where there is no /proc)."""
    elapsed: float
    """Wall seconds of the W3 run in the child (one trial, not the benchmark's number)."""


def _ru_maxrss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # Linux reports KiB


def _peak_rss_bytes(pid: int | str = "self") -> int:
    """A process's own peak RSS: VmHWM (per address space, reset by exec); else, for this
    process, ru_maxrss, and for another, 0."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return _ru_maxrss_bytes() if pid == "self" else 0


_START_RU_MAXRSS = _ru_maxrss_bytes()


def _rss_child(count: int, sleep: float) -> None:
    graph = build_graph(diamond(sleep))
    with tempfile.TemporaryDirectory(prefix="counterpoint-bench-rss-") as tmp:
        store = cp.SQLiteStore(Path(tmp) / "runs.db")
        try:
            before = _peak_rss_bytes()
            elapsed = asyncio.run(run_counterpoint_many(graph, store, count))
            peak = _peak_rss_bytes()
            ru_maxrss = _ru_maxrss_bytes()
            writer = store.writer_pid
            writer_peak = _peak_rss_bytes(writer) if writer is not None else 0
        finally:
            store.close()
    print(json.dumps({"count": count, "peak_bytes": peak, "ru_maxrss_bytes": ru_maxrss,
                      "start_ru_maxrss_bytes": _START_RU_MAXRSS, "before_bytes": before,
                      "writer_peak_bytes": writer_peak, "elapsed": elapsed}))


def measure_peak_rss(count: int, sleep: float = 0.01, timeout: float = 600.0, *,
                     tuned_gc: bool = False, precise_loop: bool = False) -> PeakRss:
    """Peak RSS of W3 (`count` concurrent diamonds) in a fresh process that runs only it
    (with `tuned_gc`, under `cp.tune_gc()`, and with `precise_loop`, on
    `cp.new_event_loop()`, like the parent's runners)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH"))
                                        if p)
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.counterpoint_runner", "--rss-child", str(count),
         "--sleep", repr(sleep), *(["--tuned-gc"] if tuned_gc else []),
         *(["--precise-loop"] if precise_loop else [])],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"W3 RSS child failed ({proc.returncode}): {proc.stderr[-2000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return PeakRss(count=int(data["count"]), peak_bytes=int(data["peak_bytes"]),
                   ru_maxrss_bytes=int(data["ru_maxrss_bytes"]),
                   start_ru_maxrss_bytes=int(data["start_ru_maxrss_bytes"]),
                   before_bytes=int(data["before_bytes"]),
                   writer_peak_bytes=int(data["writer_peak_bytes"]), elapsed=float(data["elapsed"]))


# --- self-check ------------------------------------------------------------------------


def selfcheck() -> None:
    """Run small graphs through every counterpoint runner; raises on any wrong result."""
    cases = [chain(50), fanout(20, sleep=0.001), diamond(0.001), layered(120, seed=7)]
    with tempfile.TemporaryDirectory(prefix="counterpoint-bench-") as tmp:
        for i, w in enumerate(cases):
            store = cp.SQLiteStore(Path(tmp) / f"check{i}.db")
            try:
                graph = build_graph(w)
                for workers in (None, 3):
                    asyncio.run(run_counterpoint(graph, store, workers))
                asyncio.run(run_counterpoint_many(graph, store, 4))
            finally:
                store.close()
            print(f"selfcheck ok: {w.name} ({len(w)} nodes)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rss-child", type=int, metavar="COUNT",
                        help="run W3 with COUNT workflows and print its peak RSS as JSON")
    parser.add_argument("--sleep", type=float, default=0.01, help="W3 node duration (s)")
    parser.add_argument("--tuned-gc", action="store_true", help="call cp.tune_gc() first")
    parser.add_argument("--precise-loop", action="store_true",
                        help="run on cp.new_event_loop() (asyncio.run through cp.EventLoopPolicy)")
    args = parser.parse_args(argv)
    if args.tuned_gc:
        cp.tune_gc()
    if args.precise_loop:
        asyncio.set_event_loop_policy(cp.EventLoopPolicy())
    if args.rss_child is not None:
        _rss_child(args.rss_child, args.sleep)
    else:
        selfcheck()


if __name__ == "__main__":
    main()
