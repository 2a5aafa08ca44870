"""Ray: CPU-bound steps on the Ray backend (W6) and many runs over shard actors (W3
sharded), each against its baselines in the same invocation.

- **W6**: a fan-out of 64 nodes of ~200 ms of pure-Python CPU work each (a loop calibrated
  here to ~200 ms), between a trivial root and a join. Makespan on the Ray backend (a
  local cluster of 2 CPUs) against the in-process backend (sync steps in threads, so
  the GIL serialises them) and a hand-written ``ProcessPoolExecutor(2)`` running the same
  64 calls; medians of ``--trials`` interleaved trials. Target: Ray <= 0.6 x in-process.
- **W3 sharded**: N diamond workflows (``benchmarks.workloads.diamond``: A -> {B, C, D}
  -> E, 10 ms sleeps) placed with ``counterpoint.ray.run_many`` on 2 shard actors, each
  logging to its own SQLite file, against single-process counterpoint
  (``run_counterpoint_many``: N concurrent runs on one SQLite store) and hand-written
  single-process asyncio. Target: sharded >= 1.5 x single-process counterpoint's
  throughput. The sharded time is one ``ShardPool.run_many`` call: shipping the graph
  and the inputs, running, and the summaries coming back. The pool's 2 shard actors are
  started (and run a warm-up batch) before the clock starts, as a service keeps them;
  that start-up is printed apart. Both counterpoint rows also print their CPU per run
  summed over every process they use (:mod:`benchmarks.cpu_usage`: the single process
  and its store's writer process; the controller, the shard actors and Ray's own
  processes), which a busy machine disturbs much less than the wall times.

The Ray cluster is a local one of 2 CPUs started by this script. Measure on a quiet
machine: the ratios mean little while other processes take the cores.

    python -m benchmarks.ray            # W6 64 x 200 ms; W3 sharded x 10,000 and 100,000
    python -m benchmarks.ray --quick    # tiny sizes: W6 8 x 50 ms; W3 sharded x 500, 2,000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import counterpoint as cp
from benchmarks import cpu_usage
from benchmarks.baselines import run_asyncio_many
from benchmarks.counterpoint_runner import build_graph, run_counterpoint_many
from benchmarks.workloads import diamond

W6_TARGET = 0.6
"""Ray makespan / in-process makespan must be at most this."""
W3_TARGET = 1.5
"""Sharded throughput / single-process counterpoint throughput must be at least this."""
CPUS = 2


def burn(loops: int) -> int:
    """Pure-Python CPU work: holds the GIL for all of it."""
    total = 0
    for i in range(loops):
        total = (total + i * i) % 1_000_003
    return total


def calibrate(seconds: float) -> int:
    """Loops of :func:`burn` that take about ``seconds`` here (best of 3 probes)."""
    probe = 200_000
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        burn(probe)
        best = min(best, time.perf_counter() - began)
    return max(1, int(probe * seconds / best))


def _root() -> int:
    return 0


def _join(**parts: int) -> int:
    return len(parts)


def w6_graph(nodes: int, loops: int) -> cp.Graph:
    g = cp.Graph("W6-cpu-fanout")
    root = g.add("root", _root)
    parts = [g.add(f"burn{i:02d}", burn, loops=loops, after=[root]) for i in range(nodes)]
    g.output(g.add("join", _join, inputs={f"p{i}": part for i, part in enumerate(parts)}))
    return g


def _makespan(graph: cp.Graph, backend: object | None, nodes: int) -> float:
    began = time.perf_counter()
    result = cp.run_sync(graph, store="memory",
                         options=cp.RunOptions(backend=backend))  # type: ignore[arg-type]
    elapsed = time.perf_counter() - began
    if not result.ok or result.output != nodes:
        raise AssertionError(f"W6 run did not succeed: {result.status}, {result.output}")
    return elapsed


def _process_pool(nodes: int, loops: int) -> float:
    with ProcessPoolExecutor(CPUS) as pool:
        list(pool.map(burn, [1] * CPUS))  # the workers are up before the clock starts
        began = time.perf_counter()
        results = list(pool.map(burn, [loops] * nodes))
        elapsed = time.perf_counter() - began
    if len(results) != nodes:
        raise AssertionError("the process pool lost results")
    return elapsed


def w6(nodes: int, seconds: float, trials: int) -> bool:
    from counterpoint.ray import RayBackend
    loops = calibrate(seconds)
    graph = w6_graph(nodes, loops)
    backend = RayBackend(num_cpus=CPUS)
    backend.start()
    _makespan(w6_graph(nodes, loops // 50), backend, nodes)  # Ray starts its workers
    times: dict[str, list[float]] = {"inprocess": [], "ray": [], "pool": []}
    for _ in range(trials):  # interleaved, so a busy moment of the machine hits all three
        times["inprocess"].append(_makespan(graph, None, nodes))
        times["ray"].append(_makespan(graph, backend, nodes))
        times["pool"].append(_process_pool(nodes, loops))
    backend.close()
    inprocess, ray_time, pool = (statistics.median(times[k]) for k in ("inprocess", "ray", "pool"))
    ratio = ray_time / inprocess
    ok = ratio <= W6_TARGET
    print(f"W6 {nodes} nodes x {seconds * 1000:.0f} ms CPU ({loops:,} loops), {CPUS} CPUs, "
          f"median of {trials}")
    print(f"  in-process (GIL)      {inprocess:8.2f} s")
    print(f"  Ray backend           {ray_time:8.2f} s   {ratio:.2f} x in-process "
          f"(target <= {W6_TARGET}) {'PASS' if ok else 'MISS'}")
    print(f"  ProcessPoolExecutor   {pool:8.2f} s   Ray / pool {ray_time / pool:.2f}")
    return ok


def _cpu_line(label: str, spent: Mapping[str, float], count: int) -> str:
    """CPU µs per run by role, and their sum (empty without /proc)."""
    if not spent:
        return ""
    parts = ", ".join(f"{role} {seconds / count * 1e6:.0f}"
                      for role, seconds in sorted(spent.items(), key=lambda kv: -kv[1]))
    return (f"  CPU per run, {label}: {sum(spent.values()) / count * 1e6:.0f} µs "
            f"({parts})")


def w3_sharded(count: int, folder: Path) -> bool:
    from counterpoint.ray import ShardPool
    graph = build_graph(diamond())
    cp.tune_gc()  # as `counterpoint run` does (a shard raises the young threshold further,
    # to counterpoint.ray.shards.SHARD_GC: its live objects are bounded by its batches)
    store = cp.SQLiteStore(folder / f"single-{count}.db")
    try:
        before = cpu_usage.snapshot()
        single = asyncio.run(run_counterpoint_many(graph, store, count))
        single_cpu = cpu_usage.by_role(before, cpu_usage.snapshot())  # its writer still runs
    finally:
        store.close()
    plain = run_asyncio_many(diamond(), count)
    began = time.perf_counter()
    with ShardPool(CPUS, store_dir=folder / f"sh-{count}") as pool:
        pool.run_many(graph, [{}] * 4 * CPUS)  # warm: the shards have imported the steps
        started = time.perf_counter() - began
        before = cpu_usage.snapshot()
        began = time.perf_counter()
        summaries = pool.run_many(graph, [{}] * count)
        sharded = time.perf_counter() - began
        sharded_cpu = cpu_usage.by_role(before, cpu_usage.snapshot())
    bad = [s for s in summaries if s.status != "succeeded" or s.output is None]
    if len(summaries) != count or bad:
        raise AssertionError(f"W3 sharded: {len(summaries)} summaries, {len(bad)} not "
                             "succeeded")
    speedup = single / sharded
    ok = speedup >= W3_TARGET
    print(f"W3 sharded x {count:,} diamonds, {CPUS} shards")
    print(f"  single-process counterpoint {single:8.2f} s  {count / single:9,.0f} runs/s")
    print(f"  hand-written asyncio        {plain:8.2f} s  {count / plain:9,.0f} runs/s")
    print(f"  sharded (run_many)          {sharded:8.2f} s  {count / sharded:9,.0f} runs/s  "
          f"{speedup:.2f} x single-process (target >= {W3_TARGET}) "
          f"{'PASS' if ok else 'MISS'}")
    print(f"  (starting the 2 shard actors and a warm-up batch, not timed above: "
          f"{started:.2f} s)")
    for line in (_cpu_line("single-process", single_cpu, count),
                 _cpu_line("sharded (this process is the controller)", sharded_cpu, count)):
        if line:
            print(line)
    print("  load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return ok


def main() -> int:
    """Run the workloads; the exit code is 0 only if every target was met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check it works")
    parser.add_argument("--only", choices=["W6", "W3"], help="one of the two workloads")
    parser.add_argument("--trials", type=int, default=3, help="W6 trials (median)")
    args = parser.parse_args()
    nodes, seconds = (8, 0.05) if args.quick else (64, 0.2)
    counts = [500, 2_000] if args.quick else [10_000, 100_000]
    from counterpoint.ray.cluster import connect
    connect(None, num_cpus=CPUS)
    results: list[bool] = []
    if args.only in (None, "W6"):
        results.append(w6(nodes, seconds, args.trials))
    if args.only in (None, "W3"):
        with tempfile.TemporaryDirectory() as tmp:
            for count in counts:
                results.append(w3_sharded(count, Path(tmp)))
    print(f"{sum(results)}/{len(results)} targets met"
          + (" (quick sizes: not the judged numbers)" if args.quick else ""))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
