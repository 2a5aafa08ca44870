"""Self-healing evaluation (a simulation): deterministic healing vs a ReAct-style loop.

A suite of tasks, each one model call and one tool call, runs with injected failures: the
primary model is down (a real OpenAI-compatible server on loopback answering 503) and a
tool flaps (fails with probability ``--flap``, seeded). Counterpoint heals with circuit
breakers and rerouting (``Model`` fallbacks, ``tool(alternatives=...)``); the baseline asks
a controller model (an LLM control-plane call, here a simulated one on loopback) what to
do after every failure, as a ReAct loop does. It counts control-plane calls and successes.

    python -m benchmarks.healing --tasks 40 --seed 1
"""

from __future__ import annotations

import argparse
import asyncio
import random
from typing import Any

from counterpoint.agents import tool
from counterpoint.errors import ModelError, ToolError
from counterpoint.health import BreakerOptions, HealthRegistry, use_health
from counterpoint.health.tools import call_healed
from counterpoint.models import Model
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.testing import ManualClock, OpenAIServer, Reply

TARGET = 0.8
"""Fewer control-plane calls than the baseline, as a share, at equal success."""


def _tools(rng: random.Random, flap: float) -> tuple[Any, Any]:
    @tool(cost=2.0)
    def backup(task: str) -> str:
        """The backup service."""
        return f"{task}: ok (backup)"

    @tool(alternatives=[backup])
    def service(task: str) -> str:
        """The service (it flaps: a simulation)."""
        if rng.random() < flap:
            raise ToolError("service unavailable")
        return f"{task}: ok"

    return service, backup


async def _counterpoint(tasks: int, rng: random.Random, flap: float, down: OpenAIServer,
                        spare: OpenAIServer) -> dict[str, Any]:
    service, _ = _tools(rng, flap)
    model = Model(OpenAIProvider("primary", "m", base_url=down.base_url), retries=0,
                  cache=False, timeout=5.0,
                  fallbacks=[OpenAIProvider("fallback", "m", base_url=spare.base_url)])
    registry = HealthRegistry(BreakerOptions(failures=2, open_for=3600.0), clock=ManualClock())
    ok = 0
    with use_health(registry):
        for i in range(tasks):
            try:
                await model.generate(f"task {i}", max_tokens=8)
                await call_healed(service, {"task": f"t{i}"}, key=None, ctx=None)
                ok += 1
            except (ModelError, ToolError):
                pass
    return {"success": ok, "control_calls": 0}


async def _react(tasks: int, rng: random.Random, flap: float, down: OpenAIServer,
                 spare: OpenAIServer, controller: OpenAIServer) -> dict[str, Any]:
    service, backup = _tools(rng, flap)
    primary = Model(OpenAIProvider("primary", "m", base_url=down.base_url), retries=0,
                    cache=False, timeout=5.0)
    fallback = Model(OpenAIProvider("fallback", "m", base_url=spare.base_url), retries=0,
                     cache=False, timeout=5.0)
    control = Model(OpenAIProvider("controller", "m", base_url=controller.base_url),
                    retries=0, cache=False, timeout=5.0)
    ok = calls = 0
    for i in range(tasks):
        try:
            await primary.generate(f"task {i}", max_tokens=8)
        except ModelError as exc:
            calls += 1  # the loop asks the model what to do about the failure
            await control.generate(f"model failed: {exc}. What next?", max_tokens=8)
            await fallback.generate(f"task {i}", max_tokens=8)
        try:
            await service.call({"task": f"t{i}"})
        except ToolError as exc:
            calls += 1
            await control.generate(f"tool failed: {exc}. What next?", max_tokens=8)
            await backup.call({"task": f"t{i}"})
        ok += 1
    return {"success": ok, "control_calls": calls}


async def evaluate(tasks: int = 40, seed: int = 1, flap: float = 0.3) -> dict[str, Any]:
    """Both ways on the same suite and failures; the result dict ``main`` prints."""
    with OpenAIServer(default=Reply.status(503)) as down, \
            OpenAIServer(default=Reply.text("done")) as spare, \
            OpenAIServer(default=Reply.text("use the fallback")) as controller:
        healed = await _counterpoint(tasks, random.Random(seed), flap, down, spare)
        react = await _react(tasks, random.Random(seed), flap, down, spare, controller)
    fewer = 1 - healed["control_calls"] / react["control_calls"] if react["control_calls"] \
        else 0.0
    passed = fewer >= TARGET and healed["success"] >= react["success"]
    return {"simulation": True, "tasks": tasks, "seed": seed, "flap": flap,
            "counterpoint": healed, "react": react, "fewer_control_calls": fewer,
            "target": TARGET, "pass": passed}


def healing(tasks: int = 40, seed: int = 1, flap: float = 0.3) -> dict[str, Any]:
    """:func:`evaluate`, from synchronous code (``benchmarks/adaptive.py``)."""
    return asyncio.run(evaluate(tasks, seed, flap))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--flap", type=float, default=0.3)
    args = parser.parse_args(argv)
    r = healing(args.tasks, args.seed, args.flap)
    print("self-healing (SIMULATION: simulated models and tools on loopback)")
    print(f"{'':14}{'success':>10}{'control-plane LLM calls':>26}")
    for name in ("counterpoint", "react"):
        print(f"{name:14}{r[name]['success']:>7}/{r['tasks']:<3}{r[name]['control_calls']:>26}")
    print(f"fewer control-plane calls: {r['fewer_control_calls']:.0%} (target >= "
          f"{TARGET:.0%} at equal success): {'PASS' if r['pass'] else 'FAIL'}")
    return 0 if r["pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
