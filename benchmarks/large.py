"""L1, a large graph: building and running 100,000 nodes, against hand-written asyncio.

The graph is layered: `L1_WIDTH` nodes a layer, `L1_LAYERS` layers. Node ``n{k}-{i}`` of
layer k > 0 reads two nodes of layer k - 1 through keyword inputs, ``left=n{k-1}-{i}``
and ``right=n{k-1}-{(i + 1) % width}``; the nodes of layer 0 read a literal ``i``. Every
step is a trivial async function (`seed`, `mix`) with annotated parameters, added the way
a user writes it, with ``g.add(...)``. It measures:

- **build**: wall µs per node of building the graph (every ``g.add``) plus
  ``g.validate()``, the cost a user pays before a run starts (target ≤ 5 µs per node);
- **run**: wall seconds from calling ``cp.run_sync(graph, store=SQLiteStore(...))`` to
  its result, against a hand-written asyncio version of the same graph (one task per
  node, started by the task that finishes its last input, in one ``TaskGroup``) timed in
  the same invocation (target ≤ 1.5 × asyncio); also the run's own makespan
  (``result.metrics.makespan``, from its log's timestamps), and, not judged, the ratios
  to the other ways of writing it by hand in :mod:`benchmarks.large_asyncio` (every
  task created up front, awaiting its inputs' tasks);
- **peak RSS** of a fresh child process that builds the graph and runs it once (its
  VmHWM, plus the SQLite writer process's).

The build is timed under the process's collector settings (Python's defaults unless
``--gc tuned``), as a user's script builds its graph before it calls ``cp.run_sync``; this
is the one judged. It is timed again under ``cp.tune_gc()``'s, as ``counterpoint run``
builds a graph file's graph: on a large graph the collector's full collections, which
walk every node built so far, are a large part of the cost. ``cp.run_sync`` tunes the
collector first, so the asyncio baseline runs under the same thresholds as the run it is
compared with. Every run is verified: each
node ran once and produced the value the plain-Python reference (`expected_values`)
computes.

    python -m benchmarks.large                 # the L1 table, 3 trials
    python -m benchmarks.large --width 100 --layers 10 --trials 1
    python benchmarks/run.py --only L1         # the same, from the main driver
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import counterpoint as cp
from benchmarks.counterpoint_runner import _peak_rss_bytes
from benchmarks.large_asyncio import BASELINES, MODULUS, mix, run_l1_asyncio, seed
from counterpoint.garbage import THRESHOLDS as GC_THRESHOLDS

__all__ = [
    "L1_LAYERS",
    "L1_WIDTH",
    "L1Result",
    "bench_l1",
    "build_l1",
    "expected_values",
    "measure_l1_rss",
    "mix",
    "run_l1_asyncio",
    "run_l1_counterpoint",
    "seed",
]

REPO_ROOT = Path(__file__).resolve().parents[1]

L1_WIDTH = 1000
L1_LAYERS = 100
L1_TARGET_BUILD_US = 5.0
L1_TARGET_VS_ASYNCIO = 1.5
L1_TRIALS = 3
DEFAULT_THRESHOLDS = gc.get_threshold()
"""The collector's thresholds at import, before any tuning."""
DEFAULT_GC_BASELINE = "awaiting"
DEFAULT_GC = "awaiting, default gc"
"""The baseline also timed under :data:`DEFAULT_THRESHOLDS`, as a script that never tunes
the collector runs it (``cp.run_sync`` tunes it for the run it is compared with)."""


def node_id(layer: int, i: int) -> str:
    return f"n{layer}-{i}"


def build_l1(width: int = L1_WIDTH, layers: int = L1_LAYERS) -> cp.Graph:
    """The L1 graph, built with ``g.add`` and validated."""
    g = cp.Graph("L1")
    prev = [g.add(node_id(0, i), seed, i=i) for i in range(width)]
    for k in range(1, layers):
        prev = [g.add(node_id(k, i), mix, left=prev[i], right=prev[(i + 1) % width])
                for i in range(width)]
    g.validate()
    return g


def expected_values(width: int, layers: int) -> list[list[int]]:
    """Every node's output, layer by layer, computed in plain Python."""
    values = [list(range(width))]
    for _ in range(1, layers):
        prev = values[-1]
        values.append([(prev[i] * 31 + prev[(i + 1) % width]) % MODULUS for i in range(width)])
    return values


# --- counterpoint ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CounterpointRun:
    """One timed ``cp.run_sync`` of the L1 graph."""

    seconds: float
    """Wall seconds from calling ``cp.run_sync`` to its result."""
    makespan: float
    """``result.metrics.makespan``: run creation to run end, from the log's timestamps."""
    flush_seconds: float
    """Wall seconds of ``store.flush_sync()`` afterwards (the log's remaining writes)."""


def run_l1_counterpoint(graph: cp.Graph, store: cp.SQLiteStore, width: int,
                        layers: int) -> CounterpointRun:
    """Run the L1 graph once with ``cp.run_sync``; verify it (outside the clock)."""
    start = time.perf_counter()
    result = cp.run_sync(graph, store=store)
    seconds = time.perf_counter() - start
    flushed = time.perf_counter()
    store.flush_sync()
    flush_seconds = time.perf_counter() - flushed
    _verify(result, store, width, layers)
    return CounterpointRun(seconds=seconds, makespan=result.metrics.makespan,
                           flush_seconds=flush_seconds)


def _verify(result: cp.RunResult, store: cp.RunStore, width: int, layers: int) -> None:
    if not result.ok:
        raise AssertionError(f"L1: run {result.run_id} {result.status}")
    outputs = result.outputs
    expected = expected_values(width, layers)
    wrong = [node_id(k, i) for k in range(layers) for i in range(width)
             if outputs.get(cp.NodeId(node_id(k, i))) != expected[k][i]]
    if wrong or len(outputs) != width * layers:
        raise AssertionError(f"L1: run {result.run_id}: {len(wrong)} wrong outputs "
                             f"(e.g. {wrong[:5]}), {len(outputs)} outputs in all")
    again = [k for k, n in result.nodes.items() if n.attempts != 1]
    if again:
        raise AssertionError(f"L1: run {result.run_id}: nodes not run once: {again[:5]}")
    status = store.run(result.run_id).status
    if status != "succeeded":
        raise AssertionError(f"L1: run {result.run_id} is {status!r} in the store")


def _timed_build(width: int, layers: int) -> tuple[float, cp.Graph]:
    start = time.perf_counter()
    graph = build_l1(width, layers)
    return time.perf_counter() - start, graph


# --- peak RSS in a child process -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class L1Rss:
    """What the L1 child process reported."""

    peak_bytes: int
    """The child's VmHWM after building the graph and running it once."""
    built_bytes: int
    """Its VmHWM after building the graph, before the run."""
    writer_peak_bytes: int
    """VmHWM of the store's writer process (0 where there is no /proc)."""
    build_seconds: float
    run_seconds: float


def _rss_child(width: int, layers: int) -> None:
    build_seconds, graph = _timed_build(width, layers)
    built = _peak_rss_bytes()
    with tempfile.TemporaryDirectory(prefix="counterpoint-bench-l1-rss-") as tmp:
        store = cp.SQLiteStore(Path(tmp) / "runs.db")
        try:
            run = run_l1_counterpoint(graph, store, width, layers)
            peak = _peak_rss_bytes()
            writer = store.writer_pid
            writer_peak = _peak_rss_bytes(writer) if writer is not None else 0
        finally:
            store.close()
    print(json.dumps({"peak_bytes": peak, "built_bytes": built, "writer_peak_bytes": writer_peak,
                      "build_seconds": build_seconds, "run_seconds": run.seconds}))


def measure_l1_rss(width: int = L1_WIDTH, layers: int = L1_LAYERS, timeout: float = 900.0,
                   *, tuned_gc: bool = False) -> L1Rss:
    """Peak RSS of building and running L1 once in a fresh process that does nothing else
    (with `tuned_gc`, under ``cp.tune_gc()`` from the start, like its parent)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH"))
                                        if p)
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.large", "--rss-child", "--width", str(width),
         "--layers", str(layers), *(["--tuned-gc"] if tuned_gc else [])],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"L1 RSS child failed ({proc.returncode}): {proc.stderr[-2000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return L1Rss(peak_bytes=int(data["peak_bytes"]), built_bytes=int(data["built_bytes"]),
                 writer_peak_bytes=int(data["writer_peak_bytes"]),
                 build_seconds=float(data["build_seconds"]),
                 run_seconds=float(data["run_seconds"]))


# --- the benchmark ---------------------------------------------------------------------------


@dataclass
class L1Result:
    """Every sample of one L1 benchmark, and its verdicts."""

    width: int
    layers: int
    build_seconds: list[float] = field(default_factory=list)
    """Under the collector settings the benchmark was started with."""
    tuned_build_seconds: list[float] = field(default_factory=list)
    """Under ``cp.tune_gc()``'s (as ``counterpoint run`` builds a graph file's graph)."""
    cp_runs: list[CounterpointRun] = field(default_factory=list)
    asyncio_seconds: list[float] = field(default_factory=list)
    other_seconds: dict[str, list[float]] = field(default_factory=dict)
    """The baselines reported beside the judged one (:data:`BASELINES`, and
    :data:`DEFAULT_GC`) -> their samples."""
    rss: L1Rss | None = None

    @property
    def nodes(self) -> int:
        return self.width * self.layers

    @property
    def build_us_per_node(self) -> float:
        return statistics.median(self.build_seconds) / self.nodes * 1e6

    @property
    def tuned_build_us_per_node(self) -> float:
        return statistics.median(self.tuned_build_seconds) / self.nodes * 1e6

    @property
    def cp_seconds(self) -> float:
        return statistics.median(r.seconds for r in self.cp_runs)

    @property
    def makespan(self) -> float:
        return statistics.median(r.makespan for r in self.cp_runs)

    @property
    def aio_seconds(self) -> float:
        return statistics.median(self.asyncio_seconds)

    @property
    def ratio(self) -> float:
        return self.cp_seconds / self.aio_seconds

    def other_ratios(self) -> dict[str, float]:
        """Counterpoint's run over each baseline reported beside the judged one."""
        return {name: self.cp_seconds / statistics.median(samples)
                for name, samples in self.other_seconds.items()}

    @property
    def pass_build(self) -> bool:
        return self.build_us_per_node <= L1_TARGET_BUILD_US

    @property
    def pass_run(self) -> bool:
        return self.ratio <= L1_TARGET_VS_ASYNCIO

    def as_json(self) -> dict[str, Any]:
        rss = self.rss
        return {
            "workload": f"L1-layered-{self.width}x{self.layers}", "nodes": self.nodes,
            "trials": len(self.build_seconds),
            "build": {"samples_s": self.build_seconds, "us_per_node": self.build_us_per_node,
                      "tuned_gc_samples_s": self.tuned_build_seconds,
                      "tuned_gc_us_per_node": self.tuned_build_us_per_node},
            "counterpoint": {"samples_s": [r.seconds for r in self.cp_runs],
                             "median_s": self.cp_seconds,
                             "makespan_samples_s": [r.makespan for r in self.cp_runs],
                             "makespan_median_s": self.makespan,
                             "flush_samples_s": [r.flush_seconds for r in self.cp_runs]},
            "asyncio": {"samples_s": self.asyncio_seconds, "median_s": self.aio_seconds},
            "ratio_counterpoint_over_asyncio": self.ratio,
            "other_baselines": {name: {"samples_s": samples,
                                       "median_s": statistics.median(samples),
                                       "ratio_counterpoint_over_it": self.other_ratios()[name]}
                                for name, samples in self.other_seconds.items()},
            "peak_rss": None if rss is None else {
                "peak_mb": rss.peak_bytes / 2**20, "built_mb": rss.built_bytes / 2**20,
                "writer_peak_mb": rss.writer_peak_bytes / 2**20,
                "build_s": rss.build_seconds, "run_s": rss.run_seconds},
            "target": {"build_us_per_node_max": L1_TARGET_BUILD_US,
                       "counterpoint_over_asyncio_max": L1_TARGET_VS_ASYNCIO},
            "pass": self.pass_build and self.pass_run, "pass_build": self.pass_build,
            "pass_run": self.pass_run,
        }


def measure_l1(tmp: Path, trials: int = L1_TRIALS, width: int = L1_WIDTH,
               layers: int = L1_LAYERS, rss: bool = True,
               log: Callable[[str], None] = lambda _: None) -> L1Result:
    """Run the L1 benchmark: `trials` builds, runs and baselines, interleaved, then the RSS
    child. Each trial builds the graph under the collector settings this was called with,
    then under ``cp.tune_gc()``'s, and runs the second graph and the baseline under the
    latter; the settings are restored at the end."""
    thresholds = gc.get_threshold()
    out = L1Result(width=width, layers=layers)
    graph: cp.Graph | None = None
    store = cp.SQLiteStore(tmp / "l1.db")
    try:
        for trial in range(trials):
            graph = None  # the previous trial's graph is garbage before the next build
            gc.set_threshold(*thresholds)
            gc.collect()
            seconds, graph = _timed_build(width, layers)
            out.build_seconds.append(seconds)
            graph = None
            cp.tune_gc()  # what cp.run_sync does first: the baseline gets the same
            gc.collect()
            seconds, graph = _timed_build(width, layers)
            out.tuned_build_seconds.append(seconds)
            gc.collect()
            out.cp_runs.append(run_l1_counterpoint(graph, store, width, layers))
            gc.collect()
            seconds, values = run_l1_asyncio(width, layers)
            if values != expected_values(width, layers):
                raise AssertionError("L1: the asyncio baseline computed wrong outputs")
            out.asyncio_seconds.append(seconds)
            for name, (_, baseline) in BASELINES.items():  # reported, not judged
                gc.collect()
                seconds_other, values = baseline(width, layers)
                if values != expected_values(width, layers):
                    raise AssertionError(f"L1: the asyncio baseline {name!r} computed wrong "
                                         "outputs")
                out.other_seconds.setdefault(name, []).append(seconds_other)
            gc.set_threshold(*DEFAULT_THRESHOLDS)  # as a script that never tunes it runs
            gc.collect()
            out.other_seconds.setdefault(DEFAULT_GC, []).append(
                BASELINES[DEFAULT_GC_BASELINE][1](width, layers)[0])
            cp.tune_gc()
            log(f"L1 trial {trial + 1}/{trials}: build {out.build_seconds[-1]:.2f} s "
                f"({out.tuned_build_seconds[-1]:.2f} s under cp.tune_gc()), "
                f"counterpoint {out.cp_runs[-1].seconds:.2f} s, asyncio {seconds:.2f} s")
    finally:
        store.close()
        gc.set_threshold(*thresholds)
    del graph
    if rss:
        out.rss = measure_l1_rss(width, layers, tuned_gc=thresholds != DEFAULT_THRESHOLDS)
    return out


def print_l1(result: L1Result, console: Any) -> None:
    """The L1 table (``console`` is a rich Console)."""
    from rich.table import Table

    def verdict(ok: bool) -> str:
        return "[green]PASS[/green]" if ok else "[red]MISS[/red]"

    table = Table(title=f"L1 layered graph, {result.width:,} wide x {result.layers} layers = "
                        f"{result.nodes:,} trivial async nodes, 2 keyword inputs each "
                        f"({len(result.build_seconds)} trials, medians)")
    for col in ("measure", "value", "target", "result"):
        table.add_column(col, justify="left" if col == "measure" else "right")
    table.add_row("build: g.add x nodes + g.validate()",
                  f"{result.build_us_per_node:.2f} µs/node "
                  f"({statistics.median(result.build_seconds):.2f} s)",
                  f"≤ {L1_TARGET_BUILD_US:g} µs/node", verdict(result.pass_build))
    table.add_row("build under cp.tune_gc() (as `counterpoint run` builds it)",
                  f"{result.tuned_build_us_per_node:.2f} µs/node "
                  f"({statistics.median(result.tuned_build_seconds):.2f} s)", "", "")
    table.add_row("counterpoint: cp.run_sync, call to result (SQLite log)",
                  f"{result.cp_seconds:.2f} s", "", "")
    table.add_row("asyncio (hand-written, same graph)", f"{result.aio_seconds:.2f} s", "", "")
    table.add_row("counterpoint ÷ asyncio", f"{result.ratio:.3f}",
                  f"≤ {L1_TARGET_VS_ASYNCIO:g}", verdict(result.pass_run))
    for name, ratio in result.other_ratios().items():  # reported, not judged
        what = (f"{BASELINES[DEFAULT_GC_BASELINE][0]}, Python's collector thresholds"
                if name == DEFAULT_GC else BASELINES[name][0])
        table.add_row(f"  not judged: {what}",
                      f"{statistics.median(result.other_seconds[name]):.2f} s",
                      f"counterpoint ÷ it {ratio:.3f}", "")
    table.add_row("counterpoint's own makespan (result.metrics)", f"{result.makespan:.2f} s",
                  "", "")
    if result.rss is not None:
        rss = result.rss
        table.add_row("peak RSS, fresh child (own + SQLite writer)",
                      f"{rss.peak_bytes / 2**20:,.0f} + {rss.writer_peak_bytes / 2**20:,.0f} MB",
                      "", "")
    console.print(table)
    flush = statistics.median(r.flush_seconds for r in result.cp_runs)
    console.print(f"  note: the build ran under the collector thresholds {gc.get_threshold()}, "
                  f"both runners under cp.tune_gc()'s {GC_THRESHOLDS} (cp.run_sync "
                  f"sets them first); store.flush_sync() after the run took {flush:.2f} s "
                  "(median, not in the run's time)")
    if result.rss is not None:
        console.print(f"  note: the RSS child built the graph in {result.rss.build_seconds:.2f} s "
                      f"(VmHWM {result.rss.built_bytes / 2**20:,.0f} MB after the build) and "
                      f"ran it in {result.rss.run_seconds:.2f} s")
    console.print()


def bench_l1(trials: int, tmp: Path, console: Any) -> dict[str, Any]:
    """L1 as `benchmarks/run.py` runs it: table, notes and the JSON record."""
    result = measure_l1(tmp, trials=trials, log=console.print)
    print_l1(result, console)
    return result.as_json()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--width", type=int, default=L1_WIDTH)
    parser.add_argument("--layers", type=int, default=L1_LAYERS)
    parser.add_argument("--trials", type=int, default=L1_TRIALS)
    parser.add_argument("--no-rss", action="store_true", help="skip the peak-RSS child")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the results to FILE")
    parser.add_argument("--rss-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tuned-gc", action="store_true", help="call cp.tune_gc() first")
    args = parser.parse_args(argv)
    if args.tuned_gc:
        cp.tune_gc()
    if args.rss_child:
        _rss_child(args.width, args.layers)
        return
    from rich.console import Console

    console = Console(highlight=False)
    with tempfile.TemporaryDirectory(prefix="counterpoint-bench-l1-") as tmp:
        result = measure_l1(Path(tmp), trials=args.trials, width=args.width,
                            layers=args.layers, rss=not args.no_rss, log=console.print)
    print_l1(result, console)
    if args.json:
        args.json.write_text(json.dumps(result.as_json(), indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
