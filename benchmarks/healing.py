"""H1 self-healing (a SIMULATION): deterministic healing vs a ReAct-style loop, same tasks.

A suite of tasks with known answers runs in one simulated environment, twice: once with
counterpoint's healing, once with a ReAct-style loop that asks its controller model
what to do after every failure (the Self-Healing Router's baseline). Each task is one
model call (the answer must name the task) and one tool call (its result must be the
task's record). Failures are injected, seeded:

- recoverable by rerouting: the primary model is down (a real OpenAI-compatible server
  on loopback answering 503) for the first half of the suite, then back; the ``service``
  tool flaps (fails with probability ``--flap``); both have declared alternatives (a
  fallback model, a ``backup`` tool);
- needing escalation: every ``--every``-th task needs the ``archive`` tool, which is down
  and has no alternative; only a planner that knows the ``manual`` tool (not declared
  as an alternative) can finish it.

Counterpoint heals with circuit breakers and rerouting (``Model`` fallbacks,
``tool(alternatives=...)``), asking no model, and escalates a call with no healthy path
to its registry's re-planner (:class:`counterpoint.health.ModelReplanner`: one LLM call
per escalation). The ReAct loop retries the primary model every task (it has no
breaker) and asks the controller after each failure. Both controllers are the same
simulated LLM on loopback, which always names the right next step: the comparison
counts control-plane LLM calls and successes, not the controller's judgement.

    python -m benchmarks.healing [--quick] [--tasks 40] [--seed 1] [--flap 0.3]

Target: >= 80% fewer control-plane calls than the ReAct loop at equal success.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from counterpoint.agents import Tool, tool
from counterpoint.errors import ModelError, ToolError
from counterpoint.health import BreakerOptions, HealthRegistry, ModelReplanner, use_health
from counterpoint.health.tools import call_healed
from counterpoint.models import Model
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.testing import ManualClock, OpenAIServer, RecordedRequest, Reply

TARGET = 0.8
"""Fewer control-plane calls than the baseline, as a share, at equal success."""
NO_BREAKERS = HealthRegistry(BreakerOptions(failures=10**9, window=10**9, min_calls=10**9),
                             cached_cost=None)
"""The ReAct side's registry: breakers that never open (``Model`` always has one)."""
REACT_STEPS = 4
"""Controller calls the ReAct loop may make for one failing step before it gives up."""


@dataclass
class Environment:
    """The simulated world one side runs in: what is down, and the seeded flapping."""

    rng: random.Random
    flap: float
    primary_down: bool = True
    failed_calls: int = 0
    """Calls that hit an injected failure (models and tools)."""

    def tools(self) -> dict[str, Tool]:
        @tool(cost=2.0)
        def backup(task: str) -> str:
            """The backup service."""
            return f"record {task}"

        @tool(alternatives=[backup])
        def service(task: str) -> str:
            """The service (it flaps: a simulation)."""
            if self.rng.random() < self.flap:
                self.failed_calls += 1
                raise ToolError("service unavailable (simulated flap)")
            return f"record {task}"

        @tool
        def archive(task: str) -> str:
            """The archive (down for the whole suite, with no alternative)."""
            self.failed_calls += 1
            raise ToolError("archive unreachable (simulated outage)")

        @tool
        def manual(task: str) -> str:
            """Looks the record up by hand (slow, but it works)."""
            return f"record {task}"

        return {t.name: t for t in (service, backup, archive, manual)}


def _answer(request: RecordedRequest) -> Reply:
    """The simulated task model: names the task it was asked about."""
    found = re.search(r"task (\d+)", str(request.body.get("messages", "")))
    return Reply.text(f"answer {found.group(1) if found else '?'}")


def _controller(request: RecordedRequest) -> Reply:
    """The simulated controller LLM: names the first option it is offered."""
    text = str(request.body.get("messages", ""))
    found = re.search(r"(?:instead|Options): ([A-Za-z_]+)", text)
    return Reply.text(found.group(1) if found else "NONE")


def _suite(tasks: int, every: int) -> list[str]:
    """Which tool each task needs."""
    return ["archive" if every and i % every == every - 1 else "service"
            for i in range(tasks)]


def _model(name: str, url: str) -> Model:
    return Model(OpenAIProvider(name, "m", base_url=url), retries=0, cache=False,
                 timeout=5.0)


async def _counterpoint(suite: Sequence[str], env: Environment, down: OpenAIServer,
                        spare: OpenAIServer, control: OpenAIServer) -> dict[str, Any]:
    tools = env.tools()
    model = Model(OpenAIProvider("primary", "m", base_url=down.base_url), retries=0,
                  cache=False, timeout=5.0,
                  fallbacks=[OpenAIProvider("fallback", "m", base_url=spare.base_url)])
    replanner = ModelReplanner(_model("controller", control.base_url))
    clock = ManualClock()
    registry = HealthRegistry(BreakerOptions(failures=2, open_for=5.0), clock=clock,
                              replanner=replanner, cached_cost=None)
    ok = 0
    with use_health(registry):
        for i, needed in enumerate(suite):
            env.primary_down = i < len(suite) // 2
            clock.advance(1.0)  # a task a second: open breakers are probed again
            try:
                text = (await model.generate(f"task {i}", max_tokens=8)).text
                record = await call_healed(tools[needed], {"task": str(i)}, key=None,
                                           ctx=None, options={"manual": tools["manual"]})
            except (ModelError, ToolError):
                continue
            ok += text == f"answer {i}" and record == f"record {i}"
    return {"success": ok, "control_calls": replanner.calls,
            "failed_calls": env.failed_calls}


async def _react(suite: Sequence[str], env: Environment, down: OpenAIServer,
                 spare: OpenAIServer, control: OpenAIServer) -> dict[str, Any]:
    tools = env.tools()
    models = {"primary": _model("primary", down.base_url),
              "fallback": _model("fallback", spare.base_url)}
    controller = _model("controller", control.base_url)
    calls = ok = 0

    async def ask(what: str, options: Sequence[str]) -> str:
        nonlocal calls
        calls += 1
        answer = await controller.generate(
            f"{what}\nOptions: {', '.join(options)}\nWhat next? Answer with one option.",
            max_tokens=8)
        return answer.text.strip()

    for i, needed in enumerate(suite):
        env.primary_down = i < len(suite) // 2
        text = record = None
        # (no breakers: the loop meets every failure, and each one is a question)
        name = "primary"
        for _ in range(REACT_STEPS):
            try:
                text = (await models[name].generate(f"task {i}", max_tokens=8)).text
                break
            except ModelError as exc:
                name = await ask(f"model {name} failed: {exc}",
                                 [m for m in models if m != name])
                if name not in models:
                    break
        step = needed
        for _ in range(REACT_STEPS):
            try:
                record = await tools[step].call({"task": str(i)})
                break
            except ToolError as exc:
                others = ["backup", "manual"] if step == "service" else ["manual"]
                step = await ask(f"tool {step} failed: {exc}", others)
                if step not in tools:
                    break
        ok += text == f"answer {i}" and record == f"record {i}"
    return {"success": ok, "control_calls": calls, "failed_calls": env.failed_calls}


def _primary(env: Environment) -> Reply:
    """The primary model's server: 503 while it is down, the task model after."""
    def respond(request: RecordedRequest) -> Reply:
        if env.primary_down:
            env.failed_calls += 1
            return Reply.status(503)
        return _answer(request)
    return Reply.dynamic(respond)


async def evaluate(tasks: int = 40, seed: int = 1, flap: float = 0.3,
                   every: int = 8) -> dict[str, Any]:
    """Both sides on the same suite and seeded failures; the dict :func:`main` prints."""
    suite = _suite(tasks, every)
    results: dict[str, Any] = {}
    for side, run in (("counterpoint", _counterpoint), ("react", _react)):
        env = Environment(random.Random(seed), flap)
        with OpenAIServer(default=_primary(env)) as down, \
                OpenAIServer(default=Reply.dynamic(_answer)) as spare, \
                OpenAIServer(default=Reply.dynamic(_controller)) as control, \
                use_health(NO_BREAKERS):  # counterpoint's side installs its own
            results[side] = await run(suite, env, down, spare, control)
            results[side]["control_server_calls"] = len(control.requests)
    healed, react = results["counterpoint"], results["react"]
    fewer = 1 - healed["control_calls"] / react["control_calls"] if react["control_calls"] \
        else 0.0
    passed = fewer >= TARGET and healed["success"] >= react["success"]
    return {"simulation": True, "tasks": tasks, "seed": seed, "flap": flap, "every": every,
            "escalation_tasks": suite.count("archive"), **results,
            "fewer_control_calls": fewer, "target": TARGET, "pass": passed}


def healing(tasks: int = 40, seed: int = 1, flap: float = 0.3,
            every: int = 8) -> dict[str, Any]:
    """:func:`evaluate`, from synchronous code (``benchmarks/adaptive.py``)."""
    return asyncio.run(evaluate(tasks, seed, flap, every))


def report(r: dict[str, Any]) -> None:
    print(f"H1 self-healing, SIMULATION (simulated models, tools and controller on "
          f"loopback): {r['tasks']} tasks, {r['escalation_tasks']} need escalation, "
          f"flap {r['flap']:g}, seed {r['seed']}; both sides run in this invocation")
    print(f"  {'':14}{'success':>10}{'failed calls':>14}{'control-plane LLM calls':>26}")
    for name in ("counterpoint", "react"):
        side = r[name]
        print(f"  {name:14}{side['success']:>6}/{r['tasks']:<3}{side['failed_calls']:>14}"
              f"{side['control_calls']:>26}")
    print(f"  fewer control-plane calls: {r['fewer_control_calls']:.0%} (target >= "
          f"{TARGET:.0%} at equal success): {'PASS' if r['pass'] else 'MISS'}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 tasks")
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--flap", type=float, default=0.3)
    parser.add_argument("--every", type=int, default=8,
                        help="every N-th task needs the tool with no alternative")
    args = parser.parse_args(argv)
    r = healing(16 if args.quick else args.tasks, args.seed, args.flap, args.every)
    report(r)
    return 0 if r["pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
