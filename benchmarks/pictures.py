"""P1, graph pictures: the time to draw a graph as SVG, against Graphviz's ``dot`` drawing
the same graph from ``Graph.to_dot()`` in the same invocation (when ``dot`` is
installed), and the edge crossings the barycentre sweeps remove against the declaration
order (``sweeps=0``).

The graph is layered like L1 (``--width`` nodes a layer, ``--layers`` layers), each node
reading two nodes of the layer above, one of them at a random offset so that edges cross.

    python -m benchmarks.pictures                       # 20 x 10 and 40 x 50
    python -m benchmarks.pictures --width 10 --layers 10 --trials 1
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import time

import counterpoint as cp
from counterpoint.pictures import describe, layered, to_svg


def _mix(left: int, right: int) -> int:
    return left + right


def _seed(i: int) -> int:
    return i


def build(width: int, layers: int, seed: int = 7) -> cp.Graph:
    rnd = random.Random(seed)
    g = cp.Graph(f"p1-{width}x{layers}")
    above = [g.add(f"n0-{i}", _seed, i=i) for i in range(width)]
    for k in range(1, layers):
        above = [g.add(f"n{k}-{i}", _mix, left=above[i], right=above[rnd.randrange(width)])
                 for i in range(width)]
    return g


def _timed(fn: object, trials: int) -> float:
    times = []
    for _ in range(trials):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(width: int, layers: int, trials: int) -> None:
    g = build(width, layers)
    picture = describe(g)
    keys = [b.key for b in picture.boxes]
    edges = [(line.source, line.target) for line in picture.lines]
    ours = _timed(lambda: to_svg(describe(g)), trials)
    plain = layered(keys, edges, sweeps=0).crossings()
    swept = layered(keys, edges).crossings()
    line = (f"P1 {width}x{layers} ({len(g.nodes)} nodes, {len(edges)} edges): "
            f"svg {ours * 1000:.1f} ms ({ours / len(g.nodes) * 1e6:.0f} us/node); "
            f"crossings {plain} -> {swept} ({swept / plain if plain else 0:.2f}x)")
    if shutil.which("dot"):
        text = g.to_dot()
        theirs = _timed(lambda: subprocess.run(["dot", "-Tsvg"], input=text, text=True,
                                               capture_output=True, check=True), trials)
        line += f"; graphviz dot {theirs * 1000:.1f} ms, ours / dot = {ours / theirs:.2f}x"
    else:
        line += "; graphviz dot not installed (no baseline)"
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int)
    parser.add_argument("--layers", type=int)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    sizes = [(args.width, args.layers)] if args.width and args.layers else [(20, 10), (40, 50)]
    for width, layers in sizes:
        measure(width, layers, args.trials)


if __name__ == "__main__":
    main()
