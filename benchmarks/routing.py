"""R2, model routing per subtask (M21) on SIMULATED models: cost and success by policy.

    python -m benchmarks.routing [--quick] [--tasks 300] [--seed 0] [--json FILE]

A suite of tasks with known answers (mixed difficulties easy/medium/hard and skills
lookup/math/code, seeded) runs as counterpoint workflows, one run per task, each node
asking ``Model.auto(...)`` with the task's tags and an output check that compares the
answer with the known one. The same suite runs once per configuration, in this
invocation, against the same simulated models:

- ``cheapest_that_passes`` learning on: one store for the whole suite, so each choice is
  made with what the finished runs so far taught the router (per model and tag);
- ``cheapest_that_passes`` learning off: a fresh store per task (the prior only);
- always the strongest model, always the cheapest (``Model.auto(models=[one])``: the
  same code path, one candidate, no escalation);
- ``quality_first`` and ``latency_first`` over all models, learning on, for context
  (``-`` in the learning column where what was learned cannot change the choice).

Reported per configuration: success (the share of tasks whose output is the known
answer), total cost (USD, from the ``model_call`` events' usage at the configured
prices), model calls, calls per task in the first and the last third of the suite (the
effect of learning), and wall time. Target: ``cheapest_that_passes`` (learning on) costs
>= 50% less than always-strongest with success within 2 points of it (CASTER reports
-72.4% cost at equal success).

**This is a simulation.** The models are ``counterpoint.testing.simulated_models``: four
simulated models (``standard_lineup``: prices from small open models to frontier ones,
success rates per difficulty, a slower engine with fewer slots as they get stronger)
behind one ``OpenAIServer`` on 127.0.0.1. Whether a model gets a task right is a seeded
function of the model and the task (failures correlated across models). The numbers
say how the policies compare on this model of prices and skills, not how any real model
does.
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
import time  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402

import counterpoint as cp  # noqa: E402
from counterpoint.events import EventKind  # noqa: E402
from counterpoint.models import Model, ModelRegistry  # noqa: E402
from counterpoint.routing import stats_for  # noqa: E402
from counterpoint.store import MemoryStore  # noqa: E402
from counterpoint.testing.simulated_models import (  # noqa: E402
    SimulatedModels,
    Task,
    answer_of,
    standard_lineup,
    task_suite,
)

PREFILL = 0.00002
"""Simulated seconds per uncached prompt token of the smallest model (x2 per size up)."""
DECODE = 0.0005
"""Simulated seconds per answer token of the smallest model (x2 per size up)."""
IN_FLIGHT = 16
"""Task runs in flight at once."""
MAX_TOKENS = 64
TARGET_COST, TARGET_SUCCESS_POINTS = 0.5, 2.0


@dataclass(frozen=True, slots=True)
class Config:
    """One way of choosing models for the whole suite."""

    name: str
    policy: str
    models: tuple[str, ...] = ()
    learning: bool = True


@dataclass
class Outcome:
    config: str
    learning: bool
    tasks: int
    passed: int = 0
    cost: float = 0.0
    calls: int = 0
    seconds: float = 0.0
    first_third_calls: float = 0.0
    last_third_calls: float = 0.0
    chosen_first: dict[str, int] = field(default_factory=dict)
    """How often each model was the first choice for a task."""

    @property
    def success(self) -> float:
        return self.passed / self.tasks if self.tasks else 0.0


def configs(lineup: Sequence[str]) -> list[Config]:
    cheapest, strongest = lineup[0], lineup[-1]
    return [
        Config("cheapest_that_passes", "cheapest_that_passes"),
        Config("cheapest_that_passes, learning off", "cheapest_that_passes", learning=False),
        Config(f"always strongest ({strongest})", "quality_first", (strongest,)),
        Config(f"always cheapest ({cheapest})", "quality_first", (cheapest,)),
        Config("quality_first", "quality_first"),
        Config("latency_first", "latency_first"),
    ]


def task_graph(task: Task, model: Model) -> cp.Graph:
    """One task as a workflow: a node that asks the routed model and returns its answer."""
    async def solve() -> str | None:
        generation = await model.generate(task.prompt(), max_tokens=MAX_TOKENS)
        return answer_of(generation.text)

    g = cp.Graph(f"route-{task.id}")
    g.add("solve", solve)
    return g


async def run_config(config: Config, tasks: Sequence[Task], fleet: SimulatedModels,
                     registry: ModelRegistry) -> tuple[Outcome, MemoryStore]:
    shared = MemoryStore()
    gate = asyncio.Semaphore(IN_FLIGHT)
    per_task: list[tuple[bool, float, int, str | None]] = [(False, 0.0, 0, None)] * len(tasks)

    async def one(index: int, task: Task) -> None:
        store = shared if config.learning else MemoryStore()
        model = Model.auto(config.policy, tags=task.tags, models=config.models,
                           check=fleet.check(task), registry=registry, cache=False)
        async with gate:
            result = await cp.run(task_graph(task, model), store=store)
        usage = result.nodes[cp.ids.NodeId("solve")].usage
        first = next((e.data.get("model") for e in store.events(result.run_id)
                      if e.kind is EventKind.MODEL_ROUTED and e.data), None)
        per_task[index] = (result.ok and result.output == {"solve": task.answer},
                           usage.cost, usage.calls, first)

    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for index, task in enumerate(tasks):
            group.create_task(one(index, task))
    seconds = time.perf_counter() - started
    third = max(1, len(tasks) // 3)
    return Outcome(
        config=config.name, learning=config.learning, tasks=len(tasks),
        passed=sum(p for p, _, _, _ in per_task), cost=sum(c for _, c, _, _ in per_task),
        calls=sum(n for _, _, n, _ in per_task), seconds=seconds,
        first_third_calls=sum(n for _, _, n, _ in per_task[:third]) / third,
        last_third_calls=sum(n for _, _, n, _ in per_task[-third:]) / third,
        chosen_first=dict(Counter(str(f) for _, _, _, f in per_task)),
    ), shared


def learned_table(store: MemoryStore, models: Sequence[str], tags: Sequence[str]) -> str:
    """What the router learned (estimated success, with the prior, and tries) per tag."""
    stats = stats_for(store)
    rows = [f"  {'tag':<8}" + "".join(f"{m:>18}" for m in models)]
    for tag in tags:
        rows.append(f"  {tag:<8}" + "".join(
            f"{stats.success(m, [tag]):>11.2f} ({stats.tries(m, [tag]):>3})" for m in models))
    return "\n".join(rows)


@dataclass
class Evaluation:
    """One invocation's results (see the module docstring)."""

    tasks: int
    seed: int
    outcomes: list[Outcome]
    learned: str
    """What ``cheapest_that_passes`` learned, as a table."""
    simulated: bool = True

    def by_name(self, name: str) -> Outcome:
        return next(o for o in self.outcomes if o.config.startswith(name))

    @property
    def cost_ratio(self) -> float:
        strongest = self.by_name("always strongest").cost
        return self.outcomes[0].cost / strongest if strongest else float("inf")

    @property
    def points_below(self) -> float:
        """Success points ``cheapest_that_passes`` is below always-strongest."""
        return (self.by_name("always strongest").success - self.outcomes[0].success) * 100

    @property
    def passed(self) -> bool:
        return self.cost_ratio <= TARGET_COST and self.points_below <= TARGET_SUCCESS_POINTS


async def evaluate(tasks: int, seed: int, *, progress: bool = False) -> Evaluation:
    """Run the suite under every configuration against fresh simulated models."""
    suite = task_suite(tasks, seed=seed)
    lineup = standard_lineup(prefill=PREFILL, decode=DECODE)
    names = [m.name for m in lineup]
    outcomes: list[Outcome] = []
    learned = ""
    with SimulatedModels(lineup, suite, seed=seed) as fleet:
        registry = fleet.registry(retries=0)
        for config in configs(names):
            outcome, store = await run_config(config, suite, fleet, registry)
            outcomes.append(outcome)
            if config.name == "cheapest_that_passes":
                learned = learned_table(store, names, ("easy", "medium", "hard", "math"))
            if progress:
                print(f"  ran {config.name}: {outcome.seconds:.1f}s", flush=True)
    return Evaluation(tasks=tasks, seed=seed, outcomes=outcomes, learned=learned)


def report(ev: Evaluation) -> None:
    names = [m.name for m in standard_lineup()]
    print(f"\n{'configuration':<40}{'learn':>6}{'success':>9}{'cost $':>11}{'calls':>7}"
          f"{'calls/task 1st/last third':>28}{'seconds':>9}")
    for o, c in zip(ev.outcomes, configs(names), strict=True):
        learn = "-" if len(c.models) == 1 or c.policy == "quality_first" else \
            "on" if o.learning else "off"
        print(f"{o.config:<40}{learn:>6}{o.success:>9.3f}{o.cost:>11.5f}{o.calls:>7}"
              f"{f'{o.first_third_calls:.2f} / {o.last_third_calls:.2f}':>28}{o.seconds:>9.1f}")
    ctp, off = ev.outcomes[0], ev.outcomes[1]
    strongest = ev.by_name("always strongest")
    print("\nfirst choice per task, cheapest_that_passes learning on:", ctp.chosen_first)
    print("first choice per task, learning off:", off.chosen_first)
    print("\nlearned by cheapest_that_passes (est. success with prior 0.7 over 4 "
          "pseudo-tries; tries):")
    print(ev.learned)
    ratio, points = ev.cost_ratio, ev.points_below
    print(f"\ncost cheapest_that_passes / always-strongest = {ratio:.3f} "
          f"({(1 - ratio) * 100:.1f}% lower; target >= 50% lower): "
          f"{'PASS' if ratio <= TARGET_COST else 'MISS'}")
    print(f"success cheapest_that_passes {ctp.success:.3f} vs always-strongest "
          f"{strongest.success:.3f}: {-points:+.1f} points (target within "
          f"{TARGET_SUCCESS_POINTS:g}): {'PASS' if points <= TARGET_SUCCESS_POINTS else 'MISS'}")
    print(f"learning: cost on / off = {ctp.cost / off.cost if off.cost else 0:.3f}, calls "
          f"{ctp.calls} vs {off.calls}, success {ctp.success:.3f} vs {off.success:.3f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="60 tasks")
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if args.quick:
        args.tasks = min(args.tasks, 60)
    lineup = standard_lineup(prefill=PREFILL, decode=DECODE)
    print(f"R2 model routing (SIMULATED models: counterpoint.testing.simulated_models), "
          f"{args.tasks} tasks, seed {args.seed}, {IN_FLIGHT} runs in flight")
    for m in lineup:
        math = f"  (math: {dict(m.tag_success['math'])})" if "math" in m.tag_success else ""
        print(f"  {m.name:<11} quality {m.quality}  ${m.price_input:g}/${m.price_output:g} "
              f"per M tokens  success easy/medium/hard "
              f"{'/'.join(f'{m.success[d]:.2f}' for d in (1, 2, 3))}{math}  {m.slots} slots")
    ev = asyncio.run(evaluate(args.tasks, args.seed, progress=True))
    report(ev)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "tasks": ev.tasks, "seed": ev.seed, "simulated": True,
            "outcomes": [asdict(o) | {"success": o.success} for o in ev.outcomes],
            "cost_ratio": ev.cost_ratio, "success_points_below": ev.points_below,
            "pass": ev.passed}, indent=2))
    return 0 if ev.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
