"""Per-node execution policy: retries with backoff, timeout, fallback, resources."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .budget import Budget
from .checks import number, seconds, whole
from .errors import UserError

PROGRAMMING_ERRORS: tuple[type[BaseException], ...] = (
    TypeError, AttributeError, NameError, ImportError, SyntaxError, AssertionError,
    NotImplementedError)
"""Bugs in code, not bad luck: another attempt fails the same way, so none is made by
default (``NameError`` includes ``UnboundLocalError``, ``ImportError``
``ModuleNotFoundError``, ``SyntaxError`` ``IndentationError``)."""


class _RetriedByDefaultType(type):
    def __instancecheck__(cls, instance: object) -> bool:
        return cls.__subclasscheck__(type(instance))

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, Exception) and not issubclass(subclass, PROGRAMMING_ERRORS)


class RetriedByDefault(metaclass=_RetriedByDefaultType):
    """Matches (in ``isinstance``) every ``Exception`` except :data:`PROGRAMMING_ERRORS`.

    A virtual class, never instantiated, so that ``Policy.retry_on`` stays a plain tuple
    of types that the runtime checks with ``isinstance``.
    """


NO_TIMEOUT = "leave timeout unset for no limit"
"""What a timeout message says to write instead of infinity, 0 or a negative."""


def check_resources(resources: object, name: str) -> None:
    """Refuse ``resources`` unless it maps non-empty names to whole units >= 1 (``name``
    is how messages call the option: ``Policy.resources``, ``resources``)."""
    if not isinstance(resources, Mapping):
        given = [resources] if isinstance(resources, str) else list(resources) \
            if isinstance(resources, list | tuple | set | frozenset) else []
        names = [r for r in given if isinstance(r, str) and r] or ["gpu"]
        example = "{" + ", ".join(f"{r!r}: 1" for r in names) + "}"
        raise UserError(f"{name} takes a mapping of resource names to the units the node "
                        f"holds, got {type(resources).__name__} {resources!r}; write "
                        f"resources={example}")
    for key, units in resources.items():
        if not isinstance(key, str) or not key.strip():
            raise UserError(f"{name} names each resource by a non-empty string, got "
                            f"{key!r} ({type(key).__name__}); write e.g. "
                            f"resources={{'gpu': {units!r}}}")
        whole(units, f"{name}[{key!r}]", least=1,
              fix="a node holds at least 1 unit of each resource it names; leave the "
                  "name out to hold none")


@dataclass(frozen=True, kw_only=True, slots=True)
class Backoff:
    """Exponential backoff with jitter between attempts of a node."""

    initial: float = 0.1
    """Delay in seconds before the second attempt."""
    factor: float = 2.0
    """Multiplier applied for every further attempt."""
    maximum: float = 30.0
    """Upper bound of a single delay in seconds."""
    jitter: float = 0.5
    """Fraction of the delay drawn at random (0 = none, 1 = full jitter)."""

    def __post_init__(self) -> None:
        number(self.initial, "Backoff.initial",
               fix="give the first delay in seconds (0 retries at once)")
        # a factor below 1 (shrinking delays) is odd but harmless, and logs may hold one
        number(self.factor, "Backoff.factor", above=True,
               fix="each delay is the one before times factor; factor=1 keeps it constant")
        number(self.maximum, "Backoff.maximum",
               fix="give the longest single delay in seconds")
        number(self.jitter, "Backoff.jitter", most=1.0,
               fix="it is the fraction of each delay drawn at random: 0 for none, 1 for "
                   "full jitter")

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Delay before attempt ``attempt + 1`` (``attempt`` counts from 1)."""
        try:
            grown = self.initial * self.factor ** max(0, attempt - 1)
        except OverflowError:  # float ** int past ~1e308: the cap applies long before
            grown = math.inf
        base = min(self.maximum, grown)
        return base * (1.0 - self.jitter * rng.random())


@dataclass(frozen=True, kw_only=True, slots=True)
class Policy:
    """How one node is executed. Attach with ``Graph.add(..., policy=...)`` or ``@step``."""

    retries: int = 0
    """Additional attempts after the first one fails with a retryable error."""
    timeout: float | None = None
    """Seconds one attempt may take; exceeding it is a retryable ``NodeTimeout``."""
    backoff: Backoff = field(default_factory=Backoff)
    """Delay schedule between attempts."""
    retry_on: tuple[type, ...] = (RetriedByDefault,)
    """Exception types that are retried (unless they carry ``retryable = False``). The
    default is every ``Exception`` but a programming error (:data:`PROGRAMMING_ERRORS`:
    ``TypeError``, ``AttributeError``, ``NameError``...); ``(Exception,)`` retries those
    too."""
    fallback: Callable[..., Any] | None = None
    """Called with the node's inputs after the last attempt failed; its result is the output."""
    resources: Mapping[str, int] = field(default_factory=dict)
    """Named resources this node holds while it runs, e.g. ``{"openai": 1}``."""
    isolation: str = "thread"
    """Where an attempt runs: ``thread`` (async steps on the run's loop, sync steps in a
    worker thread; a cancelled sync step's thread runs on until it checks
    ``ctx.cancelled``) or ``process`` (a child process, killed on cancel or timeout; see
    :mod:`counterpoint.isolation`)."""
    budget: Budget | None = None
    """Money and tokens this node's model calls may spend, over all its attempts (its
    sub-run's and agents' included), within what is left of the run's budget."""

    def __post_init__(self) -> None:
        whole(self.retries, "Policy.retries", least=0)
        if self.timeout is not None:
            seconds(self.timeout, "Policy.timeout", fix=NO_TIMEOUT)
        if not isinstance(self.backoff, Backoff):
            raise UserError(f"Policy.backoff takes a cp.Backoff, got "
                            f"{type(self.backoff).__name__} {self.backoff!r}; write "
                            "backoff=cp.Backoff(initial=0.5, factor=2.0)")
        check_resources(self.resources, "Policy.resources")
        Budget.checked(self.budget, where="Policy")
        if self.isolation not in ("thread", "process"):
            raise UserError(f"Policy.isolation must be 'thread' or 'process', got "
                            f"{self.isolation!r}")

    @property
    def attempts(self) -> int:
        """Total number of attempts allowed."""
        return self.retries + 1


DEFAULT_POLICY = Policy()
