"""T1 topology choice for goals (a SIMULATION): ``topology="auto"`` against each fixed one.

Goal runs (the real planning runtime: plan node, live edits, subtask nodes, answer) on
plans of four shapes: a fan-out of four subtasks and a join, a chain of four, two
independent chains of two, and one subtask. Every role is one simulated model (a
scripted provider answering from the request) whose latency is a fixed cost per call
(``--call-ms``, prefill and overhead) plus a cost per step the call's task holds
(``--step-ms``, decode: a worker doing three steps writes three steps' worth). Each
plan runs with ``auto`` and with every fixed topology, in this invocation; the table
shows wall time (the median of ``--repeats`` runs) and model calls per goal, and the
summary auto's total time over the best fixed topology's. No output quality is
modelled: this measures only what a shape costs in time and calls, which is not what
AdaptOrch's +12-23% is about.

    python -m benchmarks.topology [--call-ms 20] [--step-ms 30] [--repeats 3]

Target: auto's total time <= 1.05 x the best fixed topology's total.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import time
from collections.abc import Sequence
from typing import Any

import counterpoint as cp
from counterpoint.models import Request, Response, ScriptedModel
from counterpoint.models.provider import TextSink
from counterpoint.planning import Limits, Team, goal_graph
from counterpoint.planning.team import PLANNER, SYNTHESIZER, WORKER

TARGET = 1.05
TOPOLOGIES = ("auto", "single", "parallel", "sequential", "hierarchical")
PLANS: dict[str, dict[str, list[str]]] = {
    "fan-out": {"t1": [], "t2": [], "t3": [], "t4": [], "t5": ["t1", "t2", "t3", "t4"]},
    "chain": {"t1": [], "t2": ["t1"], "t3": ["t2"], "t4": ["t3"]},
    "two chains": {"t1": [], "t2": ["t1"], "t3": [], "t4": ["t3"]},
    "one step": {"t1": []},
}


class SimulatedCrew(ScriptedModel):
    """Every role, answered from the request, after a simulated latency (a simulation:
    ``call`` seconds per call plus ``step`` per step of a worker's task)."""

    def __init__(self, plan: dict[str, list[str]], call: float, step: float) -> None:
        super().__init__(name="simulated-crew")
        self.plan = {"subtasks": [{"id": i, "task": f"do {i}", "worker": "writer",
                                   "needs": n, "expected": ""} for i, n in plan.items()]}
        self.call, self.step = call, step

    async def complete(self, request: Request, *, on_text: TextSink | None = None,
                       time_limit: float | None = None) -> Response:
        system = request.messages[0].content if request.messages[0].role == "system" else ""
        user = next(m.content for m in request.messages if m.role == "user")
        steps = 1
        if system.startswith(PLANNER):
            text = json.dumps(self.plan)
        elif system.startswith(WORKER):
            steps = max(1, len(re.findall(r"\(\d+\) ", user)))
            text = f"done in {steps} step(s)"
        elif system.startswith(SYNTHESIZER):
            text = "the answer"
        else:
            raise AssertionError(f"unexpected call: {system[:60]!r}")
        await asyncio.sleep(self.call + self.step * steps)
        self.add(text)
        return await super().complete(request, on_text=on_text, time_limit=time_limit)


async def one(plan: dict[str, list[str]], topology: str, call: float,
              step: float) -> tuple[float, int, str]:
    """One goal run: its wall time, model calls, and the shape it ran."""
    crew = SimulatedCrew(plan, call, step)
    graph = goal_graph("a goal", Team.default(cp.Model(crew, cache=False)),
                       Limits(max_rounds=0, topology=topology))  # type: ignore[arg-type]
    store = cp.MemoryStore()
    started = time.perf_counter()
    result = await cp.run(graph, store=store)
    took = time.perf_counter() - started
    if not result.ok:
        raise AssertionError(f"{topology}: the goal run {result.status}")
    shape = next((e.data or {}).get("shape", "?") for e in store.events(result.run_id)
                 if e.kind is cp.EventKind.TOPOLOGY_CHOSEN)
    return took, len(crew.requests), str(shape)


async def evaluate(call: float = 0.02, step: float = 0.03,
                   repeats: int = 3) -> dict[str, Any]:
    """Every plan with every topology: the median of ``repeats`` runs each (after one
    warm-up run, so the first row does not pay for imports)."""
    await one(PLANS["one step"], "auto", call, step)
    rows: dict[str, dict[str, tuple[float, int, str]]] = {}
    for name, plan in PLANS.items():
        rows[name] = {}
        for t in TOPOLOGIES:
            runs = [await one(plan, t, call, step) for _ in range(repeats)]
            took = statistics.median(r[0] for r in runs)
            rows[name][t] = (took, runs[0][1], runs[0][2])
    totals = {t: sum(rows[p][t][0] for p in rows) for t in TOPOLOGIES}
    best = min(totals[t] for t in TOPOLOGIES if t != "auto")
    return {"simulation": True, "rows": rows, "totals": totals,
            "auto_over_best_fixed": totals["auto"] / best,
            "pass": totals["auto"] <= TARGET * best}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--call-ms", type=float, default=20.0)
    parser.add_argument("--step-ms", type=float, default=30.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    r = asyncio.run(evaluate(args.call_ms / 1000, args.step_ms / 1000, args.repeats))
    print(f"T1 topology choice, SIMULATION (simulated model: {args.call_ms:g} ms per call "
          f"+ {args.step_ms:g} ms per step; no output quality modelled); all in this "
          "invocation")
    print("  " + f"{'plan':<12}" + "".join(f"{t:>20}" for t in TOPOLOGIES))
    for plan, cells in r["rows"].items():
        print("  " + f"{plan:<12}" + "".join(
            f"{f'{s:.2f}s {c} calls':>20}" for s, c, _ in cells.values())
            + f"   (auto ran: {cells['auto'][2]})")
    print("  " + f"{'total':<12}" + "".join(f"{r['totals'][t]:>19.2f}s" for t in TOPOLOGIES))
    print(f"  auto / best fixed total: {r['auto_over_best_fixed']:.3f} (target <= "
          f"{TARGET}): {'PASS' if r['pass'] else 'MISS'}")
    return 0 if r["pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
