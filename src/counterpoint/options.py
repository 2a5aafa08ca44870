"""How a run is executed: concurrency, resource limits, failure mode, deadline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .budget import Budget
from .checks import seconds, whole
from .errors import UserError

if TYPE_CHECKING:
    from .backend import Backend
    from .graph import Graph


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOptions:
    """How a run is executed. All limits are per run unless noted."""

    max_concurrency: int | None = None
    """Most nodes running at once (``None``: unlimited)."""
    limits: Mapping[str, int] = field(default_factory=dict)
    """Named resource limits, e.g. ``{"openai": 4}``; nodes declare what they hold."""
    fail_fast: bool = False
    """Cancel everything once a node fails (default: independent branches keep going)."""
    deadline: float | None = None
    """Seconds after which what is left is cancelled and the partial result returned."""
    seed: int | None = None
    """Seed for retry jitter, for reproducible runs."""
    detach_when_waiting: bool = False
    """End the run's execution (its process may exit) once all that is left is waiting for
    approvals; answering one resumes it (``counterpoint approve``)."""
    cache: bool = True
    """Answer model calls from the run store's response cache (``False``: every call asks
    its model, and nothing is cached)."""
    backend: Backend | None = field(default=None, compare=False)
    """Where node callables run (``None``: in this process, :class:`InProcessBackend`), e.g.
    ``counterpoint.ray.RayBackend()``. Not recorded in the log: a resume names its own."""
    budget: Budget | None = None
    """Money and tokens the run's model calls may spend (sub-runs included): each call
    reserves its bound before it is sent and settles after (:mod:`counterpoint.budget`)."""

    def __post_init__(self) -> None:
        if self.max_concurrency is not None:
            whole(self.max_concurrency, "RunOptions: max_concurrency", least=1)
        if self.deadline is not None:
            seconds(self.deadline, "RunOptions: deadline")
        Budget.checked(self.budget, where="RunOptions")
        if not isinstance(self.limits, Mapping):
            raise UserError(f"RunOptions: limits must be a mapping of resource names to "
                            f"whole numbers, e.g. {{'openai': 4}}, got {self.limits!r}")
        for name, limit in self.limits.items():
            whole(limit, f"RunOptions: limit {name!r}", least=1)

    def as_data(self) -> dict[str, Any]:
        return {"max_concurrency": self.max_concurrency, "limits": dict(self.limits),
                "fail_fast": self.fail_fast, "deadline": self.deadline, "seed": self.seed,
                "cache": self.cache,
                **({"detach_when_waiting": True} if self.detach_when_waiting else {}),
                **({"budget": self.budget.as_data()} if self.budget is not None else {})}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RunOptions:
        return cls(max_concurrency=data.get("max_concurrency"),
                   limits=dict(data.get("limits") or {}), fail_fast=bool(data.get("fail_fast")),
                   deadline=data.get("deadline"), seed=data.get("seed"),
                   cache=bool(data.get("cache", True)),
                   detach_when_waiting=bool(data.get("detach_when_waiting")),
                   budget=Budget.from_data(data.get("budget")))


def resources_held(graph: Graph) -> tuple[frozenset[str], bool]:
    """The resource names the nodes of ``graph`` and of its sub-graphs hold (what a run's
    ``limits`` can bound: a run shares them with its sub-runs), and whether a step of the
    user's code among them takes a ``NodeContext``: such a step may add nodes that hold
    other names by a live edit. Counterpoint's own steps (a goal's planner, a workflow's
    loops) add only nodes that hold none."""
    from .graph import Graph
    held: set[str] = set()
    editable = False
    seen: set[int] = set()
    todo = [graph]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for spec in current.nodes.values():
            held.update(spec.policy.resources)
            if isinstance(spec.fn, Graph):
                todo.append(spec.fn)
            elif spec.context_param is not None and not str(
                    getattr(spec.fn, "__module__", "")).startswith("counterpoint."):
                editable = True
    return frozenset(held), editable
