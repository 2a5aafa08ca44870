"""``counterpoint run "GOAL"``, ``counterpoint plan "GOAL"`` and workflow files.

``run`` takes a graph file or module, a workflow file (``.yaml``/``.yml``), or a
goal: any quoted sentence that is not a file. A goal is planned, run, verified
and re-planned live (see :mod:`counterpoint.planning`); its answer is printed
after the run's summary. ``plan`` prints the plan of a goal without running it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import RunFailure
from ..exits import FAILED

# The options below are all `counterpoint --help` needs from this module; planning,
# models and agents are imported by the functions that use them (see cli/app.py).
if TYPE_CHECKING:
    from ..graph import Graph
    from ..planning import Team

ModelOption = Annotated[str | None, typer.Option(
    "--model", metavar="MODEL",
    help="Model for every role (default: the configured default, else local:smollm2).")]
PlannerModel = Annotated[str | None, typer.Option(
    "--planner-model", metavar="MODEL", help="Model of the planner and re-planner.")]
WorkerModel = Annotated[str | None, typer.Option(
    "--worker-model", metavar="MODEL", help="Model of the subtask workers.")]
VerifierModel = Annotated[str | None, typer.Option(
    "--verifier-model", metavar="MODEL", help="Model of the verifier.")]
SynthesizerModel = Annotated[str | None, typer.Option(
    "--synthesizer-model", metavar="MODEL", help="Model of the synthesizer.")]
Samples = Annotated[int, typer.Option(
    "--samples", metavar="N", min=1,
    help="Parallel samples of each model turn of a goal's workers, the majority answer "
         "kept (fewer when the budget or deadline left covers fewer).")]
Rounds = Annotated[int, typer.Option(
    "--rounds", metavar="N", min=0, help="Verify / re-plan rounds (0: no verification).")]
BudgetTokens = Annotated[int | None, typer.Option(
    "--budget-tokens", metavar="N", min=1,
    help="The run's token budget: a model call that would exceed it is refused before it "
         "is sent (a goal also stops re-planning before it).")]
BudgetUsd = Annotated[float | None, typer.Option(
    "--budget-usd", metavar="USD", min=0.0,
    help="The run's money budget in US dollars: a model call that could overspend it is "
         "refused before it is sent; models need prices (a goal also stops re-planning "
         "before it).")]
Check = Annotated[list[str] | None, typer.Option(
    "--check", metavar="ID",
    help="Verify this subtask's result as soon as it exists and redo it once if it has "
         "gaps (repeatable; '*' for every subtask).")]
TopologyArg = Annotated[str, typer.Option(
    "--topology", metavar="SHAPE",
    help="How a goal's plan runs: auto (chosen from its dependencies), single (one "
         "worker does the whole goal), parallel (fan-out, then synthesis), sequential "
         "(a chain) or hierarchical (one node per independent sub-goal).")]
MaxSubtasks = Annotated[int, typer.Option(
    "--max-subtasks", metavar="N", min=1, help="Most subtasks in a plan.")]
RoleTokens = Annotated[list[str] | None, typer.Option(
    "--role-tokens", metavar="ROLE=N",
    help="max_tokens of one call of a goal role: planner, worker, verifier, replanner or "
         "synthesizer (repeatable; overrides [goal.tokens] in counterpoint.toml).")]


GOAL_ONLY = {"rounds": "--rounds", "samples": "--samples", "topology": "--topology",
             "max_subtasks": "--max-subtasks", "check": "--check",
             "role_tokens": "--role-tokens", "planner_model": "--planner-model",
             "worker_model": "--worker-model", "verifier_model": "--verifier-model",
             "synthesizer_model": "--synthesizer-model"}
"""``run``'s options that only a goal has a meaning for (parameter: flag)."""


def refuse_goal_options(given: list[str], kind: str, target: str) -> None:
    """A usage error if ``given`` (the parameters typed on the command line) holds an
    option ``target`` has no use for: a goal-only option on a workflow file or a Python
    graph, or ``--model`` on a Python graph. Ignoring it would let the user believe it
    took effect."""
    from ..errors import UserError
    if kind == "goal":
        return
    flags = [GOAL_ONLY[name] for name in given if name in GOAL_ONLY]
    what = "a workflow file" if kind == "workflow" else "a Python graph"
    if flags:
        instead = ("write `samples: N` on an agent or an agent step, `model:` on an agent "
                   "of the file" if kind == "workflow" else
                   "set them in the graph's code (Agent(..., samples=N), Model(...))")
        raise UserError(f"{', '.join(flags)} {'applies' if len(flags) == 1 else 'apply'} "
                        f"to goal runs only (counterpoint run \"GOAL\"), and {target} is "
                        f"{what}; leave {'it' if len(flags) == 1 else 'them'} out, or "
                        f"{instead}")
    if kind == "graph" and "model" in given:
        raise UserError(f"--model applies to goals and workflow files, and {target} is a "
                        "Python graph, whose models are chosen in its code; leave it out, "
                        "or name the model there (Model(\"NAME\"), Agent(model=...))")


def role_tokens(values: list[str]) -> dict[str, int]:
    """The goal roles' token limits: ``[goal.tokens]`` of counterpoint.toml, then
    ``--role-tokens ROLE=N`` options over it; a bad one is a usage error."""
    from ..models import load_registry
    from ..models.config import GOAL_ROLES
    tokens = dict(load_registry().goal_tokens)
    for value in values:
        role, sep, number = value.partition("=")
        role = role.strip()
        if not sep or role not in GOAL_ROLES:
            raise typer.BadParameter(f"{value!r}: expected ROLE=N with ROLE one of "
                                     f"{', '.join(GOAL_ROLES)}, e.g. --role-tokens "
                                     "verifier=1024", param_hint="'--role-tokens'")
        try:
            tokens[role] = int(number)
        except ValueError:
            tokens[role] = 0
        if tokens[role] < 1:
            raise typer.BadParameter(f"{value!r}: N must be a whole number of tokens >= 1",
                                     param_hint="'--role-tokens'")
    return tokens


def target_kind(target: str) -> str:
    """``workflow``, ``graph`` or ``goal`` for a ``run`` target."""
    path = Path(target.split(":", 1)[0]) if not target.endswith((".yaml", ".yml")) \
        else Path(target)
    if target.endswith((".yaml", ".yml")):
        return "workflow"
    if path.suffix == ".py" or _exists(path):
        return "graph"
    # a sentence in Chinese or Japanese has no spaces; an ASCII word without any
    # (".hidden", "flows.daily") is a module, and a missing one is reported as such
    if any(c.isspace() for c in target.strip()) or (
            not target.isascii() and not _module_name(target)):
        return "goal"
    return "graph"  # a module name


def _exists(path: Path) -> bool:
    """Whether ``path`` exists; a goal longer than a file name can be (``File name too
    long``) is not a file."""
    try:
        return path.exists()
    except OSError:
        return False


def _module_name(target: str) -> bool:
    """Whether ``target`` (no file of that name exists) reads as ``package.module[:GRAPH]``.

    Python names may be written in any script, and a sentence in Chinese or Japanese
    has no spaces, so a name outside ASCII counts as a module only if it can be found:
    ``用三句话介绍东京的交通`` is a goal, ``my_flows.daily`` stays a module (a missing
    one is reported as such)."""
    module, _, attr = target.partition(":")
    if not all(part.isidentifier() for part in module.split(".")) or \
            (attr and not attr.isidentifier()):
        return False
    if module.isascii():
        return True
    import importlib.util
    top = module.split(".")[0]
    if _exists(Path(f"{top}.py")) or _exists(Path(top)):
        return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def team(model: str | None, planner: str | None, worker: str | None,
         verifier: str | None, synthesizer: str | None,
         tokens: dict[str, int] | None = None, samples: int = 1) -> Team:
    from ..models import Model
    from ..planning import Team

    def pick(name: str | None) -> Model | None:
        return Model(name) if name else None
    return Team.default(pick(model), planner=pick(planner), worker=pick(worker),
                        verifier=pick(verifier), synthesizer=pick(synthesizer), tokens=tokens,
                        worker_samples=samples)


def role_options(model: str | None, planner: str | None, worker: str | None,
                 verifier: str | None, synthesizer: str | None) -> dict[str, str | None]:
    """Which option chose each role's model, for preflight messages (``None``: the
    configured default)."""
    shown = {role: f"--{role}-model {name}" if name else (f"--model {model}" if model else None)
             for role, name in (("planner", planner), ("worker", worker),
                                ("verifier", verifier), ("synthesizer", synthesizer))}
    return shown


def goal_run_graph(goal: str, the_team: Team, *, rounds: int, budget_tokens: int | None,
                   budget_usd: float | None, deadline: float | None,
                   max_subtasks: int, check: list[str] | None = None,
                   topology: str = "auto") -> Graph:
    """The graph of ``counterpoint run "GOAL"``.

    Its run's log records how to build it again (the goal, each role's model name and
    the limits, see :func:`rebuild_goal_graph`), so ``counterpoint resume RUN_ID``
    continues the run in a new process.
    """
    from ..loader import built_by
    from ..planning import Limits, goal_graph
    limits = Limits(max_rounds=rounds, max_tokens=budget_tokens, max_cost=budget_usd,
                    deadline=deadline, max_subtasks=max_subtasks, check=tuple(check or ()),
                    topology=topology)  # type: ignore[arg-type]  # Limits checks it
    graph = goal_graph(goal, the_team, limits)
    models = role_models(the_team)
    if models is None:
        return graph
    writer = the_team.workers.get("writer")
    samples = getattr(writer, "samples", 1)
    return built_by(graph, rebuild_goal_graph, goal=goal, models=models, rounds=rounds,
                    budget_tokens=budget_tokens, budget_usd=budget_usd, deadline=deadline,
                    max_subtasks=max_subtasks, check=list(check or ()),
                    tokens=dict(the_team.tokens), topology=topology,
                    **({"samples": samples} if samples != 1 else {}))


def rebuild_goal_graph(goal: str, models: dict[str, str], tokens: dict[str, int] | None = None,
                       samples: int = 1, **limits: Any) -> Graph:
    """:func:`goal_run_graph` again, from what a goal run's log recorded: the same goal,
    roles on the same models (by name, so a configured name must still be configured),
    the same token limits, worker samples and limits."""
    from ..models import Model
    from ..planning import Team
    roles = Team.default(planner=Model(models["planner"]), worker=Model(models["worker"]),
                         verifier=Model(models["verifier"]),
                         synthesizer=Model(models["synthesizer"]), tokens=tokens,
                         worker_samples=samples)
    return goal_run_graph(goal, roles, **limits)


GOAL_BUILDER = f"{__name__}:{rebuild_goal_graph.__name__}"
"""How the source record of a goal run names its builder (see :func:`goal_run_graph`)."""


def role_models(the_team: Team) -> dict[str, str] | None:
    """The model name of each role of a team :func:`team` built (``None`` for another
    team, whose roles cannot be rebuilt from names)."""
    from ..agents import Agent
    writer = the_team.workers.get("writer")
    if len(the_team.workers) != 1 or not isinstance(writer, Agent):
        return None
    return {"planner": the_team.planner.model.name, "worker": writer.model.name,
            "verifier": the_team.verifier.model.name,
            "synthesizer": the_team.synthesizer.model.name}


def workflow_graph(target: str, raw_inputs: list[str],
                   model: str | None) -> tuple[Graph, dict[str, Any]]:
    """The graph of a workflow file and its inputs, converted to their declared types."""
    from ..workflow import load_workflow
    workflow = load_workflow(target, models={"*": model} if model else None)
    values: dict[str, str] = {}
    for item in raw_inputs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"{item!r}: expected KEY=VALUE, e.g. --input folder=docs",
                                     param_hint="'--input'")
        values[key.strip()] = value
    return workflow.graph, workflow.bind_inputs(values)


def print_answer(output: Any, out: Any) -> None:
    """A goal run's answer (the ``answer`` node's text), after its summary."""
    from rich.text import Text
    node = output.get("answer") if isinstance(output, dict) else None
    text = node.get("answer") if isinstance(node, dict) else None
    if not isinstance(text, str):
        return
    out.print()
    out.print(Text("answer", style="bold"))
    out.print(text, soft_wrap=True, markup=False)
    cited = node.get("cited") if isinstance(node, dict) else None
    if cited:
        out.print(Text(f"cites {', '.join(cited)}", style="dim"))


def plan_command(
    goal: Annotated[str, typer.Argument(help="What to achieve, as a sentence.")],
    model: ModelOption = None,
    planner_model: PlannerModel = None,
    max_subtasks: MaxSubtasks = 6,
    tokens: RoleTokens = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """Plan GOAL and print the plan (subtasks, workers, dependencies) without running it."""
    from rich.text import Text

    from .. import loop
    from ..planning import Limits, make_plan
    from .console import make_console, reported
    from .render import plan_tree
    from .spinner import Working
    out = make_console()
    with reported():
        the_team = team(model, planner_model, None, None, None, role_tokens(tokens or []))
        working = Working("planning")
        try:
            with working:
                plan, repairs = loop.run(make_plan(
                    goal, the_team, Limits(max_subtasks=max_subtasks),
                    stream=working.stream if working.shown else None))
        except RunFailure as exc:  # the planner or its model gave up
            make_console(stderr=True).print(Text(f"error: {exc}", style="red"),
                                            soft_wrap=True)
            raise typer.Exit(FAILED) from None
    data = plan.model_dump(mode="json")
    if as_json:
        typer.echo(json.dumps({**data, "repairs": repairs}, indent=2))
        return
    out.print(Text(f"plan for: {goal}", style="bold"), soft_wrap=True)
    if not plan.decompose:
        out.print(Text("(not decomposed: one worker does it)", style="dim"))
    for line in plan_tree(data):
        out.print(line, soft_wrap=True, markup=False)
    if repairs:
        out.print(Text("repaired: " + "; ".join(repairs), style="yellow"), soft_wrap=True)


