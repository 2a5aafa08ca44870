"""Which models a ``counterpoint run`` names, and checking them before it starts.

A goal run names its roles' models (``--model``, ``--planner-model``...); a workflow
file or a Python graph names the models of its agent nodes (a workflow's by the
``file:line`` of the ``model:`` that names it). :func:`check_run` checks them all with
:func:`counterpoint.models.preflight.preflight` and raises one error for every
problem found, so a missing key is one message before the run, not a failure per node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..graph import Graph
    from ..models import Model
    from ..models.preflight import ModelUse
    from ..planning import Team


def goal_uses(team: Team, options: dict[str, str | None]) -> list[ModelUse]:
    """The roles' models of a goal run; ``options`` maps a role to the option that set it."""
    from ..agents import Agent
    roles: list[tuple[str, str, Model]] = [
        ("planner", "planner", team.planner.model), ("verifier", "verifier", team.verifier.model),
        ("replanner", "planner", team.replanner.model),
        ("synthesizer", "synthesizer", team.synthesizer.model)]
    roles += [(f"worker {name!r}", "worker", w.model) for name, w in sorted(team.workers.items())
              if isinstance(w, Agent)]
    named: dict[tuple[str, str], list[str]] = {}  # (model, option) -> its roles
    routed: dict[tuple[str, str], Model] = {}
    for role, key, model in roles:
        if model.named:
            option = options.get(key) or "the default model"
            named.setdefault((model.name, option), []).append(role)
            if model.routed:
                routed[(model.name, option)] = model
    return [use for (name, option), who in named.items()
            for use in _uses(routed.get((name, option)), name,
                             f"role{'s' if len(who) > 1 else ''} {', '.join(who)} ({option})")]


def graph_uses(graph: Graph, option: str | None = None) -> list[ModelUse]:
    """The models of ``graph``'s agent nodes (and of nested graphs and goal steps), each
    named where it is chosen: a workflow step's ``model:`` line (the step's, its agent's
    or the workflow's, see :attr:`~counterpoint.workflow.steps.AgentStep.model_where`),
    else ``option`` (``--model NAME``, which chose every agent's model), else the node."""
    from ..agents import Agent
    from ..graph import Graph
    from ..planning import Team
    found: list[ModelUse] = []
    plain: set[int] = set()  # the ids of steps that use no model: many nodes share one
    for node, spec in graph.nodes.items():
        fn = spec.fn
        if id(fn) in plain:
            continue
        # a workflow's agent step holds its agent, and its file:line as its label
        agent = fn if isinstance(fn, Agent) else getattr(fn, "agent", None)
        if isinstance(fn, Graph):
            found += graph_uses(fn, option)
        elif isinstance(agent, Agent) and agent.model.named:
            label = getattr(getattr(fn, "info", None), "label", None)
            where = getattr(fn, "model_where", None) or option or \
                (str(label) if label else f"node {node!r} of graph {graph.name!r}")
            found += _uses(agent.model, agent.model.name, where)
        elif isinstance(team := getattr(fn, "team", None), Team):
            found += goal_uses(team, {})
        else:
            plain.add(id(fn))
    return found


def check_run(uses: list[ModelUse]) -> None:
    """Preflight ``uses``; raise one ``ConfigError`` naming every problem."""
    from .. import loop
    from ..models.preflight import preflight, raise_for
    if uses:
        raise_for(loop.run(preflight(uses)))


def _uses(model: Model | None, name: str, where: str) -> list[ModelUse]:
    """What a use of ``name`` checks: the model, or for ``auto`` every model it may route
    to (one :class:`ConfigError` saying where, when there are none)."""
    if model is None or not model.routed:
        return [_use_name(name, where)]
    from ..errors import ConfigError
    from ..routing import Route, candidates
    try:
        found = candidates(model.registry, (model.route or Route()).models)
    except ConfigError as exc:
        raise ConfigError(f"{exc} (model auto, named at {where})") from None
    return [_use_name(c.name, f"{where}, routed to by model auto") for c in found]


def _use_name(name: str, where: str) -> ModelUse:
    from ..models.preflight import ModelUse
    return ModelUse(name=name, where=where)
