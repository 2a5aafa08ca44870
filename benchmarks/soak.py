"""Soak: keep ``--concurrent`` diamond workflows in flight in the sharded mode for
``--minutes``, and print, at each minute, the resident memory of the controller and of
each shard actor, the runs ended so far and the errors. Exits 1 on any error (a run that
did not succeed, a shard that died, a wrong output).

The workflows are ``benchmarks.workloads.diamond`` (A -> {B, C, D} -> E, 10 ms sleeps),
placed with ``counterpoint.ray.ShardPool.stream`` on 2 shard actors of a local Ray
cluster of 2 CPUs, each logging to its own SQLite file in a temporary folder (its size is
printed too; it grows with every run, as a log does). Memory is flat when the RSS columns
stop growing after the first minutes.

    python -m benchmarks.soak                          # 10 minutes, 10,000 in flight
    python -m benchmarks.soak --minutes 1 --concurrent 500
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.counterpoint_runner import build_graph, expected_outputs
from benchmarks.workloads import diamond

SHARDS = 2
MIB = 1 << 20


def _inputs(until: float) -> Iterator[dict[str, Any]]:
    """Empty inputs for as long as the soak lasts."""
    while time.monotonic() < until:
        yield {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--concurrent", type=int, default=10_000,
                        help="workflows in flight at once, over all shards")
    args = parser.parse_args()
    if args.concurrent < SHARDS or args.minutes <= 0:
        parser.error(f"--concurrent must be >= {SHARDS} and --minutes > 0")
    from counterpoint.ray import ShardPool
    from counterpoint.ray.cluster import connect
    from counterpoint.ray.shards import IN_FLIGHT, resident_bytes
    connect(None, num_cpus=SHARDS)
    graph = build_graph(diamond())
    want = {"E": expected_outputs(graph)["E"]}  # the diamond's output: its last node
    batch = max(1, args.concurrent // (SHARDS * IN_FLIGHT))
    errors: list[str] = []
    ended = 0
    with tempfile.TemporaryDirectory() as tmp, \
            ShardPool(SHARDS, store_dir=Path(tmp)) as pool:
        began = time.monotonic()
        until = began + 60 * args.minutes
        next_report = began
        print(f"soak: {args.concurrent:,} diamonds in flight ({SHARDS} shards x "
              f"{IN_FLIGHT} batches of {batch:,}) for {args.minutes:g} min", flush=True)
        print(f"{'minute':>6} {'ended':>10} {'runs/s':>8} {'in flight':>10} "
              f"{'controller MiB':>15} {'shard MiB':>18} {'log MiB':>8} {'errors':>7}")

        def report(minute: float) -> None:
            shards = " ".join(f"{rss / MIB:8.1f}" for rss in pool.rss())
            log = sum(p.stat().st_size for p in Path(tmp).glob("shard-*.db*")) / MIB
            rate = ended / max(time.monotonic() - began, 1e-9)
            print(f"{minute:6.1f} {ended:10,} {rate:8,.0f} {pool.in_flight:10,} "
                  f"{resident_bytes() / MIB:15.1f} {shards:>18} {log:8.1f} "
                  f"{len(errors):7}", flush=True)

        try:
            for summaries in pool.stream(graph, _inputs(until), batch=batch,
                                         concurrency=args.concurrent):
                for summary in summaries:
                    ended += 1
                    if summary.status != "succeeded" or summary.output is None:
                        errors.append(f"run {summary.run_id}: {summary.status}")
                    elif summary.output != want:
                        errors.append(f"run {summary.run_id}: wrong output {summary.output}")
                now = time.monotonic()
                if now >= next_report:
                    report((now - began) / 60)
                    next_report += 60
        except Exception as exc:  # a shard that died too often, the cluster gone
            errors.append(f"{type(exc).__name__}: {exc}")
        report((time.monotonic() - began) / 60)
    for error in errors[:20]:
        print(f"error: {error}", file=sys.stderr)
    print(f"{ended:,} runs ended, {len(errors)} errors: {'PASS' if not errors else 'FAIL'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
