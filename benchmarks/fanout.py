"""L2, a large dynamic fan-out: ``g.map`` over N items (50,000 by default), against
hand-written asyncio.

One node returns ``list(range(N))``; a map node runs a trivial async step on each item
(``v * v``) and joins the results. It measures, in one invocation:

- **run**: wall seconds from ``cp.run_sync(graph, store=SQLiteStore(...))`` to its
  result (the map expands into N nodes at run time: the state gains N nodes, each wired
  to the list's node, and the ranks are computed again), against asyncio running the
  same N steps as tasks of one ``TaskGroup`` and gathering their results;
- **read**: wall seconds to rebuild the run's state from its log alone
  (:func:`counterpoint.history.project`, what ``counterpoint show`` and the web view do);
- **sub-graph map**: ``g.map`` of a one-node sub-graph over ``--sub-items`` items (8,000),
  each item a sub-run of its own, all sharing the top-level run's capacity.

All three grew with the square of N until 2026-12-03: each added node made a new tuple
of the list node's dependents (7.5 s to run and 7.4 s to show 50,000 items), and each
sub-run's end told every other sub-run to dispatch again (12.5 s for 8,000 items).

    python -m benchmarks.fanout                 # N = 50,000, 3 trials
    python -m benchmarks.fanout --items 5000 --trials 1
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from pathlib import Path

import counterpoint as cp
from counterpoint.history import project

ITEMS = 50_000
SUB_ITEMS = 8_000
TRIALS = 3


async def square(v: int) -> int:
    return v * v


def build(items: int) -> cp.Graph:
    async def numbers() -> list[int]:
        return list(range(items))

    graph = cp.Graph("fanout")
    graph.map("squares", square, over=graph.add("numbers", numbers))
    return graph


def build_sub(items: int) -> cp.Graph:
    async def numbers() -> list[int]:
        return list(range(items))

    inner = cp.Graph("one")
    inner.add("square", square, v=inner.input("v"))
    graph = cp.Graph("sub-fanout")
    graph.map("squares", inner, over=graph.add("numbers", numbers))
    return graph


def run_asyncio(items: int) -> float:
    """Seconds for asyncio to run ``square`` on each item in one TaskGroup and gather."""
    async def main() -> list[int]:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(square(v)) for v in range(items)]
        return [t.result() for t in tasks]

    start = time.perf_counter()
    out = asyncio.run(main())
    elapsed = time.perf_counter() - start
    assert out[-1] == (items - 1) ** 2
    return elapsed


def measure(items: int, trials: int, tmp: Path, sub_items: int = SUB_ITEMS
            ) -> dict[str, float]:
    cp.tune_gc()
    store = cp.SQLiteStore(tmp / "fanout.db")
    runs, reads, baselines, subs = [], [], [], []
    try:
        for _ in range(trials):
            graph = build(items)
            gc.collect()
            start = time.perf_counter()
            result = cp.run_sync(graph, store=store)
            runs.append(time.perf_counter() - start)
            squares = result["squares"]
            assert result.ok and len(squares) == items and squares[-1] == (items - 1) ** 2
            events = store.events(result.run_id)
            start = time.perf_counter()
            shown = project(result.run_id, events)
            reads.append(time.perf_counter() - start)
            assert len(shown.state.nodes) == items + 2
            baselines.append(run_asyncio(items))
            graph = build_sub(sub_items)
            start = time.perf_counter()
            result = cp.run_sync(graph, store=store)
            subs.append(time.perf_counter() - start)
            assert result.ok and len(result["squares"]) == sub_items
    finally:
        store.close()
    run, base = statistics.median(runs), statistics.median(baselines)
    return {"items": items, "run_s": run, "asyncio_s": base, "ratio": run / base,
            "read_s": statistics.median(reads), "sub_items": sub_items,
            "sub_run_s": statistics.median(subs)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=ITEMS)
    parser.add_argument("--sub-items", type=int, default=SUB_ITEMS)
    parser.add_argument("--trials", type=int, default=TRIALS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        row = measure(args.items, args.trials, Path(tmp), args.sub_items)
    print(f"L2 map over {row['items']:,} items (median of {args.trials}): "
          f"run {row['run_s']:.3f} s, asyncio {row['asyncio_s']:.3f} s, "
          f"ratio {row['ratio']:.2f} x; rebuilt from the log in {row['read_s']:.3f} s")
    print(f"   map of a sub-graph over {row['sub_items']:,} items (a sub-run each): "
          f"run {row['sub_run_s']:.3f} s")


if __name__ == "__main__":
    main()
