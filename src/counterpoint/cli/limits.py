"""``run --limit NAME=N``: reading the flags, and refusing a limit no node would ever feel.

A run's limits bound its nodes *and* its sub-runs' (they share one capacity, see
:mod:`counterpoint.scheduler.capacity`), so the names a graph holds are gathered over its
sub-graphs too. A name none of them holds is a misspelling, an error, unless a step of
the graph's own code takes a ``NodeContext``: that step may add nodes holding it by a
live edit (``ctx.apply``) once the run is going, so then the limit is kept and a warning
says it limits nothing yet. Counterpoint's own steps (a goal's planner, a workflow's
loops) add only nodes that hold no resources.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from ..errors import UserError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..graph import Graph

FORM = "NAME=N, e.g. --limit openai=4"


def parse_limits(values: list[str]) -> dict[str, int]:
    """``NAME=N`` options as a dict; a malformed one, or N below 1, is a usage error
    naming the flag as written."""
    limits: dict[str, int] = {}
    for value in values:
        name, sep, number = value.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"{value!r}: expected {FORM}", param_hint="'--limit'")
        name = name.strip()
        try:
            units = int(number)
        except ValueError:
            raise typer.BadParameter(f"{value!r}: N must be a whole number, e.g. "
                                     f"--limit {name}=4", param_hint="'--limit'") from None
        if units < 1:
            raise typer.BadParameter(
                f"{value!r}: N must be a whole number >= 1, got {units} (a node holding "
                f"{name!r} could never start); e.g. --limit {name}=1, or leave the flag "
                "out for no limit", param_hint="'--limit'")
        limits[name] = units
    return limits


def check_limits(limits: Mapping[str, int], graph: Graph, *, kind: str,
                 target: str) -> list[str]:
    """Refuse a limit whose resource no node of ``graph`` (sub-graphs included) holds,
    naming the flag, the resource, the ones its nodes do hold and what to do; ``kind``
    and ``target`` are ``run``'s (a goal, a workflow or a graph). Returns the warnings
    to print instead, when a step of the graph may add such nodes by a live edit."""
    from ..options import first_warning, unheld_limits
    unheld = unheld_limits(limits, graph)  # the judgement RunOptions(limits=...) gets too
    if unheld is None:
        return []
    what = {"goal": "the goal run", "workflow": f"workflow {target}"}.get(
        kind, f"graph {graph.name!r} ({target})")
    problems = []
    for name in unheld.names:
        close = unheld.close(name)
        mean = f" (did you mean --limit {close}={limits[name]}?)" if close else ""
        if unheld.editable:
            fix = f"it stays in force for nodes that a live edit adds later{mean}"
        elif kind == "graph":
            fix = (f"fix the name{mean}, declare the resource on the nodes it should bound "
                   f"(resources={{{name!r}: 1}}), or leave the flag out")
        else:  # a goal's or a workflow's steps cannot declare resources
            fix = ("a workflow file cannot declare resources on its steps" if kind ==
                   "workflow" else "a goal run's steps hold none") + \
                "; leave the flag out (to run fewer steps at once, use --max-concurrency N)"
        problems.append(f"--limit {name}={limits[name]}: no node of {what} holds a resource "
                        f"{name!r}{f' ({unheld.holds()})' if kind == 'graph' else ''}, so "
                        f"the limit would limit nothing; {fix}")
    if unheld.editable:  # given here in the flag's words, so not again by the run
        return [p for p, name in zip(problems, unheld.names, strict=True)
                if first_warning(graph, name)]
    raise UserError(problems[0] if len(problems) == 1 else "\n  ".join(
        ["several --limit flags name resources no node holds:", *problems]))
