"""The runs list over a store crowded with sub-runs: the top-level runs behind them.

    python -m benchmarks.ui_sub_runs [--items 20000] [--looks 20]

A finished map over a one-node sub-graph (``--items`` sub-runs) in a temporary SQLite
store, with one top-level run older than it. The web view lists top-level runs only
(sub-runs with ``?sub_runs=1``); the runs stream reads the list about every 0.5 s.
Measured in the same invocation, ``--looks`` times each: :meth:`RunRows.records` as the
stream calls it (``store.top_runs``, a read of the index of top-level runs), against a
scan of ever more of the newest records until 200 top-level runs or the end (what the
list cost before the store had that read), and against the newest 200 records with the
sub-runs (what the list read before it left them out).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import counterpoint as cp
from counterpoint.store import RunStore, open_store
from counterpoint.store.index import RunIndex
from counterpoint.ui.rows import RunRows

LIMIT = 200


def _mapped(n: int) -> cp.Graph:
    inner = cp.Graph("item")
    inner.add("double", lambda x: 2 * x, x=inner.input("x"))
    outer = cp.Graph("mapped")
    outer.map("each", inner, over=outer.add("items", lambda: list(range(n))))
    return outer


def _scan(store: RunStore, limit: int) -> list[cp.RunRecord]:
    """The top-level runs found by reading ever more of the newest records: the run
    index's default ``top_runs``, what the list cost before the store had an index of them."""
    return RunIndex.top_runs(store, limit)


def _timed(fn: object, looks: int) -> float:
    began = time.perf_counter()
    for _ in range(looks):
        fn()  # type: ignore[operator]
    return (time.perf_counter() - began) / looks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--looks", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(str(Path(tmp) / "runs.db"))
        single = cp.Graph("single")
        single.add("one", lambda: 1)
        cp.run_sync(single, store=store)
        began = time.perf_counter()
        cp.run_sync(_mapped(args.items), store=store)
        print(f"store: 2 top-level runs, {args.items:,} sub-runs "
              f"(made in {time.perf_counter() - began:.1f} s)")
        rows = RunRows(store)
        assert len(rows.records(LIMIT)) == 2 == len(_scan(store, LIMIT))
        now = _timed(lambda: rows.records(LIMIT), args.looks)
        scan = _timed(lambda: _scan(store, LIMIT), args.looks)
        newest = _timed(lambda: store.runs(LIMIT), args.looks)
        print(f"records(200), as the stream looks (top_runs): {now * 1000:8.3f} ms a look")
        print(f"a scan of the newest records until 200:        {scan * 1000:8.3f} ms a look "
              f"({scan / now:.0f}x)")
        print(f"the newest 200 with sub-runs (before):         {newest * 1000:8.3f} ms a look "
              f"({newest / now:.1f}x)")
        store.close()
    print("load average:", " ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
