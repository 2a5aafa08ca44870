"""B2, parallel samples under random budgets, on SIMULATED models: downgrade vs fixed N.

    python -m benchmarks.budget_samples [--quick] [--runs 120] [--samples 5] [--seed 0]

(also run by ``python -m benchmarks.budgets``, after B1.)

**This is a simulation.** The model is ``sim-small`` of
``counterpoint.testing.simulated_models.standard_lineup`` (its prices, and its success
rate per task difficulty) served by ``counterpoint.testing.OpenAIServer`` (a real HTTP
server on 127.0.0.1). Unlike ``SimulatedModels``, whose answers are a pure function of
model and task (asking again gives the same answer), each sample here is an independent
draw: the responder below gives the task's known answer with the model's success rate,
keyed by the request's seed, and else one of ``WRONG`` wrong values, so that wrong
answers split their votes. No model runs; what follows is how the sampling strategies compare on
this model of success, not how any real model performs.

Each of ``--runs`` runs asks one task (from ``task_suite``) for ``--samples`` samples
under a random money budget between 0.5 and 1.2 x ``--samples`` sample bounds. The same
runs go three ways in this invocation:

- **downgrade** (counterpoint): ``model.generate(..., samples=N)``: the samples the
  budget covers are sent (at least one), the majority answer kept;
- **fixed N**: the N samples sent as N single calls at once under the same budget (each
  reserved, so it cannot overspend either), the majority kept only if all N answered:
  a run whose budget runs out before N fails;
- **single**: one call (no vote), as the floor of accuracy.

Reported per side: completion (runs that ended with an answer), overspent runs (spent
from the run's log above its budget: target 0 for every side), accuracy (runs with the
known answer / all runs), accuracy of the answered runs, mean samples sent, and the
completion and accuracy ratios downgrade / fixed N.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import counterpoint as cp
from counterpoint.budget import Budget, spent_in_log
from counterpoint.events import EventKind
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.models.budgeting import bound
from counterpoint.models.types import Message, Request
from counterpoint.store import MemoryStore
from counterpoint.testing import OpenAIServer, RecordedRequest, Reply
from counterpoint.testing.simulated_models import (
    SimulatedModel,
    Task,
    answer_of,
    standard_lineup,
    task_suite,
)

MAX_TOKENS = 64
"""Answer tokens each sample may have (its bound)."""
WRONG = 8
"""Wrong values a failed sample picks from (uniformly)."""


def _draw(*parts: object) -> float:
    return random.Random(":".join(map(str, parts))).random()


class Responder:
    """SIMULATED answers: the known one with the model's success rate, per sample."""

    def __init__(self, model: SimulatedModel, tasks: list[Task], seed: int) -> None:
        self.model = model
        self.tasks = {t.id: t for t in tasks}
        self.seed = seed

    def __call__(self, request: RecordedRequest) -> Reply:
        text = request.last_user_text
        task = self.tasks[text.split("]", 1)[0].removeprefix("[task ")]
        sample = request.body.get("seed")
        if _draw(self.seed, task.id, sample, "right") < self.model.rate(task):
            value = task.answer
        else:  # one of WRONG wrong values: wrong samples seldom agree with each other
            value = str(int(task.answer) + 1 + int(_draw(self.seed, task.id, sample) * WRONG))
        return Reply.text(f"work work\nANSWER: {value}")


@dataclass(slots=True)
class Side:
    runs: int = 0
    answered: int = 0
    correct: int = 0
    overspent: int = 0
    sent: int = 0
    notes: Counter[str] = field(default_factory=Counter)

    def row(self, name: str, seconds: float) -> str:
        accuracy = self.correct / self.runs if self.runs else 0.0
        of_answered = self.correct / self.answered if self.answered else 0.0
        return (f"{name:<12}{self.answered / self.runs:>12.3f}{self.overspent:>11}"
                f"{accuracy:>10.3f}{of_answered:>13.3f}{self.sent / self.runs:>14.2f}"
                f"{seconds:>9.2f}")


Strategy = Callable[[Model, Task, int], Awaitable[tuple[str | None, int]]]
"""Asks ``task`` for ``n`` samples; the answer (``None``: none) and the samples sent."""


async def _downgrade(model: Model, task: Task, n: int) -> tuple[str | None, int]:
    generation = await model.generate(task.prompt(), max_tokens=MAX_TOKENS, temperature=0.7,
                                      samples=n)
    sent = generation.sampled.sent if generation.sampled is not None else 1
    return answer_of(generation.text), sent


async def _fixed(model: Model, task: Task, n: int) -> tuple[str | None, int]:
    async def one(i: int) -> str | None:
        generation = await model.generate(task.prompt(), max_tokens=MAX_TOKENS,
                                          temperature=0.7, seed=1000 + i)
        return answer_of(generation.text)
    answers = await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)
    sent = sum(1 for a in answers if not isinstance(a, BaseException))
    if sent < n:  # the budget ran out before N: no answer
        raise cp.errors.BudgetExceeded(f"fixed N: only {sent} of {n} samples fitted")
    votes = Counter(a for a in answers if isinstance(a, str))
    return (votes.most_common(1)[0][0] if votes else None), sent


async def _single(model: Model, task: Task, n: int) -> tuple[str | None, int]:
    generation = await model.generate(task.prompt(), max_tokens=MAX_TOKENS, temperature=0.7,
                                      seed=1000)
    return answer_of(generation.text), 1


async def _side(strategy: Strategy, model: Model, trials: list[tuple[Task, float]],
                n: int, parallel: int) -> tuple[Side, float]:
    side = Side()
    gate = asyncio.Semaphore(parallel)
    started = time.perf_counter()

    async def one(task: Task, budget: float) -> None:
        out: dict[str, Any] = {}

        async def ask() -> None:
            out["answer"], out["sent"] = await strategy(model, task, n)
        graph = cp.Graph(f"sample-{task.id}")
        graph.add("ask", ask)
        store = MemoryStore()
        async with gate:
            # a fixed run id: the samples' derived seeds, so the draws, repeat run to run
            result = await cp.run(graph, store=store, run_id=f"b2-{task.id}",
                                  options=cp.RunOptions(budget=Budget(usd=budget)))
        events = store.events(result.run_id)
        spent, _ = spent_in_log(events)
        side.runs += 1
        side.overspent += spent.usd > budget + 1e-12
        side.sent += sum(1 for e in events if e.kind is EventKind.MODEL_CALL
                         and "input_tokens" in (e.data or {}))
        if result.ok:
            side.answered += 1
            side.correct += out.get("answer") == task.answer
    await asyncio.gather(*(one(t, b) for t, b in trials))
    return side, time.perf_counter() - started


def _model(server: OpenAIServer, sim: SimulatedModel) -> Model:
    return Model(sim.name, cache=False, registry=ModelRegistry(models={sim.name: ModelConfig(
        name=sim.name, provider="openai", model=sim.name, base_url=server.base_url,
        price_input=sim.price_input, price_output=sim.price_output, retries=0)}))


async def run(*, runs: int, samples: int, seed: int, parallel: int = 8) -> int:
    """Run B2 and print its table; 0 when no side overspent (PASS), else 1."""
    sim = next(m for m in standard_lineup() if m.name == "sim-small")
    tasks = task_suite(runs, seed=seed, weights={2: 1.0, 3: 1.0})
    rng = random.Random(f"b2:{seed}")
    config = ModelConfig(name=sim.name, provider="openai", model=sim.name,
                         price_input=sim.price_input, price_output=sim.price_output)
    each = bound(config, Request(messages=[Message.user(tasks[0].prompt())],
                                 max_tokens=MAX_TOKENS, seed=2**31)).usd
    trials = [(t, each * samples * rng.uniform(0.5 / samples, 1.2)) for t in tasks]
    print(f"B2 samples under random budgets (SIMULATION: {sim.name} of standard_lineup, "
          f"success {sim.success[2]:.2f} medium / {sim.success[3]:.2f} hard per sample): "
          f"{runs} runs x {samples} samples, budgets 0.5 to {1.2 * samples:.1f} sample "
          f"bounds, seed {seed}")
    results: dict[str, tuple[Side, float]] = {}
    with OpenAIServer(default=Reply.dynamic(Responder(sim, tasks, seed))) as server:
        model = _model(server, sim)
        for name, strategy in (("downgrade", _downgrade), ("fixed N", _fixed),
                               ("single", _single)):
            results[name] = await _side(strategy, model, trials, samples, parallel)
    print(f"{'side':<12}{'completion':>12}{'overspent':>11}{'accuracy':>10}"
          f"{'of answered':>13}{'mean samples':>14}{'seconds':>9}")
    for name, (side, seconds) in results.items():
        print(side.row(name, seconds))
    ours, fixed = results["downgrade"][0], results["fixed N"][0]
    completion = (ours.answered / fixed.answered) if fixed.answered else float("inf")
    accuracy = (ours.correct / fixed.correct) if fixed.correct else float("inf")
    print(f"downgrade / fixed N: completion {completion:.2f}x, accuracy {accuracy:.2f}x "
          "(reported, no target)")
    overspent = sum(side.overspent for side, _ in results.values())
    print(f"overspends: {overspent} (target 0)  {'PASS' if overspent == 0 else 'MISS'}")
    return 0 if overspent == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--runs", type=int, default=120)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="30 runs")
    args = parser.parse_args(argv)
    return asyncio.run(run(runs=30 if args.quick else args.runs, samples=args.samples,
                           seed=args.seed))


if __name__ == "__main__":
    sys.exit(main())
