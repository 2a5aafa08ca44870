"""W1 and W3 on the PostgreSQL store vs the SQLite store, in one invocation.

Starts its own PostgreSQL server (:class:`counterpoint.testing.postgres.PostgresServer`,
default durability settings: ``fsync`` on, ``synchronous_commit`` on) in a temporary
folder, runs each workload on a fresh SQLite file and on a fresh PostgreSQL database
alternately, and prints the median per-node microseconds and the ratio PG / SQLite.
DBOS Transact is not installed here, so it is not compared.

    PYTHONPATH=src:. python -m benchmarks.postgres --w1 200 --w3 50 --trials 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
from pathlib import Path

import counterpoint as cp
from benchmarks.counterpoint_runner import build_graph, run_counterpoint, run_counterpoint_many
from benchmarks.workloads import chain, diamond
from counterpoint.store.postgres import PostgresStore
from counterpoint.testing.postgres import PostgresServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--w1", type=int, default=200, help="W1 chain length")
    parser.add_argument("--w3", type=int, default=50, help="W3 concurrent diamonds")
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    with PostgresServer() as server, tempfile.TemporaryDirectory() as tmp:
        os.environ.update(server.env)
        shapes = [("W1", build_graph(chain(args.w1)), args.w1, None),
                  ("W3", build_graph(diamond(0.0)), 5 * args.w3, args.w3)]
        print(f"{'workload':<10}{'sqlite µs/node':>16}{'postgres µs/node':>18}{'ratio':>8}")
        for name, graph, nodes, many in shapes:
            times: dict[str, list[float]] = {"sqlite": [], "postgres": []}
            for trial in range(args.trials):
                for kind in ("sqlite", "postgres"):
                    store: cp.RunStore = (
                        cp.SQLiteStore(Path(tmp) / f"{name}-{trial}.db") if kind == "sqlite"
                        else PostgresStore(server.create_database()))
                    try:
                        seconds = asyncio.run(
                            run_counterpoint(graph, store, None) if many is None
                            else run_counterpoint_many(graph, store, many))
                    finally:
                        store.close()
                    times[kind].append(seconds)
            lite = statistics.median(times["sqlite"]) / nodes * 1e6
            pg = statistics.median(times["postgres"]) / nodes * 1e6
            label = f"{name}-{args.w1}" if many is None else f"{name}x{many}"
            print(f"{label:<10}{lite:>16.1f}{pg:>18.1f}{pg / lite:>8.2f}")


if __name__ == "__main__":
    main()
