"""The command line on the L1 graph: what ``counterpoint run`` adds to a run of 100,000 nodes.

    python -m benchmarks.cli_large [--width 1000 --layers 100] [--trials 3]

Each trial starts two fresh processes, in turn, on a new SQLite store each: ``counterpoint
run GRAPH.py -q`` (load the file, check the graph, run it, print the summary) and a
script that builds the same graph and calls ``cp.run_sync`` on it (what a user's own
script pays). Both build the graph the same way (``benchmarks.large.build_l1``) and import
the same package; the difference is the command line's own work: its preflight, its
display, its summary (metrics of 100,000 nodes, the budget and routing read from the
run's events). Printed: each one's median wall seconds and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GRAPH = """
from benchmarks.large import build_l1


def graph():
    return build_l1({width}, {layers})
"""
SCRIPT = """
import sys
import counterpoint as cp
from benchmarks.large import build_l1

result = cp.run_sync(build_l1({width}, {layers}), store=cp.SQLiteStore(sys.argv[1]))
assert result.ok, result
"""


def _timed(command: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, cwd=REPO)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=1000)
    parser.add_argument("--layers", type=int, default=100)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as where:
        graph = Path(where) / "l1.py"
        graph.write_text(GRAPH.format(width=args.width, layers=args.layers))
        script = Path(where) / "script.py"
        script.write_text(SCRIPT.format(width=args.width, layers=args.layers))
        cli: list[float] = []
        plain: list[float] = []
        for trial in range(args.trials):
            cli.append(_timed([sys.executable, "-m", "counterpoint.cli", "run",
                               f"{graph}:graph", "-q", "--db",
                               str(Path(where) / f"cli{trial}.db")], env))
            plain.append(_timed([sys.executable, str(script),
                                 str(Path(where) / f"script{trial}.db")], env))
    nodes = args.width * args.layers
    med_cli, med_plain = statistics.median(cli), statistics.median(plain)
    print(f"L1 {args.width}x{args.layers} ({nodes:,} nodes), {args.trials} trials, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"counterpoint run -q   {med_cli:.3f} s  (" + ", ".join(f"{t:.2f}" for t in cli) + ")")
    print(f"script, cp.run_sync   {med_plain:.3f} s  (" +
          ", ".join(f"{t:.2f}" for t in plain) + ")")
    print(f"command line / script {med_cli / med_plain:.2f}x "
          f"(+{med_cli - med_plain:.3f} s)")


if __name__ == "__main__":
    main()
