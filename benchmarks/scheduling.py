"""S1, program-aware model-call scheduling (M35), on a SIMULATED endpoint: FIFO vs program.

    python benchmarks/scheduling.py [--quick] [--sizes 200,1000] [--seed 0] [--json FILE]
    python benchmarks/scheduling.py --replicas [--sizes 200]   # S2 only

Many workflows share one model endpoint with 8 slots. Every node of every workflow makes
one model call (``cache=False``), so calls queue for the model's ``max_concurrency=8``
slots in counterpoint's limiter. The same batch runs twice in this invocation, against
the same kind of fresh server: once with ``queue = "fifo"`` (arrival order, what an
``asyncio.Semaphore`` or a provider SDK gives) and once with ``queue = "program"``
(least estimated work left across workflows, with a virtual start time and an
over-estimate guard against starvation, then critical path; see
``counterpoint/models/queueing.py``). Reported per batch size: mean and p95 workflow
completion time (batch start to the workflow's result), makespan and throughput
(workflows / makespan), and program ÷ FIFO ratios. Targets: mean <= 0.7 x FIFO and
p95 <= 0.9 x FIFO (SAGA reports 1.64x faster task completion).

**This is a simulation.** The endpoint is ``counterpoint.testing.OpenAIServer`` (a real
HTTP server on 127.0.0.1 speaking the Chat Completions API) with a
``SimulatedEngine``: 8 slots, ``PREFILL`` seconds per uncached prompt token, ``DECODE``
seconds per answer token and a block prefix cache. No model runs; answers are filler
text of the requested length. The numbers say how the two queue orders compare on this
timing model, not how fast any real model is.

S2, replica stickiness (also a simulation, run after S1 or alone with ``--replicas``): the
same batch against one model name served by two simulated replicas (``base_urls``, 4
slots each, a prefix cache each), with a long per-workflow context (about
``S2_CONTEXT_TOKENS`` tokens, prefill-bound, as agent calls with long histories are).
``balance = "sticky"`` (each workflow keeps its replica, see
``counterpoint/models/replicas.py``) against ``round_robin``, in this invocation: mean
and p95 completion, makespan and the share of prompt tokens served from the replicas'
prefix caches, of the better of two runs each (run in the order A B B A).

Workflows: shapes drawn (seeded) from the bundled traces in ``../shared/evaldata``:
the 13 TaskBench records (tool graphs of 1-6 nodes: single, chain, DAG) and the
WfInstances traces of at most 60 tasks (10-58 nodes). A node's answer length is 8-48
tokens: from the trace's task runtime (scaled within the trace) for WfInstances, seeded
at random for TaskBench. Every node declares ``estimate=`` (its answer length times
``DECODE``: the program knows how much it asks for), which gives the ranks the program
order uses within a workflow. All workflows start at once (a batch).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402
from typing import Any  # noqa: E402

import counterpoint as cp  # noqa: E402
from benchmarks.workloads import evaldata_dir, load_wfinstance, wfinstance_paths  # noqa: E402
from counterpoint.garbage import tune_gc  # noqa: E402
from counterpoint.models import Model, ModelConfig, ModelRegistry  # noqa: E402
from counterpoint.testing import OpenAIServer, RecordedRequest, Reply, SimulatedEngine  # noqa: E402

SLOTS = 8
PREFILL = 0.00005
"""Simulated seconds per uncached prompt token."""
DECODE = 0.001
"""Simulated seconds per answer token."""
MAX_TRACE_TASKS = 60
MIN_TOKENS, MAX_TOKENS = 8, 48
TARGET_MEAN, TARGET_P95 = 0.7, 0.9
SERVER_MODEL = "sim-8"


@dataclass(frozen=True, slots=True)
class Shape:
    """A workflow shape: node -> (dependencies, answer tokens)."""

    name: str
    nodes: dict[str, tuple[tuple[str, ...], int]]


def taskbench_shapes(rng: random.Random) -> list[Shape]:
    shapes = []
    for path in sorted((evaldata_dir() / "taskbench" / "samples").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            names = [node["task"] for node in record["task_nodes"]]
            deps: dict[str, list[str]] = {name: [] for name in names}
            for link in record["task_links"]:
                if link["target"] in deps and link["source"] in deps:
                    deps[link["target"]].append(link["source"])
            shapes.append(Shape(f"taskbench-{record['id']}", {
                _safe(name): (tuple(_safe(d) for d in dict.fromkeys(deps[name])),
                              rng.randint(MIN_TOKENS, MAX_TOKENS)) for name in names}))
    return shapes


def trace_shapes() -> list[Shape]:
    shapes = []
    for path in wfinstance_paths():
        w = load_wfinstance(path)
        if len(w) > MAX_TRACE_TASKS:
            continue
        longest = max(d for _, d in w.nodes.values()) or 1.0
        shapes.append(Shape(w.name, {
            _safe(node): (tuple(_safe(d) for d in deps),
                          MIN_TOKENS + round((MAX_TOKENS - MIN_TOKENS) * d / longest))
            for node, (deps, d) in w.nodes.items()}))
    return shapes


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def batch(n: int, seed: int) -> list[Shape]:
    """``n`` workflow shapes drawn with ``seed`` from the bundled traces."""
    rng = random.Random(seed)
    pool = taskbench_shapes(rng) + trace_shapes()
    return [rng.choice(pool) for _ in range(n)]


def build(shape: Shape, index: int, model: Model, repeat: int = 12) -> cp.Graph:
    """One workflow: every node asks the model for its answer length, given its inputs.

    Its calls share a prefix of their own: the workflow's context (``repeat`` times a
    short sentence, about five tokens each)."""
    context = f"Workflow {index} ({shape.name}). " + "Shared instructions. " * repeat

    async def call(node: str, tokens: int, **inputs: str) -> str:
        prompt = f"{context}\nStep {node}. Inputs: {', '.join(sorted(inputs))}."
        answer = await model.generate(prompt, max_tokens=tokens, cache=False)
        return answer.text[:16]

    g = cp.Graph(f"s1-{index}")
    refs: dict[str, cp.NodeRef] = {}
    order = _topological(shape)
    for node in order:
        deps, tokens = shape.nodes[node]
        inputs = {f"in{i}": refs[d] for i, d in enumerate(deps)}
        refs[node] = g.add(node, call, node=node, tokens=tokens, estimate=tokens * DECODE,
                           **inputs)
    return g


def _topological(shape: Shape) -> list[str]:
    done: dict[str, None] = {}
    pending = list(shape.nodes)
    while pending:
        rest = []
        for node in pending:
            if all(d in done for d in shape.nodes[node][0]):
                done[node] = None
            else:
                rest.append(node)
        if len(rest) == len(pending):
            raise ValueError(f"{shape.name}: a cycle among {rest[:5]}")
        pending = rest
    return list(done)


def _filler(request: RecordedRequest) -> Reply:
    tokens = request.body.get("max_tokens") or request.body.get("max_completion_tokens") or 16
    return Reply.text("tok " * int(tokens))


@dataclass(frozen=True, slots=True)
class BatchResult:
    order: str
    workflows: int
    calls: int
    mean: float
    p95: float
    makespan: float
    throughput: float
    """Workflows per second of makespan."""


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def _run_all(graphs: list[cp.Graph], shapes: list[Shape]) -> tuple[list[float], float]:
    """Run every workflow at once; each one's completion time and the makespan."""
    start = time.perf_counter()
    done: list[float] = [0.0] * len(graphs)

    async def one(i: int) -> None:
        result = await cp.run(graphs[i], store="memory",
                              options=cp.RunOptions(max_concurrency=64))
        if not result.ok:
            raise AssertionError(f"workflow {i} ({shapes[i].name}) {result.status}")
        done[i] = time.perf_counter() - start

    async with asyncio.TaskGroup() as tg:
        for i in range(len(graphs)):
            tg.create_task(one(i))
    return done, time.perf_counter() - start


def run_batch(shapes: list[Shape], order: str) -> BatchResult:
    engine = SimulatedEngine(slots=SLOTS, prefill=PREFILL, decode=DECODE)
    with OpenAIServer(default=Reply.dynamic(_filler), engine=engine,
                      models=(SERVER_MODEL,)) as server:
        name = f"bench-s1-{order}-{uuid.uuid4().hex[:8]}"  # a fresh process-wide limiter
        registry = ModelRegistry({name: ModelConfig(
            name=name, provider="openai", model=SERVER_MODEL, base_url=server.base_url,
            profile="generic", max_concurrency=SLOTS, queue=order, retries=0)},  # type: ignore[arg-type]
            name)
        model = Model(name, registry=registry)
        graphs = [build(shape, i, model) for i, shape in enumerate(shapes)]
        times, makespan = asyncio.run(_run_all(graphs, shapes))
        calls = len(server.requests)
    expected = sum(len(s.nodes) for s in shapes)
    if calls != expected:
        raise AssertionError(f"{order}: {calls} model calls, expected {expected}")
    return BatchResult(order=order, workflows=len(shapes), calls=calls,
                       mean=statistics.fmean(times), p95=quantile(times, 0.95),
                       makespan=makespan, throughput=len(shapes) / makespan)


S2_SLOTS = 4
"""Slots per replica (two replicas: the same 8 slots as S1)."""
S2_CONTEXT_TOKENS = 2000
S2_PREFILL = 0.0002
"""Simulated seconds per uncached prompt token in S2 (prefill-bound)."""


@dataclass(frozen=True, slots=True)
class ReplicaResult:
    balance: str
    workflows: int
    mean: float
    p95: float
    makespan: float
    cached_share: float
    """Prompt tokens served from the replicas' prefix caches, over all prompt tokens."""
    split: tuple[int, int]
    """Requests each replica served."""


def run_replicas(shapes: list[Shape], balance: str) -> ReplicaResult:
    engines = [SimulatedEngine(slots=S2_SLOTS, prefill=S2_PREFILL, decode=DECODE)
               for _ in range(2)]
    with OpenAIServer(default=Reply.dynamic(_filler), engine=engines[0],
                      models=(SERVER_MODEL,)) as one, \
            OpenAIServer(default=Reply.dynamic(_filler), engine=engines[1],
                         models=(SERVER_MODEL,)) as two:
        name = f"bench-s2-{balance}-{uuid.uuid4().hex[:8]}"
        registry = ModelRegistry({name: ModelConfig(
            name=name, provider="openai", model=SERVER_MODEL,
            base_urls=(one.base_url, two.base_url), balance=balance,  # type: ignore[arg-type]
            profile="generic", max_concurrency=S2_SLOTS, retries=0)}, name)
        model = Model(name, registry=registry)
        repeat = S2_CONTEXT_TOKENS // 5
        graphs = [build(shape, i, model, repeat) for i, shape in enumerate(shapes)]
        times, makespan = asyncio.run(_run_all(graphs, shapes))
        split = (len(one.requests), len(two.requests))
    expected = sum(len(s.nodes) for s in shapes)
    if sum(split) != expected:
        raise AssertionError(f"{balance}: {sum(split)} model calls, expected {expected}")
    prompt = sum(e.prompt_tokens for e in engines)
    cached = sum(e.cached_tokens for e in engines)
    return ReplicaResult(balance=balance, workflows=len(shapes), mean=statistics.fmean(times),
                         p95=quantile(times, 0.95), makespan=makespan,
                         cached_share=cached / prompt if prompt else 0.0, split=split)


def replicas_section(n: int, seed: int) -> dict[str, Any]:
    shapes = batch(n, seed)
    # each balance runs twice, in the order A B B A, and keeps its better run: whichever
    # runs first in the process or beside a noisy neighbour is not favoured
    first, second = run_replicas(shapes, "round_robin"), run_replicas(shapes, "sticky")
    third, fourth = run_replicas(shapes, "sticky"), run_replicas(shapes, "round_robin")
    spread = min(first, fourth, key=lambda r: r.mean)
    sticky = min(second, third, key=lambda r: r.mean)
    for r in (spread, sticky):
        print(f"  {n:>5} workflows {r.balance:>11}: mean {r.mean:6.2f} s, p95 {r.p95:6.2f} s, "
              f"makespan {r.makespan:6.2f} s, prefix-cached {r.cached_share:6.1%} of prompt "
              f"tokens, requests per replica {r.split[0]}/{r.split[1]}")
    ratios = {"mean_ratio": sticky.mean / spread.mean, "p95_ratio": sticky.p95 / spread.p95,
              "makespan_ratio": sticky.makespan / spread.makespan}
    print(f"  {n:>5} workflows sticky ÷ round_robin: mean {ratios['mean_ratio']:.3f}, p95 "
          f"{ratios['p95_ratio']:.3f}, makespan {ratios['makespan_ratio']:.3f}")
    return {"workflows": n, "round_robin": asdict(spread), "sticky": asdict(sticky), **ratios}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="only 200 workflows")
    parser.add_argument("--sizes", default="200,1000")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--replicas", action="store_true",
                        help="only S2, replica stickiness (sticky vs round_robin)")
    args = parser.parse_args(argv)
    tune_gc()
    sizes = [200] if args.quick else [int(s) for s in args.sizes.split(",")]
    if args.replicas:
        return _replicas_only(sizes, args)
    print("S1 program-aware model-call scheduling, SIMULATED endpoint "
          f"({SLOTS} slots, prefill {PREFILL * 1e6:g} µs/token, decode {DECODE * 1e3:g} "
          "ms/token); FIFO and program orders run in this invocation")
    rows: list[dict[str, Any]] = []
    ok = True
    for n in sizes:
        shapes = batch(n, args.seed)
        fifo = run_batch(shapes, "fifo")
        program = run_batch(shapes, "program")
        mean_ratio, p95_ratio = program.mean / fifo.mean, program.p95 / fifo.p95
        passed = mean_ratio <= TARGET_MEAN and p95_ratio <= TARGET_P95
        ok = ok and passed
        for r in (fifo, program):
            print(f"  {n:>5} workflows {r.order:>7}: {r.calls} calls, mean {r.mean:6.2f} s, "
                  f"p95 {r.p95:6.2f} s, makespan {r.makespan:6.2f} s, "
                  f"{r.throughput:6.1f} workflows/s")
        print(f"  {n:>5} workflows program ÷ fifo: mean {mean_ratio:.3f} (target <= "
              f"{TARGET_MEAN}), p95 {p95_ratio:.3f} (target <= {TARGET_P95}), throughput "
              f"{program.throughput / fifo.throughput:.3f}  {'PASS' if passed else 'MISS'}")
        rows.append({"workflows": n, "fifo": asdict(fifo), "program": asdict(program),
                     "mean_ratio": mean_ratio, "p95_ratio": p95_ratio, "pass": passed})
    print(f"S2 replica stickiness, SIMULATED: 2 replicas x {S2_SLOTS} slots, a "
          f"~{S2_CONTEXT_TOKENS}-token context per workflow, prefill {S2_PREFILL * 1e6:g} "
          "µs/token; round_robin and sticky run in this invocation")
    replicas = [replicas_section(n, args.seed) for n in sizes[:1]]
    if args.json:
        args.json.write_text(json.dumps({"s1": rows, "s2": replicas}, indent=2))
    return 0 if ok else 1


def _replicas_only(sizes: list[int], args: argparse.Namespace) -> int:
    print(f"S2 replica stickiness, SIMULATED: 2 replicas x {S2_SLOTS} slots, a "
          f"~{S2_CONTEXT_TOKENS}-token context per workflow, prefill {S2_PREFILL * 1e6:g} "
          "µs/token; round_robin and sticky run in this invocation")
    rows = [replicas_section(n, args.seed) for n in sizes]
    if args.json:
        args.json.write_text(json.dumps({"s2": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
