"""W1 and W3 on the PostgreSQL store vs the SQLite store, and vs DBOS Transact, in one
invocation.

Starts its own PostgreSQL server (:class:`counterpoint.testing.postgres.PostgresServer`,
default durability settings: ``fsync`` on, ``synchronous_commit`` on) in a temporary
folder. Each shape runs on a fresh SQLite file and on a fresh PostgreSQL database,
alternately, ``--trials`` times; the table gives the median per-node microseconds and
the ratio PG / SQLite. Nodes are trivial (no sleep), so the numbers are the runtime's
and its log's cost per node: W1 is a chain of ``--w1`` nodes (default 1,000); W3 is
``--w3`` concurrent diamond workflows, A -> {B, C, D} -> E (default x200 and x1000).

DBOS Transact, if importable (``pip install dbos``; it is not a counterpoint
dependency), runs the same shapes as an optional baseline: each node is a durable
``@DBOS.step`` of a ``@DBOS.workflow``, with DBOS's system database in SQLite and in
PostgreSQL on the same server; the table then gives counterpoint / DBOS on the same
database kind. Without ``dbos``, or with ``--no-dbos``, those rows say why they were
skipped.

    PYTHONPATH=src:. python -m benchmarks.postgres            # W1-1000, W3 x200 and x1000
    PYTHONPATH=src:. python -m benchmarks.postgres --quick    # small sizes: checks it runs
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import counterpoint as cp
from benchmarks.counterpoint_runner import build_graph, run_counterpoint, run_counterpoint_many
from benchmarks.dbos_baseline import run_dbos, unavailable
from benchmarks.workloads import chain, diamond
from counterpoint.store.postgres import PostgresStore
from counterpoint.testing.postgres import PASSWORD, PostgresServer

KINDS = ("sqlite", "postgres")


@dataclass(frozen=True, slots=True)
class Shape:
    """One row of the table: a W1 chain (``diamonds`` is ``None``) or W3 diamonds."""

    label: str
    nodes: int
    chain: int | None = None
    diamonds: int | None = None


def _shapes(w1: int, w3: list[int]) -> list[Shape]:
    return [Shape(f"W1-{w1}", w1, chain=w1),
            *(Shape(f"W3x{n}", 5 * n, diamonds=n) for n in w3)]


def _counterpoint(shape: Shape, store: cp.RunStore) -> float:
    if shape.chain is not None:
        return asyncio.run(run_counterpoint(build_graph(chain(shape.chain)), store, None))
    assert shape.diamonds is not None
    return asyncio.run(run_counterpoint_many(build_graph(diamond(0.0)), store,
                                             shape.diamonds))


def _alternating(run: Callable[[str], float], trials: int, nodes: int) -> dict[str, float]:
    """Median µs per node of ``run(kind)`` for each kind, the kinds taken in turn within
    each trial (so a drift of the machine's speed falls on both alike)."""
    seconds: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for _ in range(trials):
        for kind in KINDS:
            seconds[kind].append(run(kind))
    return {kind: statistics.median(s) / nodes * 1e6 for kind, s in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--w1", type=int, default=1000, help="W1 chain length")
    parser.add_argument("--w3", type=str, default="200,1000",
                        help="W3 sizes: concurrent diamonds, comma-separated")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (W1-100, W3 x20 and x50, 1 trial): checks it runs; "
                             "not numbers to report")
    parser.add_argument("--no-dbos", action="store_true", help="skip the DBOS baseline")
    args = parser.parse_args()
    if args.quick:
        args.w1, args.w3, args.trials = 100, "20,50", 1
    shapes = _shapes(args.w1, [int(n) for n in args.w3.split(",") if n])
    skip_dbos = "--no-dbos given" if args.no_dbos else unavailable()
    if args.quick:
        print("quick mode: small sizes, one trial; these numbers only show that it runs")
    with PostgresServer() as server, tempfile.TemporaryDirectory() as tmp:
        os.environ.update(server.env)
        files = iter(range(1_000_000))

        def sqlite_file() -> Path:
            return Path(tmp) / f"run-{next(files)}.db"

        def pg_url() -> str:  # DBOS reads no PGPASSWORD: the password goes in its URL
            return server.create_database().replace("postgres@", f"postgres:{PASSWORD}@")

        def ours(shape: Shape, kind: str) -> float:
            store: cp.RunStore = cp.SQLiteStore(sqlite_file()) if kind == "sqlite" \
                else PostgresStore(server.create_database())
            try:
                return _counterpoint(shape, store)
            finally:
                store.close()

        def theirs(shape: Shape, kind: str) -> float:
            url = f"sqlite:///{sqlite_file()}" if kind == "sqlite" else pg_url()
            return run_dbos(url, chain=shape.chain, diamonds=shape.diamonds)

        print(f"{'workload':<10}{'sqlite µs/node':>16}{'postgres µs/node':>18}"
              f"{'PG/SQLite':>11}{'DBOS sqlite':>13}{'DBOS pg':>10}{'cp/DBOS sqlite':>16}"
              f"{'cp/DBOS pg':>12}")
        for shape in shapes:
            mine = _alternating(lambda kind, s=shape: ours(s, kind), args.trials, shape.nodes)
            line = (f"{shape.label:<10}{mine['sqlite']:>16.1f}{mine['postgres']:>18.1f}"
                    f"{mine['postgres'] / mine['sqlite']:>11.2f}")
            if skip_dbos is None:
                dbos = _alternating(lambda kind, s=shape: theirs(s, kind), args.trials,
                                    shape.nodes)
                line += (f"{dbos['sqlite']:>13.1f}{dbos['postgres']:>10.1f}"
                         f"{mine['sqlite'] / dbos['sqlite']:>16.3f}"
                         f"{mine['postgres'] / dbos['postgres']:>12.3f}")
            print(line, flush=True)
        if skip_dbos is not None:
            print(f"DBOS Transact baseline skipped: {skip_dbos}")
        else:
            print("DBOS columns: µs per durable step (W1: one workflow of N steps; W3: N "
                  "concurrent workflows of 5 steps); cp/DBOS < 1 means counterpoint is faster")


if __name__ == "__main__":
    main()
