"""How a run is executed: concurrency, resource limits, failure mode, deadline."""

from __future__ import annotations

import difflib
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .budget import Budget
from .checks import flag, seconds, whole
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
            whole(self.max_concurrency, "RunOptions: max_concurrency", least=1,
                  fix="leave max_concurrency unset (None) for no limit")
        if self.deadline is not None:
            seconds(self.deadline, "RunOptions: deadline",
                    fix="leave deadline unset (None) for no deadline")
        if self.seed is not None and (isinstance(self.seed, bool) or
                                      not isinstance(self.seed, int)):
            raise UserError(f"RunOptions: seed must be a whole number (an int), got "
                            f"{self.seed!r} ({type(self.seed).__name__}); e.g. seed=42")
        for name in ("fail_fast", "detach_when_waiting", "cache"):
            flag(getattr(self, name), f"RunOptions: {name}")
        Budget.checked(self.budget, where="RunOptions")
        if self.backend is not None and not callable(getattr(self.backend, "call", None)):
            raise UserError(f"RunOptions: backend must be a counterpoint Backend (an object "
                            f"with an async call method, e.g. counterpoint.ray.RayBackend()), "
                            f"got {self.backend!r}; leave it out to run steps in this process")
        if not isinstance(self.limits, Mapping):
            raise UserError(f"RunOptions: limits must be a mapping of resource names to "
                            f"whole numbers, e.g. {{'openai': 4}}, got {self.limits!r}")
        for name, limit in self.limits.items():
            if not isinstance(name, str) or not name:
                raise UserError(f"RunOptions: limits: a resource name must be a non-empty "
                                f"string, as in resources={{'openai': 1}}, got {name!r}")
            whole(limit, f"RunOptions: limit {name!r}", least=1,
                  fix="leave the name out of limits for no limit on it")

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


@dataclass(frozen=True, slots=True)
class UnheldLimits:
    """A run's limits on resources that no node of its graph (sub-graphs included) holds:
    misspellings, or limits that bound nothing, found by :func:`unheld_limits`."""

    names: tuple[str, ...]
    """The limits' resource names that no node holds, in the order the limits give."""
    held: frozenset[str]
    """The resource names the graph's nodes do hold."""
    editable: bool
    """Whether a step of the user's code takes a ``NodeContext``: it may add nodes holding
    those names by a live edit, so the limits are kept (a warning) rather than refused."""

    def close(self, name: str) -> str | None:
        """The held resource name that ``name`` may be a misspelling of, if one is close."""
        found = difflib.get_close_matches(name, sorted(self.held), n=1)
        return found[0] if found else None

    def holds(self) -> str:
        """What the nodes hold, for messages: ``its nodes hold 'gpu', 'openai'``."""
        if not self.held:
            return "its nodes hold no resources"
        return f"its nodes hold {', '.join(repr(n) for n in sorted(self.held))}"


_WARNED: weakref.WeakKeyDictionary[Graph, set[str]] = weakref.WeakKeyDictionary()


def first_warning(graph: Graph, name: str) -> bool:
    """Whether a warning about a limit on ``name`` that no node of ``graph`` holds is yet
    to be given (and, from now on, that it was): each is given once per graph, so that
    ``run --limit``, which words its own, and the run it starts do not both give it."""
    warned = _WARNED.setdefault(graph, set())
    if name in warned:
        return False
    warned.add(name)
    return True


def unheld_limits(limits: Mapping[str, int], graph: Graph) -> UnheldLimits | None:
    """The limits in ``limits`` that no node of ``graph`` or of its sub-graphs holds, or
    ``None`` when every limit bounds some node. A run's limits bound its sub-runs' nodes
    too (they share one capacity, :mod:`counterpoint.scheduler.capacity`), so a name held
    only in a sub-graph is a limit of the run. The one judgement behind both
    ``RunOptions(limits=...)`` and ``run --limit`` (:mod:`counterpoint.cli.limits`)."""
    if not limits:
        return None
    held, editable = resources_held(graph)
    names = tuple(name for name in limits if name not in held)
    return UnheldLimits(names, held, editable) if names else None
