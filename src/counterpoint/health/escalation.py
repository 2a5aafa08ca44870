"""Escalation: what happens to a failure that no healthy alternative can take.

Healing asks no model while a path exists. When none does, the failure is recorded as an
``escalated`` event and handed on: a model call's error is raised to its caller (the
node's retries, its fallback, a goal's re-plan), and a tool call's goes to the
registry's :class:`Replanner` if it has one, else back to the agent's model as the
tool's error. :class:`ModelReplanner` is a re-planner that asks a model which of the
remaining tools to use instead, or to give up: one control-plane call per escalation.

An escalated model error carries its :class:`Escalation` (:func:`mark`,
:func:`escalation_of`), so a caller up the stack can tell "no healthy path was left"
from an ordinary failure: a goal run's subtask node hands such a failure to the goal's
re-planner (:mod:`counterpoint.planning.escalating`), once per failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..context import NodeContext
    from ..models import Model


@dataclass(frozen=True, kw_only=True, slots=True)
class Escalation:
    """A failure without a healthy path."""

    kind: str
    """``model`` or ``tool``."""
    name: str
    """The model or tool that failed (the one first asked for)."""
    why: str
    tried: tuple[str, ...]
    """What was tried, in order, and failed."""
    unavailable: tuple[str, ...]
    """Alternatives left out because their breakers are open."""
    options: tuple[str, ...] = ()
    """Other tools the caller could use (for a tool call: the agent's other tools)."""
    arguments: str = ""
    """The call's arguments as JSON (for a tool call)."""


_MARK = "__counterpoint_escalation__"


def mark(exc: BaseException, problem: Escalation) -> None:
    """Attach ``problem`` to ``exc``: the error raised after an escalation."""
    setattr(exc, _MARK, problem)


def escalation_of(exc: BaseException) -> Escalation | None:
    """The escalation ``exc`` (or an error it was raised from) carries, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found = getattr(current, _MARK, None)
        if isinstance(found, Escalation):
            return found
        current = current.__cause__ or current.__context__
    return None


class Replanner(Protocol):
    """Who is asked when a failure has no healthy path. May block (it may call a model);
    safe to call concurrently if the model it calls is."""

    async def replan(self, problem: Escalation, ctx: NodeContext | None) -> str:
        """The name of a tool to call instead (one of ``problem.options``), or an empty
        string to give up (the failure then goes to the agent's model)."""
        ...


class ModelReplanner:
    """A :class:`Replanner` that asks a model, once per escalation, which tool to use."""

    def __init__(self, model: Model, *, max_tokens: int = 64) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.calls = 0
        """Control-plane calls it made."""

    async def replan(self, problem: Escalation, ctx: NodeContext | None) -> str:
        self.calls += 1
        options = ", ".join(problem.options) or "(none)"
        generation = await self.model.generate(
            f"The {problem.kind} {problem.name} failed and no healthy alternative is left "
            f"(tried: {', '.join(problem.tried)}; unavailable: "
            f"{', '.join(problem.unavailable) or 'none'}). Error: {problem.why}\n"
            f"Arguments: {problem.arguments}\nTools that could be used instead: {options}\n"
            "Answer with the name of one tool to call instead, or NONE to give up.",
            system="You re-plan around failed tools. Answer with one tool name or NONE.",
            max_tokens=self.max_tokens, ctx=ctx, cache=False, purpose="replan")
        answer = generation.text.strip().strip("`'\". ")
        return answer if answer in problem.options else ""
