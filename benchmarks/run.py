"""Benchmark driver: counterpoint against asyncio and LangGraph, same process, same session.

    python benchmarks/run.py [--quick] [--json FILE] [--only W1,L1,...] [--trials N]
                             [--gc default|tuned] [--loop asyncio|precise]

For each workload it runs counterpoint (SQLite log on: a fresh database file per workload
in a temporary directory, flushed inside the clock), the hand-written asyncio baseline,
LangGraph without persistence and LangGraph with its SQLite checkpointer, N trials each
(interleaved: trial i runs every runner once, with ``gc.collect()`` before each), and
prints the medians, the ratios and PASS/MISS against the targets. ``--json FILE`` writes
every sample, median, ratio and target. See benchmarks/README.md for the columns.

Every run is verified (each node ran once with the right output); a wrong result
aborts the benchmark rather than being timed.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator, Sequence  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from functools import partial  # noqa: E402
from importlib import metadata  # noqa: E402
from typing import Any  # noqa: E402

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import counterpoint as cp  # noqa: E402
from benchmarks.baselines import (  # noqa: E402
    run_asyncio,
    run_asyncio_many,
    run_langgraph,
    run_langgraph_many,
)
from benchmarks.counterpoint_runner import (  # noqa: E402
    CounterpointTrial,
    build_graph,
    measure_peak_rss,
    run_counterpoint_many,
    run_counterpoint_trial,
)
from benchmarks.large import bench_l1  # noqa: E402
from benchmarks.models import bench_overhead, bench_rate  # noqa: E402
from benchmarks.workloads import (  # noqa: E402
    Workload,
    chain,
    critical_path,
    diamond,
    fanout,
    layered,
    list_schedule_makespan,
    load_wfinstance,
    scaled_to_critical_path,
    total_work,
    wfinstance_paths,
)

# --- targets ----------------------------------------------------------------------------

W1_NODES = 1000
W1_TARGET_US_PER_NODE = 25.0
W2_BRANCHES = 1000
W2_SLEEP = 0.05
W2_TARGET_VS_ASYNCIO = 1.15
W3_SLEEP = 0.01
W3_COUNT = 10_000
W3_LANGGRAPH_COUNT = 1_000
W3_QUICK_COUNT = 1_000
W3_TARGET_RATE = 4000.0
W3_TARGET_RSS_MB = 400.0
W4_NODES = 500
W4_SEED = 0
W4_TARGET = 1.06
W5_CRITICAL_PATH = 1.0
W5_WORKERS = 8
W5_QUICK_TRACES = 3
W5_TARGET = 1.05

FAST_TRIALS = 9
"""W1, W2 and W4 trials are short (under 3 s even for LangGraph with its checkpointer), and
single W2 trials on the 2-core development VM spread over 25% (65-81 ms): nine keep the
median steady."""
SLOW_TRIALS = 3
QUICK_TRIALS = 3

CP = "counterpoint"
AIO = "asyncio"
LG = "langgraph"
LGC = "langgraph+sqlite"
RUNNERS = (CP, AIO, LG, LGC)
RUNNER_LABELS = {
    CP: "counterpoint (SQLite log)",
    AIO: "asyncio (hand-written)",
    LG: "LangGraph (no persistence)",
    LGC: "LangGraph + SqliteSaver",
}

console = Console(width=None if sys.stdout.isatty() else 160, highlight=False)


# --- measurement helpers ----------------------------------------------------------------


@dataclass
class Samples:
    """Wall seconds of every trial of one runner, plus counterpoint's own view of its runs."""

    seconds: list[float] = field(default_factory=list)
    trials: list[CounterpointTrial] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"median_s": self.median, "samples_s": self.seconds}
        if self.trials:
            data["log_makespan_median_s"] = statistics.median(t.log_makespan
                                                              for t in self.trials)
            data["log_critical_path_median_s"] = statistics.median(t.log_critical_path
                                                                   for t in self.trials)
            data["events_per_run"] = self.trials[-1].events
        return data


def measure(variants: dict[str, Callable[[], float]], trials: int) -> dict[str, Samples]:
    """Run every variant `trials` times, interleaved, with ``gc.collect()`` before each."""
    samples = {name: Samples() for name in variants}
    for _ in range(trials):
        for name, fn in variants.items():
            gc.collect()
            samples[name].seconds.append(fn())
    return samples


@contextmanager
def sqlite_store(tmp: Path, name: str) -> Iterator[cp.SQLiteStore]:
    """A fresh counterpoint SQLite store for one workload (created outside the clock)."""
    store = cp.SQLiteStore(tmp / f"{name}.db")
    try:
        yield store
    finally:
        store.close()


def cp_variant(graph: cp.Graph, store: cp.RunStore, workers: int | None,
               into: list[CounterpointTrial]) -> Callable[[], float]:
    def run() -> float:
        trial = asyncio.run(run_counterpoint_trial(graph, store, workers))
        into.append(trial)
        return trial.elapsed

    return run


def standard_variants(w: Workload, graph: cp.Graph, store: cp.RunStore,
                      cp_trials: list[CounterpointTrial], *, workers: int | None = None,
                      langgraph: bool = True, checkpointer: bool = True,
                      ) -> dict[str, Callable[[], float]]:
    variants: dict[str, Callable[[], float]] = {
        CP: cp_variant(graph, store, workers, cp_trials),
        AIO: lambda: run_asyncio(w, workers),
    }
    if langgraph:
        variants[LG] = lambda: run_langgraph(w, False, workers=workers)
    if checkpointer:
        variants[LGC] = lambda: run_langgraph(w, True, workers=workers)
    return variants


def collect(variants: dict[str, Callable[[], float]], trials: int,
            cp_trials: list[CounterpointTrial]) -> dict[str, Samples]:
    samples = measure(variants, trials)
    if CP in samples:
        samples[CP].trials = list(cp_trials)
    return samples


def verdict(ok: bool) -> str:
    return "[green]PASS[/green]" if ok else "[red]MISS[/red]"


def f3(x: float) -> str:
    return f"{x:.3f}"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def geomean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def cp_log_note(samples: Samples, nominal_cp: float | None = None) -> str:
    """How counterpoint's own metrics compare with the wall clock (for the notes)."""
    if not samples.trials:
        return ""
    log_ms = statistics.median(t.log_makespan for t in samples.trials)
    log_cp = statistics.median(t.log_critical_path for t in samples.trials)
    note = (f"counterpoint's own metrics (median): makespan {ms(log_ms)} ms vs wall "
            f"{ms(samples.median)} ms (wall - log = {ms(samples.median - log_ms)} ms); "
            f"measured critical path {ms(log_cp)} ms")
    if nominal_cp is not None:
        note += f" vs nominal {ms(nominal_cp)} ms"
    return note + f"; {samples.trials[-1].events} events per run"


def print_table(table: Table, notes: Sequence[str]) -> None:
    console.print(table)
    for note in notes:
        if note:
            console.print(f"  note: {note}")
    console.print()


# --- workloads --------------------------------------------------------------------------


DEFAULT_GC = gc.get_threshold()
"""The collector's thresholds at import, before any --gc tuning."""


@dataclass(frozen=True)
class Config:
    quick: bool
    trials: int | None
    tmp: Path

    def n_trials(self, slow: bool) -> int:
        if self.trials is not None:
            return self.trials
        if self.quick:
            return QUICK_TRIALS
        return SLOW_TRIALS if slow else FAST_TRIALS


def bench_w1(cfg: Config) -> dict[str, Any]:
    w = chain(W1_NODES)
    graph = build_graph(w)
    trials = cfg.n_trials(slow=False)
    cp_trials: list[CounterpointTrial] = []
    with sqlite_store(cfg.tmp, "w1") as store:
        samples = collect(standard_variants(w, graph, store, cp_trials), trials, cp_trials)
    us = {name: s.median / len(w) * 1e6 for name, s in samples.items()}
    cp_vs = {name: us[CP] / us[name] for name in samples}
    ok = us[CP] <= W1_TARGET_US_PER_NODE

    table = Table(title=f"W1 chain of {len(w):,} trivial nodes ({trials} trials, medians)")
    for col in ("runner", "total ms", "µs/node", "÷ asyncio", "counterpoint ÷ this", "target",
                "result"):
        table.add_column(col, justify="left" if col == "runner" else "right")
    for name, s in samples.items():
        is_cp = name == CP
        table.add_row(RUNNER_LABELS[name], ms(s.median), f"{us[name]:.1f}",
                      f3(us[name] / us[AIO]), f3(cp_vs[name]),
                      f"≤ {W1_TARGET_US_PER_NODE:g} µs/node" if is_cp else "",
                      verdict(ok) if is_cp else "")
    print_table(table, [cp_log_note(samples[CP])])
    return {
        "workload": w.name, "trials": trials,
        "runners": {name: {**s.as_json(), "us_per_node": us[name]}
                    for name, s in samples.items()},
        "ratios": {f"counterpoint/{name}": cp_vs[name] for name in samples if name != CP},
        "target": {"metric": "counterpoint us_per_node", "max": W1_TARGET_US_PER_NODE},
        "pass": ok,
    }


def bench_w2(cfg: Config) -> dict[str, Any]:
    w = fanout(W2_BRANCHES, W2_SLEEP)
    graph = build_graph(w)
    trials = cfg.n_trials(slow=False)
    cp_trials: list[CounterpointTrial] = []
    with sqlite_store(cfg.tmp, "w2") as store:
        samples = collect(standard_variants(w, graph, store, cp_trials), trials, cp_trials)
    ideal = critical_path(w)
    vs_aio = {name: s.median / samples[AIO].median for name, s in samples.items()}
    ok = vs_aio[CP] <= W2_TARGET_VS_ASYNCIO

    table = Table(title=f"W2 fan-out {W2_BRANCHES:,} x {W2_SLEEP * 1e3:g} ms + join "
                        f"({trials} trials, medians; ideal {ms(ideal)} ms)")
    for col in ("runner", "makespan ms", "÷ ideal", "÷ asyncio", "target", "result"):
        table.add_column(col, justify="left" if col == "runner" else "right")
    for name, s in samples.items():
        is_cp = name == CP
        table.add_row(RUNNER_LABELS[name], ms(s.median), f3(s.median / ideal),
                      f3(vs_aio[name]),
                      f"≤ {W2_TARGET_VS_ASYNCIO:g} x asyncio" if is_cp else "",
                      verdict(ok) if is_cp else "")
    print_table(table, [cp_log_note(samples[CP], ideal)])
    return {
        "workload": w.name, "trials": trials, "ideal_s": ideal,
        "runners": {name: s.as_json() for name, s in samples.items()},
        "ratios": {f"{name}/asyncio": vs_aio[name] for name in samples if name != AIO},
        "target": {"metric": "counterpoint makespan / asyncio makespan",
                   "max": W2_TARGET_VS_ASYNCIO},
        "pass": ok,
    }


def bench_w3(cfg: Config) -> dict[str, Any]:
    w = diamond(W3_SLEEP)
    graph = build_graph(w)
    trials = cfg.n_trials(slow=True)
    count = W3_QUICK_COUNT if cfg.quick else W3_COUNT
    lg_count = min(count, W3_LANGGRAPH_COUNT)
    counts = {CP: count, AIO: count, LG: lg_count, LGC: lg_count}
    with sqlite_store(cfg.tmp, "w3") as store:
        variants: dict[str, Callable[[], float]] = {
            CP: lambda: asyncio.run(run_counterpoint_many(graph, store, count)),
            AIO: lambda: run_asyncio_many(w, count),
            LG: lambda: run_langgraph_many(w, lg_count, False),
            LGC: lambda: run_langgraph_many(w, lg_count, True),
        }
        samples = measure(variants, trials)
    rate = {name: counts[name] / s.median for name, s in samples.items()}
    ok_rate = rate[CP] >= W3_TARGET_RATE

    rss = measure_peak_rss(count, W3_SLEEP, tuned_gc=gc.get_threshold() != DEFAULT_GC,
                           precise_loop=isinstance(asyncio.get_event_loop_policy(),
                                                   cp.EventLoopPolicy))
    writer_mb = rss.writer_peak_bytes / 2**20
    peak_mb = rss.peak_bytes / 2**20 + writer_mb  # the run's process and its store's writer
    ok_rss = peak_mb <= W3_TARGET_RSS_MB

    table = Table(title=f"W3 concurrent diamonds (A -> B,C,D -> E, {W3_SLEEP * 1e3:g} ms/node; "
                        f"{trials} trials, medians; ideal elapsed 30 ms)")
    for col in ("runner", "workflows", "elapsed s", "workflows/s", "counterpoint ÷ this",
                "target", "result"):
        table.add_column(col, justify="left" if col == "runner" else "right")
    for name, s in samples.items():
        is_cp = name == CP
        label = RUNNER_LABELS[name]
        if counts[name] != count:
            label += f" (at {counts[name]:,}, not {count:,})"
        table.add_row(label, f"{counts[name]:,}", f3(s.median), f"{rate[name]:,.0f}",
                      f3(rate[CP] / rate[name]),
                      f"≥ {W3_TARGET_RATE:,.0f}/s" if is_cp else "",
                      verdict(ok_rate) if is_cp else "")
    table.add_row("counterpoint peak RSS (fresh subprocess)", f"{rss.count:,}",
                  f3(rss.elapsed), f"{peak_mb:,.0f} MB", "",
                  f"≤ {W3_TARGET_RSS_MB:g} MB", verdict(ok_rss))
    notes = [
        "workflows/s is comparable across counts: the LangGraph rows run fewer workflows "
        "because LangGraph + SqliteSaver at 10,000 takes over a minute per trial"
        if lg_count != count else "",
        f"peak RSS: a fresh child process runs only counterpoint's W3 once "
        f"({rss.count:,} workflows); the peak RSS shown is its VmHWM (own peak RSS), "
        f"{rss.peak_bytes / 2**20:,.0f} MB ({rss.before_bytes / 2**20:,.0f} MB of it after "
        f"imports and graph build), plus its SQLite writer process's, {writer_mb:,.0f} MB; its "
        f"ru_maxrss reads {rss.ru_maxrss_bytes / 2**20:,.0f} MB (Linux carries the forking "
        f"parent's high-water mark over exec: it started at "
        f"{rss.start_ru_maxrss_bytes / 2**20:,.0f} MB)",
    ]
    print_table(table, notes)
    return {
        "workload": w.name, "trials": trials, "counts": counts,
        "runners": {name: {**s.as_json(), "count": counts[name], "workflows_per_s": rate[name]}
                    for name, s in samples.items()},
        "ratios": {f"counterpoint/{name} rate": rate[CP] / rate[name]
                   for name in samples if name != CP},
        "peak_rss": {"count": rss.count, "peak_mb": peak_mb, "writer_peak_mb": writer_mb,
                     "before_mb": rss.before_bytes / 2**20,
                     "ru_maxrss_mb": rss.ru_maxrss_bytes / 2**20,
                     "start_ru_maxrss_mb": rss.start_ru_maxrss_bytes / 2**20,
                     "elapsed_s": rss.elapsed},
        "target": {"metric": "counterpoint workflows_per_s", "min": W3_TARGET_RATE,
                   "peak_rss_mb_max": W3_TARGET_RSS_MB},
        "pass": ok_rate and ok_rss, "pass_rate": ok_rate, "pass_rss": ok_rss,
    }


def bench_w4(cfg: Config) -> dict[str, Any]:
    w = layered(W4_NODES, seed=W4_SEED)
    graph = build_graph(w)
    trials = cfg.n_trials(slow=False)
    cp_trials: list[CounterpointTrial] = []
    with sqlite_store(cfg.tmp, "w4") as store:
        samples = collect(standard_variants(w, graph, store, cp_trials), trials, cp_trials)
    cpath = critical_path(w)
    over_cp = {name: s.median / cpath for name, s in samples.items()}
    ok = over_cp[CP] <= W4_TARGET

    table = Table(title=f"W4 {w.name}: {len(w)} nodes, 1-20 ms each ({trials} trials, "
                        f"medians; critical path {ms(cpath)} ms, total work "
                        f"{ms(total_work(w))} ms)")
    for col in ("runner", "makespan ms", "÷ critical path", "counterpoint ÷ this", "target",
                "result"):
        table.add_column(col, justify="left" if col == "runner" else "right")
    for name, s in samples.items():
        is_cp = name == CP
        table.add_row(RUNNER_LABELS[name], ms(s.median), f3(over_cp[name]),
                      f3(samples[CP].median / s.median),
                      f"≤ {W4_TARGET:g}" if is_cp else "", verdict(ok) if is_cp else "")
    print_table(table, [cp_log_note(samples[CP], cpath)])
    return {
        "workload": w.name, "trials": trials, "critical_path_s": cpath,
        "runners": {name: {**s.as_json(), "over_critical_path": over_cp[name]}
                    for name, s in samples.items()},
        "ratios": {f"{name} makespan/critical_path": v for name, v in over_cp.items()},
        "target": {"metric": "counterpoint makespan / critical path", "max": W4_TARGET},
        "pass": ok,
    }


def w5_traces(quick: bool) -> list[Path]:
    paths = wfinstance_paths()
    if not quick or len(paths) <= W5_QUICK_TRACES:
        return paths
    # evenly spread over the sorted list, so the quick run still sees different shapes
    picks = sorted({round(i * (len(paths) - 1) / (W5_QUICK_TRACES - 1))
                    for i in range(W5_QUICK_TRACES)})
    return [paths[i] for i in picks]


def bench_w5(cfg: Config) -> dict[str, Any]:
    paths = w5_traces(cfg.quick)
    if not paths:
        console.print("[yellow]W5 skipped: no WfInstances traces found (set "
                      "COUNTERPOINT_EVALDATA)[/yellow]\n")
        return {"skipped": "no traces", "pass": None}
    trials = cfg.n_trials(slow=True)
    unl_keys = (CP, AIO, LG, LGC)
    per_trace: dict[str, dict[str, Any]] = {}
    rows_a: list[tuple[str, int, float, dict[str, float], bool]] = []
    rows_b: list[tuple[str, float, float, dict[str, float], dict[str, float], bool]] = []
    log_gaps: list[float] = []
    for i, path in enumerate(paths):
        w = scaled_to_critical_path(load_wfinstance(path), W5_CRITICAL_PATH)
        graph = build_graph(w)
        cpath = critical_path(w)
        work = total_work(w)
        ls8 = list_schedule_makespan(w, W5_WORKERS)
        bound8 = max(cpath, work / W5_WORKERS)
        cp_unl: list[CounterpointTrial] = []
        cp_8: list[CounterpointTrial] = []
        with sqlite_store(cfg.tmp, f"w5-{i}") as store:
            variants: dict[str, Callable[[], float]] = {
                f"{CP}:unl": cp_variant(graph, store, None, cp_unl),
                f"{AIO}:unl": partial(run_asyncio, w),
                f"{LG}:unl": partial(run_langgraph, w, False),
                f"{LGC}:unl": partial(run_langgraph, w, True),
                f"{CP}:8": cp_variant(graph, store, W5_WORKERS, cp_8),
                f"{AIO}:8": partial(run_asyncio, w, W5_WORKERS),
            }
            samples = measure(variants, trials)
        samples[f"{CP}:unl"].trials = cp_unl
        samples[f"{CP}:8"].trials = cp_8
        log_gaps += [t.elapsed - t.log_makespan for t in cp_unl + cp_8]
        a = {k: samples[f"{k}:unl"].median / cpath for k in unl_keys}
        b_ls = {k: samples[f"{k}:8"].median / ls8 for k in (CP, AIO)}
        b_bound = {k: samples[f"{k}:8"].median / bound8 for k in (CP, AIO)}
        ok_a = a[CP] <= W5_TARGET
        ok_b = b_ls[CP] <= W5_TARGET
        rows_a.append((w.name, len(w), work / cpath, a, ok_a))
        rows_b.append((w.name, ls8, bound8, b_ls, b_bound, ok_b))
        per_trace[w.name] = {
            "path": str(path), "nodes": len(w), "critical_path_s": cpath,
            "total_work_s": work, "list_schedule_8_s": ls8, "bound_8_s": bound8,
            "runners": {name: s.as_json() for name, s in samples.items()},
            "unlimited_over_critical_path": a,
            "workers8_over_list_schedule": b_ls, "workers8_over_bound": b_bound,
            "pass_unlimited": ok_a, "pass_workers8": ok_b,
        }

    table_a = Table(title=f"W5a WfInstances traces scaled to a {W5_CRITICAL_PATH:g} s critical "
                          f"path, unlimited workers: makespan ÷ critical path ({trials} "
                          "trials, medians)")
    for col in ("trace", "nodes", "work ÷ CP", "counterpoint", "asyncio", "LangGraph",
                "LangGraph+sqlite", "target", "result"):
        table_a.add_column(col, justify="left" if col == "trace" else "right")
    for name, n, par, a, ok in rows_a:
        table_a.add_row(name, str(n), f"{par:.1f}", f3(a[CP]), f3(a[AIO]), f3(a[LG]),
                        f3(a[LGC]), f"≤ {W5_TARGET:g}", verdict(ok))
    all_a = {k: [r[3][k] for r in rows_a] for k in unl_keys}
    ok_all_a = all(r[4] for r in rows_a)
    table_a.add_row("[b]max[/b]", "", "", *(f3(max(all_a[k])) for k in unl_keys),
                    f"≤ {W5_TARGET:g}", verdict(ok_all_a))
    table_a.add_row("[b]geomean[/b]", "", "", *(f3(geomean(all_a[k])) for k in unl_keys),
                    "", "")
    print_table(table_a, [])

    table_b = Table(title=f"W5b the same traces with {W5_WORKERS} workers (counterpoint "
                          f"RunOptions(max_concurrency={W5_WORKERS}), asyncio semaphore of "
                          f"{W5_WORKERS}; {trials} trials, medians)")
    for col in ("trace", "list sched s", "bound s", "cp ÷ list sched", "cp ÷ bound",
                "asyncio ÷ list sched", "asyncio ÷ bound", "target", "result"):
        table_b.add_column(col, justify="left" if col == "trace" else "right")
    for name, ls8, bound8, b_ls, b_bound, ok in rows_b:
        table_b.add_row(name, f3(ls8), f3(bound8), f3(b_ls[CP]), f3(b_bound[CP]),
                        f3(b_ls[AIO]), f3(b_bound[AIO]), f"≤ {W5_TARGET:g}", verdict(ok))
    ok_all_b = all(r[5] for r in rows_b)
    cols = ([r[3][CP] for r in rows_b], [r[4][CP] for r in rows_b],
            [r[3][AIO] for r in rows_b], [r[4][AIO] for r in rows_b])
    table_b.add_row("[b]max[/b]", "", "", *(f3(max(c)) for c in cols), f"≤ {W5_TARGET:g}",
                    verdict(ok_all_b))
    table_b.add_row("[b]geomean[/b]", "", "", *(f3(geomean(c)) for c in cols), "", "")
    notes = [
        "list sched = list_schedule_makespan(w, 8), zero-overhead critical-path list "
        "scheduling; bound = max(critical path, total work / 8)",
        f"counterpoint wall - metrics.makespan over all W5 runs: median "
        f"{ms(statistics.median(log_gaps))} ms, max {ms(max(log_gaps))} ms",
    ]
    print_table(table_b, notes)
    return {
        "trials": trials, "critical_path_s": W5_CRITICAL_PATH, "workers": W5_WORKERS,
        "traces": per_trace,
        "target": {"unlimited": {"metric": "counterpoint makespan / critical path",
                                 "max": W5_TARGET},
                   "workers8": {"metric": "counterpoint makespan / list_schedule_makespan(w, 8)",
                                "max": W5_TARGET}},
        "summary": {
            "unlimited_max": {k: max(v) for k, v in all_a.items()},
            "unlimited_geomean": {k: geomean(v) for k, v in all_a.items()},
            "workers8_over_list_schedule_max": {CP: max(cols[0]), AIO: max(cols[2])},
            "workers8_over_bound_max": {CP: max(cols[1]), AIO: max(cols[3])},
        },
        "pass": ok_all_a and ok_all_b, "pass_unlimited": ok_all_a, "pass_workers8": ok_all_b,
    }


BENCHES: dict[str, Callable[[Config], dict[str, Any]]] = {
    "W1": bench_w1, "W2": bench_w2, "W3": bench_w3, "W4": bench_w4, "W5": bench_w5,
    # a 100,000-node graph: build cost, run time against asyncio, peak RSS (large.py)
    "L1": lambda cfg: bench_l1(cfg.n_trials(slow=True), cfg.tmp, console),
    # the model layer (benchmarks/models.py): rate limits, per-call overhead
    "M1": lambda cfg: bench_rate(cfg.quick), "M2": lambda cfg: bench_overhead(cfg.quick),
}


# --- main -------------------------------------------------------------------------------


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def machine_info() -> dict[str, Any]:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "nproc": affinity or os.cpu_count(), "cpu_count": os.cpu_count(),
        "python": platform.python_version(), "implementation": platform.python_implementation(),
        "platform": platform.platform(), "machine": platform.machine(),
        "counterpoint": cp.__version__, "langgraph": _version("langgraph"),
        "langgraph-checkpoint-sqlite": _version("langgraph-checkpoint-sqlite"),
        "loadavg_start": list(os.getloadavg()),
    }


def warm_up(tmp: Path) -> None:
    """Run every runner once on tiny graphs, untimed, so no trial pays for first-use costs."""
    for w in (chain(20), diamond(0.001)):
        graph = build_graph(w)
        with sqlite_store(tmp, f"warmup-{w.name}") as store:
            asyncio.run(run_counterpoint_trial(graph, store, None))
            asyncio.run(run_counterpoint_many(graph, store, 3))
        run_asyncio(w)
        run_asyncio_many(w, 3)
        for checkpointer in (False, True):
            run_langgraph(w, checkpointer)
            run_langgraph_many(w, 3, checkpointer)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/run.py",
        description="Benchmark counterpoint against asyncio and LangGraph (W1-W5), a "
                    "100,000-node graph against asyncio (L1) and its model layer against "
                    "the bare openai SDK (M1, M2).")
    parser.add_argument("--quick", action="store_true",
                        help=f"W3 at {W3_QUICK_COUNT:,} workflows for every runner, "
                             f"{W5_QUICK_TRACES} W5 traces, {QUICK_TRIALS} trials")
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="write all samples, medians, ratios and targets to FILE")
    parser.add_argument("--only", metavar="W1,W2,...",
                        help="comma-separated workloads to run (default: all)")
    parser.add_argument("--trials", type=int, metavar="N",
                        help=f"trials per runner (default {FAST_TRIALS}; {SLOW_TRIALS} for "
                             f"W3 and W5; {QUICK_TRIALS} with --quick)")
    parser.add_argument("--gc", choices=("default", "tuned"), default="default",
                        help="garbage-collector settings for every runner: Python's defaults, "
                             "or cp.tune_gc() (what `counterpoint run` and run_sync use)")
    parser.add_argument("--loop", choices=("asyncio", "precise"), default="asyncio",
                        help="event loop for every runner: asyncio's default, or "
                             "cp.new_event_loop(), whose timers fire without asyncio's "
                             "rounding up to whole milliseconds (what `counterpoint run` "
                             "and run_sync use)")
    args = parser.parse_args(argv)
    if args.trials is not None and args.trials < 1:
        parser.error("--trials must be >= 1")
    if args.only:
        wanted = [x.strip().upper() for x in args.only.split(",") if x.strip()]
        unknown = [x for x in wanted if x not in BENCHES]
        if unknown:
            parser.error(f"unknown workload(s) {unknown}; choose from {list(BENCHES)}")
        args.only = wanted
    else:
        args.only = list(BENCHES)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.gc == "tuned":
        cp.tune_gc()
    if args.loop == "precise":  # every runner's asyncio.run gets the loop
        asyncio.set_event_loop_policy(cp.EventLoopPolicy())
    info = machine_info()
    info["gc"] = {"mode": args.gc, "thresholds": list(gc.get_threshold())}
    info["loop"] = args.loop
    console.print(f"[b]counterpoint benchmarks[/b] {'(quick) ' if args.quick else ''}"
                  f"- nproc {info['nproc']}, Python {info['python']} "
                  f"({info['implementation']}), {info['platform']}")
    console.print(f"counterpoint {info['counterpoint']}, langgraph {info['langgraph']}, "
                  f"langgraph-checkpoint-sqlite {info['langgraph-checkpoint-sqlite']}; "
                  f"load average at start {', '.join(f'{x:.2f}' for x in info['loadavg_start'])}; "
                  f"gc {args.gc} {gc.get_threshold()}; loop {args.loop}")
    console.print()
    report: dict[str, Any] = {"machine": info, "quick": args.quick, "trials": args.trials,
                              "workloads": {}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="counterpoint-bench-") as tmp_name:
        tmp = Path(tmp_name)
        warm_up(tmp)
        cfg = Config(quick=args.quick, trials=args.trials, tmp=tmp)
        for key in args.only:
            t0 = time.perf_counter()
            report["workloads"][key] = BENCHES[key](cfg)
            report["workloads"][key]["bench_seconds"] = time.perf_counter() - t0
    report["total_seconds"] = time.perf_counter() - started
    report["machine"]["loadavg_end"] = list(os.getloadavg())

    summary = Table(title="Summary (counterpoint against its targets)")
    summary.add_column("workload")
    summary.add_column("result", justify="right")
    for key, data in report["workloads"].items():
        result = data.get("pass")
        summary.add_row(key, "skipped" if result is None else verdict(bool(result)))
    console.print(summary)
    console.print(f"total {report['total_seconds']:.0f} s; load average at end "
                  f"{', '.join(f'{x:.2f}' for x in report['machine']['loadavg_end'])}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
