"""Who plans, works, verifies, re-plans and synthesizes, and the limits they work under.

Every role is an ordinary :class:`~counterpoint.agents.Agent` with a default prompt;
replace any of them, or give each its own model (a small one for the workers, a
strong one for planning).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel

from ..agents import Agent, Tool
from ..errors import UserError
from ..models import Model, Provider
from ..models.config import GOAL_ROLES
from .bounds import fitted_tokens
from .topology import TOPOLOGIES, TopologyOption

PLANNER = (
    "You plan work for a small team. First decide whether the goal needs several steps at "
    "all: if one worker can do it at once, answer with exactly one subtask, the whole goal. "
    "Otherwise give a few small subtasks, ids t1, t2, ... in order. Each subtask names one "
    "worker from the list, says what to do, lists in needs only the ids of earlier subtasks "
    "whose results it uses (often none or one), and says what its result should contain. "
    "Independent subtasks should not need each other, so they can run in parallel.")
WORKER = ("You do one subtask of a larger goal. Use the context you are given. Answer "
          "briefly and concretely.")
VERIFIER = ("You check whether the results achieve the goal and what each subtask was "
            "expected to produce. If something is missing or wrong, list each gap and the "
            "subtask at fault. Set complete to true only if there are no gaps.")
REPLANNER = ("You close the gaps found in a plan's results: add new subtasks (new ids), "
             "redo a weak subtask with a better task, or cancel a subtask that does not serve "
             "the goal (it and the subtasks that need it are left out of the answer). Keep "
             "the change small.")
SYNTHESIZER = ("You write the final answer to the goal from the subtask results. After each "
               "part, cite the subtask it came from in brackets, like [t1].")


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """Stop conditions and sizes of a planned run."""

    max_rounds: int = 2
    """Verify rounds (each may re-plan); 0 turns verification off. A mid-run re-plan
    (see ``check``) uses one of them."""
    max_tokens: int | None = None
    """Stop re-planning once the run has used this many tokens."""
    max_cost: float | None = None
    """Stop re-planning once the run has cost this many US dollars."""
    deadline: float | None = None
    """Seconds for the whole run; re-planning stops when most (70%) of it is gone, as it
    does for the run's own ``RunOptions.deadline``. This one cancels nothing: pass
    ``RunOptions(deadline=...)`` to have the runtime stop what is left."""
    max_subtasks: int = 6
    plan_attempts: int = 3
    """Times the planner may answer before its plan is repaired or rejected."""
    reask_temperature: float = 0.7
    """Sampling temperature of the planner's re-asks (the first ask is at 0): the same
    conversation at temperature 0 would get the same answer again."""
    context_chars: int = 4000
    """Budget for dependency results in one subtask's prompt (cut visibly beyond it)."""
    worker_turns: int = 3
    check: tuple[str, ...] = ()
    """Subtask ids whose result the verifier checks as soon as it exists, before their
    dependents start (``("*",)`` for every subtask); a result with gaps is redone once
    with the gaps as feedback. If rounds are left, the redone result is checked again,
    and if it still has gaps the re-planner is asked at once, while the plan runs."""

    topology: TopologyOption = "auto"
    """How the plan is executed: ``auto`` (chosen from the plan's dependency structure,
    see :mod:`.topology`), or forced: ``single`` (one worker does the whole goal),
    ``parallel`` (fan-out and synthesis), ``sequential`` (a chain, in plan order) or
    ``hierarchical`` (one sub-goal per independent group of subtasks)."""

    def __post_init__(self) -> None:
        if self.topology not in TOPOLOGIES:
            raise UserError(f"topology {self.topology!r} (--topology, or Limits(topology=)) "
                            f"is not one of {', '.join(TOPOLOGIES)}")
        if self.max_rounds < 0 or self.max_subtasks < 1 or self.plan_attempts < 1:
            raise UserError("Limits: max_rounds >= 0, max_subtasks >= 1 and "
                            "plan_attempts >= 1 are required")
        if self.reask_temperature < 0:
            raise UserError("Limits: reask_temperature must be >= 0")


@dataclass(kw_only=True)
class Team:
    """The roles of a planned run. Build one with :meth:`default`."""

    planner: Agent
    verifier: Agent
    replanner: Agent
    synthesizer: Agent
    workers: dict[str, Agent | Tool] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    """``max_tokens`` of one call per role (``planner``, ``verifier``, ``replanner``,
    ``synthesizer``; a worker's is its agent's ``turn_tokens``); a role not named gets
    :meth:`call_tokens`' default."""

    def __post_init__(self) -> None:
        for role, value in self.tokens.items():
            if role not in GOAL_ROLES:
                raise UserError(f"Team: unknown role {role!r} in tokens; roles: "
                                f"{', '.join(GOAL_ROLES)}")
            if value < 1:
                raise UserError(f"Team: tokens[{role!r}] must be >= 1, got {value}")

    def call_tokens(self, role: str, answer: type[BaseModel] | None = None) -> int:
        """``max_tokens`` of one call of ``role``: the one set in :attr:`tokens`, else
        the role's ``turn_tokens``, and for a structured ``answer`` at least twice that
        and enough for the longest answer its bounded schema allows (see :mod:`.bounds`),
        so a constrained decoder ends the JSON before the limit cuts it."""
        if role in self.tokens:
            return self.tokens[role]
        agent: Agent = getattr(self, role)
        if answer is None:
            return agent.turn_tokens
        return max(agent.turn_tokens * 2, fitted_tokens(answer.model_json_schema()) or 0)

    @classmethod
    def default(cls, model: str | Model | Provider | None = None, *,
                planner: str | Model | Provider | None = None,
                worker: str | Model | Provider | None = None,
                verifier: str | Model | Provider | None = None,
                synthesizer: str | Model | Provider | None = None,
                workers: Mapping[str, Agent | Tool] | None = None,
                worker_turns: int = 3, tokens: Mapping[str, int] | None = None,
                worker_samples: int = 1) -> Team:
        """Default prompts; ``model`` for every role unless a role's own model is given.

        Without ``workers`` the team has one general worker agent, ``writer``, whose
        ``turn_tokens`` is ``tokens["worker"]`` if given and which samples each model
        turn ``worker_samples`` times (the majority kept). ``tokens`` sets a role's
        ``max_tokens`` per call (see :attr:`tokens`).
        """
        chosen = dict(tokens or {})
        from ..agents.agent import DEFAULT_TURN_TOKENS
        def pick(own: str | Model | Provider | None) -> Model:
            chosen = own if own is not None else model
            return chosen if isinstance(chosen, Model) else Model(chosen)

        crew = dict(workers or {"writer": Agent(
            "writer", model=pick(worker), instructions=WORKER, max_turns=worker_turns,
            description="writes, explains, summarises and answers questions",
            turn_tokens=chosen.get("worker", DEFAULT_TURN_TOKENS), samples=worker_samples)})
        verify = pick(verifier)
        return cls(planner=Agent("planner", model=pick(planner), instructions=PLANNER),
                   verifier=Agent("verifier", model=verify, instructions=VERIFIER),
                   replanner=Agent("replanner", model=pick(planner), instructions=REPLANNER),
                   synthesizer=Agent("synthesizer", model=pick(synthesizer),
                                     instructions=SYNTHESIZER),
                   workers=crew, tokens=chosen)

    def skill_tags(self) -> tuple[str, ...] | None:
        """The skill tags the planner may give subtasks: those the models of the routed
        workers (``model="auto"``) are offered for; empty: any (bounded) tag; ``None``:
        no worker is routed, so the plan has no tags."""
        from ..routing import offered_tags  # the router loads the configuration
        routed = [w.model for w in self.workers.values()
                  if isinstance(w, Agent) and w.model.routed]
        if not routed:
            return None
        return tuple(sorted({tag for model in routed for tag in offered_tags(model)}))

    def describe_workers(self) -> str:
        lines = []
        for name, worker in sorted(self.workers.items()):
            lines.append(f"- {name}: {worker.description}")
        return "\n".join(lines)
