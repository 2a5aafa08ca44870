"""Model-layer benchmarks: rate-limit efficiency and per-call overhead, against the bare SDK.

    python benchmarks/models.py [--quick] [--only M1,M2] [--json FILE]

M1, rate limits: 1,000 model calls (200 with ``--quick``) from as many concurrent nodes of
one counterpoint run (``g.map`` over 1,000 items, ``RunOptions(max_concurrency=1000)``,
SQLite log), each node doing ``await model.generate(..., cache=False)`` on a model
configured with ``rpm=600``, against a local `OpenAIServer` that enforces 600 requests a
minute (answering 429 with Retry-After) and answers in 200 ms. Targets: throughput
(calls / first request to last response) at least 95% of the limit, and no 429 reaching
a node. Baselines in the same invocation, each against a fresh server with the same
limit: the bare ``openai`` SDK, ``asyncio.Semaphore(c)`` and the SDK's own retries on 429
(``max_retries=5``), for a few concurrencies ``c``.

M2, overhead: the time counterpoint adds to one call on top of the bare SDK call to the
same local server (no latency), calls made one at a time: (a) bare
``AsyncOpenAI.chat.completions.create``, (b) ``Model(OpenAIProvider(...)).generate``
outside a run, (c) the same inside a running node (the ``model_call`` event and its blobs
go to a SQLite log; one resident node serves every (c) block). Small blocks of (a), (b)
and (c) alternate, in rotating order, so drift cancels. Target: the time (c) adds, the
median over rounds of (c's block median - a's block median), at most 1 ms.

See benchmarks/README.md ("Model layer") for what each column means.
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
import itertools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Awaitable, Callable, Sequence  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402
from importlib import metadata  # noqa: E402
from typing import Any  # noqa: E402

import openai  # noqa: E402
from openai.types.chat import ChatCompletionUserMessageParam  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import counterpoint as cp  # noqa: E402
from counterpoint.models import Model, ModelConfig, ModelRegistry  # noqa: E402
from counterpoint.models.openai_compat import PROFILES, OpenAIProvider  # noqa: E402
from counterpoint.testing import OpenAIServer, RecordedRequest, Reply  # noqa: E402

# --- parameters and targets ---------------------------------------------------------------

RATE_RPM = 600.0
RATE_LATENCY = 0.2
RATE_CALLS = 1000
RATE_QUICK_CALLS = 200
RATE_TARGET = 0.95
"""Throughput over the limit, at least."""
BASELINE_CONCURRENCY = (2, 16, 1000)
"""Semaphore sizes of the bare-SDK baseline: 2 is hand-tuned (limit x latency = 10/s x 0.2 s,
Little's law), 16 a modest guess, 1,000 one per call (what counterpoint is given)."""
BASELINE_SDK_RETRIES = 5

OVERHEAD_CALLS = 2000
OVERHEAD_QUICK_CALLS = 300
OVERHEAD_BLOCK = 10
OVERHEAD_WARMUP = 100
OVERHEAD_TARGET_US = 1000.0
"""Time added per call inside a node (paired median over rounds, see `bench_overhead`),
at most (µs)."""
MAX_TOKENS = 16
SERVER_MODEL = "m"

console = Console(width=None if sys.stdout.isatty() else 160, highlight=False)


def verdict(ok: bool) -> str:
    return "[green]PASS[/green]" if ok else "[red]MISS[/red]"


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, linear interpolation between ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


# --- M1: rate-limit efficiency ------------------------------------------------------------


class _Accepted:
    """The server's default reply: remembers when each request it let through arrived.

    Called on the server's thread only for requests the rate limit accepted (a 429 never
    reaches the reply), so ``at`` is the arrival time of every request that was served.
    """

    def __init__(self) -> None:
        self.at: list[float] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        self.at.append(request.at)
        return Reply.text("ok")


def _rate_server(accepted: _Accepted) -> OpenAIServer:
    return OpenAIServer(default=Reply.dynamic(accepted), latency=RATE_LATENCY,
                        rate_limit_rpm=RATE_RPM)


@dataclass(frozen=True, kw_only=True)
class RateRun:
    """One M1 run (counterpoint or a baseline) against its own fresh rate-limited server."""

    label: str
    calls: int
    concurrency: int
    succeeded: int
    """Calls that got an answer."""
    failed: int
    """Calls that ended in an error (a failed node; an exception out of the SDK)."""
    failures: dict[str, int]
    """Why they failed: error type -> count."""
    requests: int
    """Chat requests the server received (accepted + rejected)."""
    rejected: int
    """429s the server sent (``server.rejected``)."""
    seen_429: int | None
    """counterpoint only: 429s the model layer got (``model_call`` events with status 429,
    each one absorbed by a retry unless it also shows up as a failure)."""
    node_retries: int | None
    """counterpoint only: node attempts beyond the first (a model error reaching a node)."""
    elapsed: float
    """From the first request the server received to the last answer the client got (s)."""
    throughput: float
    """``succeeded / elapsed``, per minute."""
    pacing: float
    """Accepted requests' arrival rate at the server, ``(n - 1) / (last - first)``, per
    minute: the request pacing alone, without the last answer's latency."""
    gap_median_ms: float
    gap_p99_ms: float
    gap_max_ms: float
    """Intervals between consecutive accepted requests (ideal: ``60 / rpm``)."""
    cpu: float
    """CPU seconds of the event-loop thread (client side; not the server or log threads)."""
    wall: float
    """Wall seconds of the whole run, setup and verification excluded."""
    peak_in_flight: int
    """The most chat requests the server was answering at once."""

    @property
    def over_limit(self) -> float:
        return self.throughput / RATE_RPM


def ideal_throughput(calls: int) -> float:
    """Calls per minute of a client sending exactly at the limit, one every ``60 / rpm`` s."""
    return calls / ((calls - 1) * 60 / RATE_RPM + RATE_LATENCY) * 60


def _rate_run(label: str, calls: int, concurrency: int, server: OpenAIServer,
              accepted: _Accepted, done: Sequence[float], failures: Counter[str],
              wall: float, cpu: float, seen_429: int | None = None,
              node_retries: int | None = None) -> RateRun:
    chats = [r for r in server.requests if r.path.rstrip("/").endswith("/chat/completions")]
    first = min(r.at for r in chats)
    elapsed = max(done) - first if done else float("nan")
    at = sorted(accepted.at)
    gaps = [(b - a) * 1e3 for a, b in itertools.pairwise(at)]
    pacing = (len(at) - 1) / (at[-1] - at[0]) * 60 if len(at) > 1 else float("nan")
    return RateRun(
        label=label, calls=calls, concurrency=concurrency, succeeded=len(done),
        failed=sum(failures.values()), failures=dict(failures), requests=len(chats),
        rejected=server.rejected, seen_429=seen_429, node_retries=node_retries,
        elapsed=elapsed, throughput=len(done) / elapsed * 60 if done else 0.0, pacing=pacing,
        gap_median_ms=statistics.median(gaps) if gaps else float("nan"),
        gap_p99_ms=quantile(gaps, 0.99), gap_max_ms=max(gaps, default=float("nan")),
        cpu=cpu, wall=wall, peak_in_flight=server.peak_concurrency)


async def _items(n: int) -> list[int]:
    return list(range(n))


def _rate_graph(model: Model, calls: int) -> cp.Graph:
    async def ask(i: int) -> float:
        await model.generate(f"call {i}", max_tokens=MAX_TOKENS, cache=False)
        return time.monotonic()  # when this call's answer arrived

    graph = cp.Graph("model-rate")
    items = graph.add("items", _items, n=calls)
    graph.map("ask", ask, over=items)
    return graph


def rate_counterpoint(calls: int, tmp: Path) -> RateRun:
    """M1 through counterpoint: ``calls`` concurrent nodes, one model call each."""
    accepted = _Accepted()
    with _rate_server(accepted) as server:
        name = f"bench-rate-{uuid.uuid4().hex[:8]}"  # a fresh process-wide limiter
        registry = ModelRegistry({name: ModelConfig(
            name=name, provider="openai", model=SERVER_MODEL, base_url=server.base_url,
            profile="generic", rpm=RATE_RPM)}, name)
        model = Model(name, registry=registry)
        graph = _rate_graph(model, calls)
        store = cp.SQLiteStore(tmp / f"{name}.db")
        try:
            async def go() -> tuple[cp.RunResult, float, float]:
                cpu0, wall0 = time.thread_time(), time.perf_counter()
                result = await cp.run(graph, store=store,
                                      options=cp.RunOptions(max_concurrency=calls))
                cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
                await store.flush()
                return result, cpu, wall

            gc.collect()
            result, cpu, wall = asyncio.run(go())
            events = store.events(result.run_id)
        finally:
            store.close()
    mapped = {k: n for k, n in result.nodes.items() if str(k).startswith("ask[")}
    if len(mapped) != calls:
        raise AssertionError(f"counterpoint M1: {len(mapped)} mapped nodes, expected {calls}")
    done = [float(n.output) for n in mapped.values() if n.status == "succeeded"]
    failures: Counter[str] = Counter(
        str((n.error or {}).get("type", n.status)) for n in mapped.values()
        if n.status != "succeeded")
    calls_logged = [e.data or {} for e in events if e.kind == cp.EventKind.MODEL_CALL]
    seen_429 = sum(1 for d in calls_logged if d.get("status") == 429)
    answered = sum(1 for d in calls_logged if "error" not in d)
    if answered != len(done):
        raise AssertionError(f"counterpoint M1: {answered} successful model_call events, "
                             f"{len(done)} succeeded nodes")
    retries = sum(max(0, n.attempts - 1) for n in mapped.values())
    return _rate_run("counterpoint", calls, calls, server, accepted, done, failures, wall,
                     cpu, seen_429=seen_429, node_retries=retries)


def rate_baseline(calls: int, concurrency: int) -> RateRun:
    """M1 with the bare SDK: ``asyncio.Semaphore(concurrency)``, the SDK retrying 429s."""
    accepted = _Accepted()
    done: list[float] = []
    failures: Counter[str] = Counter()
    with _rate_server(accepted) as server:
        async def go() -> tuple[float, float]:
            client = openai.AsyncOpenAI(base_url=server.base_url, api_key="x",
                                        max_retries=BASELINE_SDK_RETRIES)
            semaphore = asyncio.Semaphore(concurrency)

            async def one(i: int) -> None:
                async with semaphore:
                    try:
                        await client.chat.completions.create(
                            model=SERVER_MODEL, max_tokens=MAX_TOKENS,
                            messages=[{"role": "user", "content": f"call {i}"}])
                    except openai.APIError as exc:
                        failures[type(exc).__name__] += 1
                        return
                    done.append(time.monotonic())

            cpu0, wall0 = time.thread_time(), time.perf_counter()
            async with asyncio.TaskGroup() as tg:
                for i in range(calls):
                    tg.create_task(one(i))
            cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
            await client.close()
            return cpu, wall

        gc.collect()
        cpu, wall = asyncio.run(go())
    return _rate_run(f"bare SDK, Semaphore({concurrency})", calls, concurrency, server,
                     accepted, done, failures, wall, cpu)


def bench_rate(quick: bool, baselines: Sequence[int] = BASELINE_CONCURRENCY) -> dict[str, Any]:
    """M1: counterpoint's rate limiter against the server's limit and the bare SDK."""
    calls = RATE_QUICK_CALLS if quick else RATE_CALLS
    with tempfile.TemporaryDirectory(prefix="counterpoint-bench-models-") as tmp:
        runs = [rate_counterpoint(calls, Path(tmp))]
    runs += [rate_baseline(calls, c) for c in baselines]
    cp_run = runs[0]
    ok_rate = cp_run.over_limit >= RATE_TARGET and cp_run.succeeded == calls
    ok_429 = cp_run.failed == 0 and cp_run.node_retries == 0
    ideal = ideal_throughput(calls)

    table = Table(title=f"M1 rate limits: {calls:,} calls, server limit {RATE_RPM:g}/min "
                        f"(burst {max(1, round(RATE_RPM / 60))}), {RATE_LATENCY * 1e3:g} ms "
                        f"per answer; ideal paced client {ideal:,.1f}/min "
                        f"({ideal / RATE_RPM:.3f} x limit)")
    for col in ("runner", "ok / calls", "429 sent", "429 at node", "elapsed s",
                "calls/min", "÷ limit", "req gap ms p50 / p99 / max", "loop CPU s",
                "target", "result"):
        table.add_column(col, justify="left" if col == "runner" else "right")
    for run in runs:
        is_cp = run is cp_run
        at_node = f"{run.failed + (run.node_retries or 0)}" if is_cp else \
            f"{run.failures.get('RateLimitError', 0)}"
        table.add_row(
            f"{run.label} (concurrency {run.concurrency:,})" if is_cp else run.label,
            f"{run.succeeded:,} / {run.calls:,}", f"{run.rejected:,}", at_node,
            f"{run.elapsed:.2f}", f"{run.throughput:,.1f}", f"{run.over_limit:.3f}",
            f"{run.gap_median_ms:.1f} / {run.gap_p99_ms:.1f} / {run.gap_max_ms:.1f}",
            f"{run.cpu:.2f}",
            f"≥ {RATE_TARGET:g} x limit, 0 x 429 at node" if is_cp else "",
            f"{verdict(ok_rate)} / {verdict(ok_429)}" if is_cp else "")
    console.print(table)
    notes = [
        f"counterpoint: {cp_run.seen_429} 429s reached the model layer (model_call events "
        f"with status 429, retried there); {cp_run.failed} nodes failed "
        f"{cp_run.failures or ''}; {cp_run.node_retries} node retries; "
        f"{cp_run.requests:,} requests for {calls:,} calls; accepted requests arrived at "
        f"{cp_run.pacing:,.1f}/min; peak in flight at the server {cp_run.peak_in_flight}",
        f"bare SDK rows: openai.AsyncOpenAI(max_retries={BASELINE_SDK_RETRIES}), which "
        "retries a 429 after the server's retry-after-ms; calls/min = answered calls / "
        "(first request at the server -> last answer at the client); '429 at node' = "
        "failed nodes + node retries for counterpoint, calls that ended in RateLimitError "
        "for the SDK; 'loop CPU s' = CPU time of the event-loop "
        "thread over the run (the server and SQLite writer threads excluded)",
    ]
    for run in runs[1:]:
        versus = (f"counterpoint ÷ this throughput {cp_run.throughput / run.throughput:.3f}"
                  if run.succeeded == calls else
                  f"it answered only {run.succeeded / calls:.0%} of the calls, so its calls/min "
                  "is not comparable")
        notes.append(f"{run.label}: {run.requests:,} requests, {run.rejected:,} answered 429, "
                     f"failures {run.failures or 'none'}; accepted requests arrived at "
                     f"{run.pacing:,.1f}/min; {versus}")
    for note in notes:
        console.print(f"  note: {note}")
    console.print()
    return {"calls": calls, "rpm": RATE_RPM, "latency_s": RATE_LATENCY,
            "ideal_throughput_per_min": ideal,
            "runs": [{**asdict(r), "over_limit": r.over_limit} for r in runs],
            "target": {"throughput_over_limit_min": RATE_TARGET, "node_429_max": 0},
            "pass": ok_rate and ok_429, "pass_throughput": ok_rate, "pass_no_429": ok_429}


# --- M2: per-call overhead ----------------------------------------------------------------

BARE, OUTSIDE, NODE = "a", "b", "c"
OVERHEAD_LABELS = {
    BARE: "(a) bare SDK chat.completions.create",
    OUTSIDE: "(b) Model.generate outside a run",
    NODE: "(c) Model.generate in a node (SQLite log)",
}


@dataclass
class OverheadSamples:
    """Per-call seconds of one variant, all blocks pooled, each block's median, and the
    process CPU time of each block per call."""

    seconds: list[float] = field(default_factory=list)
    block_medians: list[float] = field(default_factory=list)
    cpu_per_call: list[float] = field(default_factory=list)
    """``time.process_time()`` over the block / its calls: every thread of the process (the
    event loop, the server, the SQLite writer), so other processes' load hardly moves it."""

    def add(self, block: Sequence[float], cpu: float) -> None:
        self.seconds.extend(block)
        self.block_medians.append(statistics.median(block))
        self.cpu_per_call.append(cpu / len(block))

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def p90(self) -> float:
        return quantile(self.seconds, 0.9)


async def _overhead(calls: int, block: int, tmp: Path) -> dict[str, OverheadSamples]:
    """Alternate blocks of (a), (b) and (c) calls; per-call seconds of each variant.

    (c) runs in one resident node of one run for the whole measurement: the driver hands
    it a block size, it makes that many calls, waits for the run's log to be committed
    (so no write spills into the next block's clock) and hands the times back.
    """
    with OpenAIServer(default=Reply.text("ok")) as server:
        bare = openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        provider = OpenAIProvider("bench-overhead", SERVER_MODEL, base_url=server.base_url,
                                  capabilities=PROFILES["generic"])
        model = Model(provider, cache=False, retries=0)
        store = cp.SQLiteStore(tmp / "overhead.db")
        counter = itertools.count()  # a distinct prompt per call: every request is new

        async def bare_calls(n: int) -> list[float]:
            out: list[float] = []
            for _ in range(n):
                messages: list[ChatCompletionUserMessageParam] = [
                    {"role": "user", "content": f"hi {next(counter)}"}]
                start = time.perf_counter()
                await bare.chat.completions.create(model=SERVER_MODEL, messages=messages,
                                                   max_tokens=MAX_TOKENS)
                out.append(time.perf_counter() - start)
            return out

        async def model_calls(n: int) -> list[float]:
            out: list[float] = []
            for _ in range(n):
                text = f"hi {next(counter)}"
                start = time.perf_counter()
                await model.generate(text, max_tokens=MAX_TOKENS)
                out.append(time.perf_counter() - start)
            return out

        jobs: asyncio.Queue[int] = asyncio.Queue()  # block sizes for the node; 0 = finish
        answers: asyncio.Queue[list[float]] = asyncio.Queue()

        async def resident(ctx: cp.NodeContext) -> int:
            made = 0
            while (n := await jobs.get()) > 0:
                times = await model_calls(n)
                await ctx.flush()
                made += n
                await answers.put(times)
            return made

        graph = cp.Graph("model-overhead")
        graph.add("calls", resident)
        running = asyncio.create_task(cp.run(graph, store=store))

        async def node_calls(n: int) -> list[float]:
            await jobs.put(n)
            answer = asyncio.create_task(answers.get())
            await asyncio.wait({answer, running}, return_when=asyncio.FIRST_COMPLETED)
            if not answer.done():  # the run ended instead of answering
                answer.cancel()
                raise AssertionError(f"M2: the run ended early: {running.result().status}")
            return answer.result()

        variants: dict[str, Callable[[int], Awaitable[list[float]]]] = {
            BARE: bare_calls, OUTSIDE: model_calls, NODE: node_calls}
        try:
            for fn in variants.values():  # warm-up: connections, imports, first-use caches
                await fn(OVERHEAD_WARMUP)
            samples = {key: OverheadSamples() for key in variants}
            order = list(variants)
            for r in range(max(1, calls // block)):
                for key in order[r % 3:] + order[:r % 3]:  # rotate to cancel order effects
                    cpu = time.process_time()
                    times = await variants[key](block)
                    samples[key].add(times, time.process_time() - cpu)
            await jobs.put(0)
            result = await running
            logged = sum(1 for e in store.events(result.run_id)
                         if e.kind == cp.EventKind.MODEL_CALL)
        finally:
            if not running.done():
                running.cancel()
            await bare.close()
            await provider.aclose()
            store.close()
        made = OVERHEAD_WARMUP + len(samples[NODE].seconds)
        if not result.ok or result["calls"] != made or logged != made:
            raise AssertionError(f"M2: run {result.run_id} {result.status}, node made "
                                 f"{result['calls']} calls, {logged} model_call events, "
                                 f"expected {made}")
        if server.rejected or server.unscripted:
            raise AssertionError("M2: the server rejected requests")
    return samples


def bench_overhead(quick: bool) -> dict[str, Any]:
    """M2: time counterpoint adds to one call over the bare SDK (sequential calls)."""
    calls = OVERHEAD_QUICK_CALLS if quick else OVERHEAD_CALLS
    block = OVERHEAD_BLOCK
    with tempfile.TemporaryDirectory(prefix="counterpoint-bench-models-") as tmp:
        samples = asyncio.run(_overhead(calls, block, Path(tmp)))
    bare = samples[BARE]
    added = {k: (s.median - bare.median) * 1e6 for k, s in samples.items()}
    paired = {k: statistics.median((m - b) * 1e6 for m, b in
                                   zip(s.block_medians, bare.block_medians, strict=True))
              for k, s in samples.items()}
    cpu = {k: statistics.median(s.cpu_per_call) * 1e6 for k, s in samples.items()}
    ok = paired[NODE] <= OVERHEAD_TARGET_US

    n = len(bare.seconds)
    table = Table(title=f"M2 per-call overhead: {n:,} sequential calls per variant in "
                        f"{n // block} rounds of blocks of {block} (a/b/c, rotating order), "
                        "local server, no latency")
    for col in ("variant", "median µs", "p90 µs", "median - (a) µs",
                "paired added µs", "÷ (a)", "CPU µs/call", "CPU added µs", "target",
                "result"):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for key, s in samples.items():
        is_node = key == NODE
        table.add_row(OVERHEAD_LABELS[key], f"{s.median * 1e6:,.0f}", f"{s.p90 * 1e6:,.0f}",
                      "" if key == BARE else f"{added[key]:,.0f}",
                      "" if key == BARE else f"{paired[key]:,.0f}",
                      f"{s.median / bare.median:.3f}", f"{cpu[key]:,.0f}",
                      "" if key == BARE else f"{cpu[key] - cpu[BARE]:,.0f}",
                      f"paired ≤ {OVERHEAD_TARGET_US:g} µs" if is_node else "",
                      verdict(ok) if is_node else "")
    console.print(table)
    console.print("  note: 'paired added' = median over the rounds of (the variant's block "
                  "median - the same round's (a) block median): drift between rounds cancels "
                  "out, which the difference of the pooled medians does not; the target is "
                  "judged on it. 'CPU µs/call' = process CPU time (all threads: event loop, "
                  "server, SQLite writer) per call, median over the blocks: on a loaded "
                  "machine it moves much less than wall time")
    console.print()
    return {"calls_per_variant": n, "block": block,
            "variants": {k: {"label": OVERHEAD_LABELS[k], "median_us": s.median * 1e6,
                             "p90_us": s.p90 * 1e6, "added_median_us": added[k],
                             "added_paired_us": paired[k],
                             "ratio_to_bare": s.median / bare.median,
                             "cpu_us_per_call": cpu[k],
                             "samples_s": s.seconds}
                         for k, s in samples.items()},
            "target": {"metric": "paired added µs of (c): median over rounds of (c block "
                                 "median - (a) block median)", "max": OVERHEAD_TARGET_US},
            "pass": ok}


# --- main -----------------------------------------------------------------------------------

BENCHES: dict[str, Callable[[bool], dict[str, Any]]] = {"M1": bench_rate, "M2": bench_overhead}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/models.py",
        description="Benchmark the model layer: rate limits (M1) and per-call overhead (M2).")
    parser.add_argument("--quick", action="store_true",
                        help=f"M1 with {RATE_QUICK_CALLS} calls, M2 with "
                             f"{OVERHEAD_QUICK_CALLS} calls per variant")
    parser.add_argument("--only", metavar="M1,M2", help="run only these (default: both)")
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="write every number (and M2's samples) to FILE")
    args = parser.parse_args(argv)
    only = [x.strip().upper() for x in (args.only or ",".join(BENCHES)).split(",") if x.strip()]
    unknown = [x for x in only if x not in BENCHES]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {list(BENCHES)}")
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    info: dict[str, Any] = {"nproc": nproc, "python": platform.python_version(),
                            "counterpoint": cp.__version__, "openai": _version("openai"),
                            "httpx": _version("httpx"), "loadavg_start": list(os.getloadavg())}
    console.print(f"[b]counterpoint model-layer benchmarks[/b] {'(quick) ' if args.quick else ''}"
                  f"- nproc {info['nproc']}, Python {info['python']}, openai {info['openai']}, "
                  f"httpx {info['httpx']}; load average at start "
                  f"{', '.join(f'{x:.2f}' for x in info['loadavg_start'])}")
    console.print()
    report: dict[str, Any] = {"machine": info, "quick": args.quick, "benchmarks": {}}
    for key in only:
        t0 = time.perf_counter()
        report["benchmarks"][key] = BENCHES[key](args.quick)
        report["benchmarks"][key]["bench_seconds"] = time.perf_counter() - t0
    info["loadavg_end"] = list(os.getloadavg())
    for key, data in report["benchmarks"].items():
        console.print(f"{key}: {verdict(bool(data['pass']))} "
                      f"({data['bench_seconds']:.0f} s)")
    console.print(f"load average at end {', '.join(f'{x:.2f}' for x in info['loadavg_end'])}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
