"""The runs list over a store crowded with sub-runs: the top-level runs behind them.

    python -m benchmarks.ui_sub_runs [--items 20000] [--looks 20]

A finished map over a one-node sub-graph (``--items`` sub-runs) in a temporary SQLite
store, with one top-level run older than it. The web view lists top-level runs only
(sub-runs with ``?sub_runs=1``), and the index has no "top-level only" read, so the runs
stream, which reads the list about every 0.5 s, must look past the sub-runs. Measured in
the same invocation, ``--looks`` times each: :meth:`RunRows.records` as the stream calls
it (one scan of every record, then the newest records and the runs found, by id, until
the next scan), against a scan of every record at each look (what the list cost at
first), and against the newest 200 records with the sub-runs (what the list read before
it left them out).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import counterpoint as cp
from counterpoint.store import open_store
from counterpoint.ui.rows import SCAN_SECONDS, RunRows

LIMIT = 200


def _mapped(n: int) -> cp.Graph:
    inner = cp.Graph("item")
    inner.add("double", lambda x: 2 * x, x=inner.input("x"))
    outer = cp.Graph("mapped")
    outer.map("each", inner, over=outer.add("items", lambda: list(range(n))))
    return outer


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
        assert len(rows.records(LIMIT)) == 2  # the first look scans
        now = _timed(lambda: rows.records(LIMIT), args.looks)
        scan = _timed(lambda: rows._scan(LIMIT), args.looks)
        newest = _timed(lambda: store.runs(LIMIT), args.looks)
        print(f"records(200), as the stream looks:  {now * 1000:8.1f} ms a look")
        print(f"a scan of every record at each look: {scan * 1000:8.1f} ms a look "
              f"({scan / now:.0f}x)")
        print(f"newest 200 with sub-runs (before):   {newest * 1000:8.1f} ms a look "
              f"({now / newest:.1f}x of it)")
        store.close()
    print("load average:", " ".join(f"{v:.2f}" for v in os.getloadavg()),
          f"(a scan is made at most every {SCAN_SECONDS:.0f} s: "
          f"{scan / SCAN_SECONDS:.1%} of a core at this size)")


if __name__ == "__main__":
    main()
