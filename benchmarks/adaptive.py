"""The four issue-16 evaluations in one invocation (all SIMULATIONS), and one summary.

Runs, in order, each in this process and each against its own baselines:

- routing (``benchmarks/routing.py``): ``cheapest_that_passes`` against always the
  strongest and always the cheapest model;
- budgets (``benchmarks/budgets.py``): overspends and completion against a greedy
  baseline that checks after each call;
- healing (``benchmarks/healing.py``, H1): control-plane LLM calls and success against a
  ReAct-style loop;
- scheduling (``benchmarks/scheduling.py``, S1): FIFO against program-aware model-call
  order, at 200 and 1,000 workflows (``--quick``: 200).

A module that is not there (routing and budgets are written separately) is reported as
"not available" rather than failing the others; each module also runs alone
(``python -m benchmarks.<name>``). The exit code is 0 only if every evaluation that
ran passed.

    python -m benchmarks.adaptive [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    """One line of the summary."""

    name: str
    target: str
    measured: str
    verdict: str
    """``PASS``, ``MISS``, ``not available`` or ``error``."""


def _module(name: str) -> ModuleType | None:
    """``benchmarks.<name>``, or ``None`` if there is no such module (an import error
    inside a module that exists is raised: that is a bug to see, not an absence)."""
    full = f"benchmarks.{name}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as exc:
        if exc.name in (full, "benchmarks"):
            return None
        raise


def _by_exit_code(name: str, target: str, argv: list[str]) -> Row:
    """Run ``benchmarks.<name>.main(argv)`` (awaited if it is a coroutine function): its
    exit code is the verdict."""
    module = _module(name)
    if module is None or not hasattr(module, "main"):
        return Row(name=name, target=target, measured="-", verdict="not available")
    print(f"\n== {name} ==")
    try:
        code = module.main(argv)
        if inspect.isawaitable(code):  # budgets' main is a coroutine function
            code = asyncio.run(code)  # type: ignore[arg-type]
    except SystemExit as exc:  # an argparse refusal, say
        code = exc.code if isinstance(exc.code, int) else 1
    return Row(name=name, target=target, measured="see its output above",
               verdict="PASS" if code == 0 else "MISS")


def routing(quick: bool) -> Row:
    return _by_exit_code("routing", "cost <= 0.5 x always-strongest, success within 2 "
                         "points", ["--quick"] if quick else [])


def budgets(quick: bool) -> Row:
    return _by_exit_code("budgets", "0 overspends over 200 runs; completion vs greedy",
                         ["--quick"] if quick else [])


def healing(quick: bool) -> Row:
    from . import healing as h
    print("\n== healing ==")
    result = h.healing(16 if quick else 40)
    h.report(result)
    ours, theirs = result["counterpoint"], result["react"]
    return Row(name="healing", target=f">= {h.TARGET:.0%} fewer control-plane calls at "
               "equal success",
               measured=f"{ours['control_calls']} vs {theirs['control_calls']} calls "
                        f"({result['fewer_control_calls']:.0%} fewer), success "
                        f"{ours['success']}/{result['tasks']} vs "
                        f"{theirs['success']}/{result['tasks']}",
               verdict="PASS" if result["pass"] else "MISS")


def scheduling(quick: bool) -> Row:
    module = _module("scheduling")
    if module is None:
        return Row(name="scheduling", target="-", measured="-", verdict="not available")
    target = (f"mean <= {module.TARGET_MEAN} x FIFO, p95 <= {module.TARGET_P95} x FIFO")
    print("\n== scheduling ==")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "s.json"
        code = module.main(["--sizes", "200" if quick else "200,1000", "--json", str(out)])
        rows = json.loads(out.read_text())["s1"] if out.exists() else []
    measured = "; ".join(f"{r['workflows']}: mean {r['mean_ratio']:.2f}x, p95 "
                         f"{r['p95_ratio']:.2f}x" for r in rows) or "-"
    return Row(name="scheduling", target=target, measured=measured,
               verdict="PASS" if code == 0 and rows else "MISS")


EVALUATIONS: tuple[Callable[[bool], Row], ...] = (routing, budgets, healing, scheduling)


def _table(rows: Sequence[Row]) -> str:
    head = Row(name="evaluation", target="target", measured="measured", verdict="result")
    widths = [max(len(getattr(r, f)) for r in (head, *rows))
              for f in ("name", "target", "measured")]
    return "\n".join(f"  {r.name:<{widths[0]}}  {r.target:<{widths[1]}}  "
                     f"{r.measured:<{widths[2]}}  {r.verdict}" for r in (head, *rows))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (scheduling: 200 workflows only)")
    args = parser.parse_args(argv)
    print("issue-16 evaluations, all SIMULATIONS (simulated models on loopback), each "
          "against its baselines in this invocation")
    rows = []
    for evaluation in EVALUATIONS:
        try:
            rows.append(evaluation(args.quick))
        except Exception:  # one broken evaluation must not hide the others' results
            traceback.print_exc()
            rows.append(Row(name=evaluation.__name__, target="-", measured="raised",
                            verdict="error"))
    print("\nsummary (SIMULATIONS)")
    print(_table(rows))
    ran = [r for r in rows if r.verdict != "not available"]
    return 0 if ran and all(r.verdict == "PASS" for r in ran) else 1


if __name__ == "__main__":
    raise SystemExit(main())
