"""What tracing costs: W1 and W3 with tracing off, on, and without the observer seam.

    python -m benchmarks.tracing [--trials N] [--w3-count N]

Three variants of each workload, interleaved trial by trial in one process, medians:

- ``plain``: the scheduler with the observer seam stubbed out (``observers_for``
  returns nothing without looking at the environment or the loggers): the baseline;
- ``off``: counterpoint as shipped with tracing off (one check of ``COUNTERPOINT_OTEL``
  and of the logging configuration per run);
- ``no-export``: tracing on with an exporter that drops the spans: what building them
  costs (the OpenTelemetry SDK and :mod:`counterpoint.telemetry.spans`);
- ``on``: tracing on, the spans handed to a ``BatchSpanProcessor`` and exported by the
  real OTLP/HTTP exporter to the test receiver (:mod:`counterpoint.testing.otlp`),
  which runs in a child process as a collector would. The clock covers the runs, not
  the final flush; every span is then checked to have arrived (none dropped).

One untimed run of each variant warms up first. Runs are logged to SQLite as in
``benchmarks/run.py`` (W1: a chain of 1,000 trivial nodes; W3: concurrent diamonds of
10 ms nodes). Prints each variant's median and the ratios ``off / plain`` and
``on / plain``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import counterpoint as cp
from benchmarks.counterpoint_runner import (
    build_graph,
    run_counterpoint_many,
    run_counterpoint_trial,
)
from benchmarks.workloads import chain, diamond
from counterpoint import observers, telemetry
from counterpoint.scheduler import execution

W1_NODES = 1000
W3_SLEEP = 0.01
VARIANTS = ("plain", "off", "no-export", "on")


class Receiver:
    """The OTLP test receiver in a child process: its endpoint and its span count."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.tracing", "--receiver"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, env={**os.environ})
        assert self.process.stdout is not None
        self.endpoint = self.process.stdout.readline().strip()

    def count(self) -> int:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("count\n")
        self.process.stdin.flush()
        return int(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


def _serve() -> None:
    from counterpoint.testing.otlp import OTLPReceiver
    with OTLPReceiver() as receiver:
        print(receiver.endpoint, flush=True)
        for line in sys.stdin:
            if line.strip() == "count":
                print(len(receiver.spans), flush=True)


class _Drop(SpanExporter):
    """Exports nothing: the spans are built, batched and dropped."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class Switch:
    """Puts the process in one variant's configuration."""

    def __init__(self, tracing: telemetry.Tracing, dropping: telemetry.Tracing) -> None:
        self.tracing = {"on": tracing, "no-export": dropping}
        self.seam = execution.observers_for

    def __call__(self, variant: str) -> None:
        for tracing in self.tracing.values():
            observers.remove_observer(tracing.observe)
        execution.observers_for = (lambda run: ()) if variant == "plain" \
            else self.seam  # type: ignore[assignment]
        if variant in self.tracing:
            observers.add_observer(self.tracing[variant].observe)


def _measure(runs: dict[str, Callable[[], float]], switch: Switch,
             trials: int) -> dict[str, list[float]]:
    seconds: dict[str, list[float]] = {v: [] for v in runs}
    for variant, run in runs.items():  # warm up: imports, caches, the store's first writes
        switch(variant)
        run()
    for _ in range(trials):
        for variant, run in runs.items():
            switch(variant)
            gc.collect()
            seconds[variant].append(run())
    switch("off")
    return seconds


def _report(title: str, seconds: dict[str, list[float]], unit: Callable[[float], str],
            spans: tuple[int, int]) -> dict[str, Any]:
    medians = {v: statistics.median(s) for v, s in seconds.items()}
    print(f"\n{title} ({len(seconds['plain'])} trials, medians)")
    for variant, median in medians.items():
        ratio = median / medians["plain"]
        print(f"  {variant:<9} {median * 1e3:9.2f} ms  {unit(median):>14}  "
              f"{variant} / plain = {ratio:.3f}")
    print(f"  spans exported: {spans[0]:,} of {spans[1]:,} expected")
    return {"median_s": medians, "ratios": {f"{v}/plain": medians[v] / medians["plain"]
                                            for v in medians},
            "spans": {"received": spans[0], "expected": spans[1]}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=15, help="W1 trials per variant")
    parser.add_argument("--w3-trials", type=int, default=5, help="W3 trials per variant")
    parser.add_argument("--w3-count", type=int, default=1000,
                        help="concurrent diamonds per W3 trial")
    parser.add_argument("--receiver", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.receiver:
        _serve()
        return
    os.environ.setdefault("OTEL_BSP_MAX_QUEUE_SIZE", "200000")  # keep every span
    receiver = Receiver()
    dropping = telemetry.Tracing(_provider(_Drop()), content=False, owns=True)
    tracing = telemetry.instrument(endpoint=receiver.endpoint)
    switch = Switch(tracing, dropping)
    switch("off")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            w1 = build_graph(chain(W1_NODES))
            store = cp.SQLiteStore(Path(tmp) / "w1.db")

            def one_w1() -> float:
                return asyncio.run(run_counterpoint_trial(w1, store)).elapsed

            seconds = _measure({v: one_w1 for v in VARIANTS}, switch, args.trials)
            tracing.force_flush()
            _report(f"W1 chain of {W1_NODES:,} trivial nodes", seconds,
                    lambda s: f"{s / W1_NODES * 1e6:.1f} µs/node",
                    (receiver.count(), (args.trials + 1) * (W1_NODES + 1)))
            store.close()
            before = receiver.count()

            w3 = build_graph(diamond(W3_SLEEP))
            store = cp.SQLiteStore(Path(tmp) / "w3.db")
            count = args.w3_count

            def one_w3() -> float:
                return asyncio.run(run_counterpoint_many(w3, store, count))

            seconds = _measure({v: one_w3 for v in VARIANTS}, switch, args.w3_trials)
            started = time.perf_counter()
            tracing.force_flush()
            flushed = time.perf_counter() - started
            _report(f"W3 {count:,} concurrent diamonds of {W3_SLEEP * 1e3:g} ms nodes", seconds,
                    lambda s: f"{count / s:,.0f} runs/s",
                    (receiver.count() - before, (args.w3_trials + 1) * count * 6))
            print(f"  final flush after the last trial: {flushed * 1e3:.0f} ms")
            store.close()
    finally:
        tracing.shutdown()
        dropping.shutdown()
        receiver.close()


def _provider(exporter: SpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


if __name__ == "__main__":
    main()
