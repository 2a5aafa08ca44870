"""A circuit breaker: the health of one model or tool, as closed, open or half-open.

A :class:`Breaker` counts the outcomes of calls to one target. It opens after
``failures`` consecutive failures, when the share of failures among the last ``window``
calls reaches ``error_rate`` (once ``min_calls`` of them are known), or when the share of
calls slower than ``slow_call`` seconds reaches ``slow_rate``. An open breaker refuses
calls for ``open_for`` seconds, then lets ``probes`` calls through (half-open): if they
succeed it closes again, if one fails it opens for another ``open_for``.

Time comes from an injected clock (anything with ``now()``, such as
:class:`counterpoint.testing.ManualClock`), so a test moves time instead of sleeping.
Every method is safe to call from several threads; each returns the state change it
caused (a :class:`Transition`), which the registry records in the run's log.
"""

from __future__ import annotations

import enum
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..checks import number, seconds, whole
from ..errors import UserError


class Now(Protocol):
    """The clock a breaker reads: seconds, any origin (only differences matter)."""

    def now(self) -> float: ...


class MonotonicClock:
    """The real clock breakers use unless given another: ``time.monotonic``."""

    def now(self) -> float:
        return time.monotonic()


class BreakerState(enum.StrEnum):
    """Where a breaker stands."""

    CLOSED = "closed"
    """Healthy: calls go through."""
    OPEN = "open"
    """Failing: calls are refused (and rerouted) until ``open_for`` has passed."""
    HALF_OPEN = "half_open"
    """On probation: ``probes`` calls may go through to test it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BreakerOptions:
    """When a breaker opens and how it recovers."""

    failures: int = 3
    """Consecutive failures that open it."""
    error_rate: float = 0.5
    """Share of failed calls among the last ``window`` that opens it."""
    window: int = 20
    """Calls the error and slow rates are measured over."""
    min_calls: int = 10
    """Calls the window must hold before the rates count."""
    slow_call: float | None = None
    """Seconds past which a successful call counts as slow (``None``: latency is ignored)."""
    slow_rate: float = 0.5
    """Share of slow calls among the last ``window`` that opens it."""
    open_for: float = 30.0
    """Seconds an open breaker refuses calls before it lets probes through."""
    probes: int = 1
    """Calls let through at once when half-open; all must succeed to close it."""

    def __post_init__(self) -> None:
        # each problem starts with its key: health.settings finds the key's line by it
        found = [_problem(whole, self.failures, "failures", least=1),
                 _problem(number, self.error_rate, "error_rate", above=True, most=1),
                 _problem(number, self.slow_rate, "slow_rate", above=True, most=1),
                 _problem(whole, self.window, "window", least=1),
                 _problem(whole, self.min_calls, "min_calls", least=1),
                 _problem(number, self.open_for, "open_for"),
                 _problem(whole, self.probes, "probes", least=1)]
        if self.slow_call is not None:
            found.append(_problem(seconds, self.slow_call, "slow_call"))
        problems = [problem for problem in found if problem is not None]
        if not problems and self.min_calls > self.window:
            problems.append(f"need window >= 1 and 1 <= min_calls <= window, got window="
                            f"{self.window}, min_calls={self.min_calls}")
        if problems:
            raise UserError("BreakerOptions: " + "; ".join(problems))


def _problem(check: Callable[..., None], *args: Any, **options: Any) -> str | None:
    """What ``check(*args, **options)`` refuses, or ``None``."""
    try:
        check(*args, **options)
    except UserError as exc:
        return str(exc)
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class Transition:
    """A breaker's change of state, and why."""

    target: str
    """What the breaker guards (``model:NAME`` or ``tool:NAME``)."""
    before: BreakerState
    after: BreakerState
    why: str
    at: float
    """The breaker's clock when it happened."""


class Breaker:
    """The circuit breaker of one target (see the module docstring)."""

    def __init__(self, target: str, options: BreakerOptions, clock: Now) -> None:
        self.target = target
        self.options = options
        self.clock = clock
        self._state = BreakerState.CLOSED
        self._streak = 0
        self._outcomes: deque[tuple[bool, bool]] = deque(maxlen=options.window)
        """(failed, slow) of the last calls."""
        self._opened_at = 0.0
        self._probing = 0
        self._probed = 0
        self._lock = threading.Lock()

    @property
    def state(self) -> BreakerState:
        """The state as last changed (an open breaker past ``open_for`` still says open
        until a call is let through: :meth:`available` tells whether one would be)."""
        return self._state

    def retry_in(self) -> float:
        """Seconds until an open breaker lets a probe through (0 if it would now)."""
        if self._state is not BreakerState.OPEN:
            return 0.0
        return max(0.0, self._opened_at + self.options.open_for - self.clock.now())

    def available(self) -> bool:
        """Whether a call would be let through now; changes nothing."""
        with self._lock:
            if self._state is BreakerState.CLOSED:
                return True
            if self._state is BreakerState.OPEN:
                return self.clock.now() >= self._opened_at + self.options.open_for
            return self._probing < self.options.probes

    def acquire(self) -> tuple[bool, Transition | None]:
        """Let a call through if the state allows it (moving an open breaker whose time
        is up to half-open); the call must end in :meth:`succeeded` or :meth:`failed`."""
        with self._lock:
            change = None
            if self._state is BreakerState.OPEN:
                if self.clock.now() < self._opened_at + self.options.open_for:
                    return False, None
                change = self._move(BreakerState.HALF_OPEN,
                                    f"{self.options.open_for:g}s open: probing")
                self._probing = self._probed = 0
            if self._state is BreakerState.HALF_OPEN:
                if self._probing >= self.options.probes:
                    return False, change
                self._probing += 1
            return True, change

    def succeeded(self, latency: float = 0.0) -> Transition | None:
        """A call let through answered, after ``latency`` seconds."""
        slow = self.options.slow_call is not None and latency > self.options.slow_call
        with self._lock:
            self._streak = 0
            if self._state is BreakerState.HALF_OPEN:
                self._probing = max(0, self._probing - 1)
                self._probed += 1
                if self._probed >= self.options.probes:
                    self._outcomes.clear()
                    return self._move(BreakerState.CLOSED, "probe succeeded")
                return None
            self._outcomes.append((False, slow))
            return self._check()

    def failed(self, why: str) -> Transition | None:
        """A call let through failed (``why`` says how, for the log)."""
        with self._lock:
            if self._state is BreakerState.HALF_OPEN:
                self._probing = max(0, self._probing - 1)
                return self._open(f"probe failed: {why}")
            if self._state is BreakerState.OPEN:
                return None  # a call let through before it opened ended later
            self._streak += 1
            self._outcomes.append((True, False))
            if self._streak >= self.options.failures:
                return self._open(f"{self._streak} consecutive failures, last: {why}")
            return self._check(why)

    def _check(self, why: str = "") -> Transition | None:
        calls = len(self._outcomes)
        if calls < self.options.min_calls:
            return None
        failed = sum(1 for f, _ in self._outcomes if f)
        if failed / calls >= self.options.error_rate:
            last = f", last: {why}" if why else ""
            return self._open(f"{failed} of the last {calls} calls failed{last}")
        slow = sum(1 for _, s in self._outcomes if s)
        if self.options.slow_call is not None and slow / calls >= self.options.slow_rate:
            return self._open(f"{slow} of the last {calls} calls took longer than "
                              f"{self.options.slow_call:g}s")
        return None

    def _open(self, why: str) -> Transition:
        self._opened_at = self.clock.now()
        self._streak = 0
        self._outcomes.clear()
        return self._move(BreakerState.OPEN, why)

    def _move(self, after: BreakerState, why: str) -> Transition:
        before, self._state = self._state, after
        return Transition(target=self.target, before=before, after=after, why=why,
                          at=self.clock.now())
