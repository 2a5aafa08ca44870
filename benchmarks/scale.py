"""Issue 17's benchmarks in one command: Ray (W6, W3 sharded), PostgreSQL, and the soak.

Each part runs in a child process of its own (each starts what it needs: a local Ray
cluster, a PostgreSQL server), one after the other so they do not compete for the two
cores, with its output passed through; a summary at the end gives each part's exit code.

- ``benchmarks.ray``: W6, 64 CPU-bound nodes on the Ray backend against in-process and a
  ``ProcessPoolExecutor``; W3 sharded, 10,000 and 100,000 diamonds over 2 shard actors
  against single-process counterpoint and asyncio (exit 1 on a missed target);
- ``benchmarks.postgres``: W1 and W3 on the PostgreSQL store against SQLite (ratios, no
  target), with DBOS Transact when it is importable;
- ``benchmarks.soak`` (only with ``--soak-minutes N``): 10,000 workflows in flight in the
  sharded mode for N minutes, RSS each minute (exit 1 on any error).

    python -m benchmarks.scale [--quick] [--soak-minutes 10] [--postgres-trials 3] [--no-dbos]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time


def _part(name: str, args: list[str]) -> tuple[str, int, float]:
    command = [sys.executable, "-m", f"benchmarks.{name}", *args]
    print(f"\n=== {' '.join(['python', *command[1:]])}", flush=True)
    started = time.perf_counter()
    code = subprocess.call(command)
    return name, code, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes everywhere: checks that it runs, not numbers to report")
    parser.add_argument("--soak-minutes", type=float, default=0.0,
                        help="also run the soak for this long (0: skip it)")
    parser.add_argument("--soak-concurrent", type=int, default=10_000)
    parser.add_argument("--postgres-trials", type=int, default=3)
    parser.add_argument("--no-dbos", action="store_true", help="skip the DBOS baseline")
    args = parser.parse_args()
    quick = ["--quick"] if args.quick else []
    parts = [_part("ray", quick)]
    postgres = quick or ["--trials", str(args.postgres_trials)]
    parts.append(_part("postgres", postgres + (["--no-dbos"] if args.no_dbos else [])))
    if args.soak_minutes > 0:
        parts.append(_part("soak", ["--minutes", str(args.soak_minutes),
                                    "--concurrent", str(args.soak_concurrent)]))
    print("\n=== summary")
    for name, code, seconds in parts:
        verdict = "ok" if code == 0 else f"exit {code} (a missed target or an error: see above)"
        print(f"  benchmarks.{name:<9} {seconds:7.1f} s  {verdict}")
    return 0 if all(code == 0 for _, code, _ in parts) else 1


if __name__ == "__main__":
    sys.exit(main())
