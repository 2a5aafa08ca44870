"""B1, budgets (M22), on a SIMULATED priced model: reservations vs a greedy baseline.

    python -m benchmarks.budgets [--quick] [--runs 200] [--calls 12] [--seed 0]

Then B2, parallel samples under random budgets (``benchmarks/budget_samples.py``).

**This is a simulation.** The model is ``counterpoint.testing.OpenAIServer`` (a real HTTP
server on 127.0.0.1 speaking the Chat Completions API) with a ``SimulatedEngine`` (8
slots, ``DECODE`` seconds per answer token), priced in ``counterpoint.toml`` terms at
``PRICE_IN`` / ``PRICE_OUT`` USD per million tokens. No model runs: each answer's length
is drawn (seeded) between ``MIN_ANSWER`` and ``MAX_TOKENS`` tokens and reported as its
usage, so the cost of a call is known only once it has answered, as with a real model.

Each of ``--runs`` runs fans out ``--calls`` model calls at once (each ``max_tokens =
MAX_TOKENS``) under a random money budget (between 20% and 120% of what all its calls
would cost at the mean answer length). The same runs, with the same answer lengths, go
twice in this invocation:

- **counterpoint**: one graph per run with ``RunOptions(budget=Budget(usd=...))``: each
  call reserves its bound before it is sent and settles after (``counterpoint.budget``);
- **greedy** (hand-written here): the same calls through the same ``Model`` with no
  ledger, ``--inflight`` (4) at a time per run; after each call answers its cost is added
  and a next call starts only while the spend is under the budget: calls in flight are
  not counted, which is how such a loop overspends.

Reported: runs that overspent (spent more than their budget, measured from counterpoint's
run log / the baseline's own sum of reported costs), the largest overspend, the
completion rate (calls that answered / calls asked) and the completion within budget
(calls that answered before the spend passed the budget, in the order they answered),
with counterpoint ÷ greedy on the latter.
Target: zero overspends for counterpoint (PASS/MISS). Completion is reported, not
targeted: reserving the bound (``max_tokens`` at the output price, and at most one token
per byte of the request) is what costs completions against a baseline that overspends.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from dataclasses import dataclass

import counterpoint as cp
from counterpoint.budget import Budget, spent_in_log
from counterpoint.events import EventKind
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.store import MemoryStore
from counterpoint.testing import (
    OpenAIServer,
    RecordedRequest,
    Reply,
    SimulatedEngine,
    Usage,
)

PRICE_IN = 0.5
"""USD per million prompt tokens (simulated)."""
PRICE_OUT = 10.0
"""USD per million answer tokens (simulated)."""
MAX_TOKENS = 200
MIN_ANSWER = 10
DECODE = 0.00002
"""Seconds per answer token of the simulated engine."""
PROMPT_TOKENS = 40
"""Prompt tokens each simulated answer reports."""


@dataclass(frozen=True, slots=True)
class Trial:
    budget: float
    answers: tuple[int, ...]
    """Answer tokens of each call, in the order the calls are made (the same both sides)."""


@dataclass(slots=True)
class Tally:
    overspent: int = 0
    worst: float = 0.0
    """The largest overspend, as a share of its budget."""
    answered: int = 0
    within: int = 0
    """Calls that answered before the spend passed the budget (in the order they
    answered): what a user who stops paying at the budget would get."""
    asked: int = 0

    def add(self, costs: list[float], budget: float, asked: int) -> None:
        spent = sum(costs)
        if spent > budget + 1e-12:
            self.overspent += 1
            self.worst = max(self.worst, spent / budget - 1.0)
        total = 0.0
        for cost in costs:
            total += cost
            if total > budget + 1e-12:
                break
            self.within += 1
        self.answered += len(costs)
        self.asked += asked

    @property
    def completion(self) -> float:
        return self.answered / self.asked if self.asked else 0.0

    @property
    def completion_within(self) -> float:
        return self.within / self.asked if self.asked else 0.0


def _cost(answer: int) -> float:
    return (PROMPT_TOKENS * PRICE_IN + answer * PRICE_OUT) / 1e6


def _trials(runs: int, calls: int, seed: int) -> list[Trial]:
    rng = random.Random(seed)
    trials = []
    for _ in range(runs):
        answers = tuple(rng.randint(MIN_ANSWER, MAX_TOKENS) for _ in range(calls))
        mean = calls * _cost((MIN_ANSWER + MAX_TOKENS) // 2)
        trials.append(Trial(budget=round(rng.uniform(0.2, 1.2) * mean, 8), answers=answers))
    return trials


def _server() -> OpenAIServer:
    def respond(request: RecordedRequest) -> Reply:
        # the prompt names the answer's length: "run R call C answer N" (simulated model)
        answer = int(request.last_user_text.rsplit(" ", 1)[1])
        return Reply.text("x", usage=Usage(prompt_tokens=PROMPT_TOKENS,
                                           completion_tokens=answer))
    return OpenAIServer(default=Reply.dynamic(respond),
                        engine=SimulatedEngine(slots=8, decode=DECODE))


def _model(server: OpenAIServer) -> Model:
    return Model("sim", cache=False, registry=ModelRegistry(models={"sim": ModelConfig(
        name="sim", provider="openai", model="sim", base_url=server.base_url,
        price_input=PRICE_IN, price_output=PRICE_OUT, retries=0)}))


async def _counterpoint_run(model: Model, index: int, trial: Trial,
                            tally: Tally) -> None:
    g = cp.Graph(f"budgeted-{index}")
    for call, answer in enumerate(trial.answers):
        async def ask(prompt: str = f"run {index} call {call} answer {answer}") -> str:
            return (await model.generate(prompt, max_tokens=MAX_TOKENS)).text
        g.add(f"call{call}", ask)
    store = MemoryStore()
    result = await cp.run(g, store=store, options=cp.RunOptions(budget=Budget(
        usd=trial.budget)))
    events = store.events(result.run_id)
    spent, _ = spent_in_log(events)
    costs = [(e.data or {}).get("cost") or 0.0 for e in events
             if e.kind is EventKind.MODEL_CALL and "error" not in (e.data or {})]
    if abs(sum(costs) - spent.usd) > 1e-12:
        raise RuntimeError(f"run {result.run_id}: the log's calls and its ledger disagree")
    refused = [ns for ns in result.state.nodes.values()
               if ns.status == "failed" and (ns.error or {}).get("type") != "BudgetExceeded"]
    if refused:
        raise RuntimeError(f"run {result.run_id}: a call failed for another reason: "
                           f"{refused[0].error}")
    tally.add(costs, trial.budget, len(trial.answers))


async def _greedy_run(model: Model, index: int, trial: Trial, tally: Tally,
                      inflight: int) -> None:
    """The baseline: up to ``inflight`` calls at once; after each call answers, its cost
    is added and a next call starts only while the spend is under the budget (calls in
    flight are not counted)."""
    costs: list[float] = []
    todo = list(enumerate(trial.answers))

    async def ask(call: int, answer: int) -> None:
        generation = await model.generate(f"run {index} call {call} answer {answer}",
                                          max_tokens=MAX_TOKENS)
        costs.append(generation.usage.cost or 0.0)

    pending: set[asyncio.Task[None]] = set()
    while todo or pending:
        while todo and len(pending) < inflight and sum(costs) < trial.budget:
            pending.add(asyncio.create_task(ask(*todo.pop(0))))
        if not pending:
            break
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    tally.add(costs, trial.budget, len(trial.answers))


async def _side(name: str, trials: list[Trial], parallel: int,
                inflight: int) -> tuple[Tally, float]:
    tally = Tally()
    with _server() as server:
        model = _model(server)
        started = time.perf_counter()
        gate = asyncio.Semaphore(parallel)

        async def one(index: int, trial: Trial) -> None:
            async with gate:
                if name == "counterpoint":
                    await _counterpoint_run(model, index, trial, tally)
                else:
                    await _greedy_run(model, index, trial, tally, inflight)
        await asyncio.gather(*(one(i, t) for i, t in enumerate(trials)))
        elapsed = time.perf_counter() - started
    return tally, elapsed


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--calls", type=int, default=12, help="calls in flight per run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parallel", type=int, default=8, help="runs going at once")
    parser.add_argument("--inflight", type=int, default=4,
                        help="the greedy baseline's calls in flight per run")
    parser.add_argument("--quick", action="store_true", help="20 runs of 6 calls")
    args = parser.parse_args(argv)
    runs, calls = (20, 6) if args.quick else (args.runs, args.calls)
    trials = _trials(runs, calls, args.seed)
    print(f"B1 budgets (SIMULATION: OpenAIServer + SimulatedEngine, priced at ${PRICE_IN}/"
          f"${PRICE_OUT} per M tokens): {runs} runs x {calls} calls in flight, seed "
          f"{args.seed}")
    results: dict[str, tuple[Tally, float]] = {}
    for name in ("counterpoint", "greedy"):
        results[name] = await _side(name, trials, args.parallel, args.inflight)
    print(f"{'side':<14}{'overspent runs':>16}{'worst overspend':>17}{'completion':>12}"
          f"{'within budget':>15}{'seconds':>9}")
    for name, (tally, seconds) in results.items():
        print(f"{name:<14}{tally.overspent:>16}{tally.worst:>16.1%}{tally.completion:>12.3f}"
              f"{tally.completion_within:>15.3f}{seconds:>9.2f}")
    ours, theirs = results["counterpoint"][0], results["greedy"][0]
    ratio = ours.completion_within / theirs.completion_within \
        if theirs.completion_within else float("nan")
    passed = ours.overspent == 0
    print(f"completion within budget, counterpoint / greedy: {ratio:.3f} (reported, no "
          "target)")
    print(f"overspends: {ours.overspent} (target 0)  {'PASS' if passed else 'MISS'}")
    print()
    try:  # B2: parallel samples, downgrade vs fixed N (python -m, or the file run directly)
        from .budget_samples import run as samples
    except ImportError:
        from budget_samples import run as samples  # type: ignore[no-redef]
    sampled = await samples(runs=30 if args.quick else 120, samples=5, seed=args.seed)
    return 0 if passed and sampled == 0 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
