"""Run observers: what sees every event of every run this process executes.

An *observer factory* is called once when a run starts executing here (a new run, a
resumed one, a sub-run) with that run's :class:`ObservedRun`, and returns a
subscriber for its events (``put_nowait(event)`` for each event as it is logged, then
``put_nowait(None)`` when the run ends), or ``None`` to leave the run alone. Tracing
and log records (:mod:`counterpoint.telemetry`) are built this way, so the scheduler
never imports them.

A subscriber is called synchronously on the run's event loop, in the order of the
events' numbers, and must not block or raise. With no factory installed the cost is
one check per run, none per event.

Python ``logging`` records (:func:`counterpoint.telemetry.log_records`) are a factory
installed by default, when the first run starts; it observes a run only when logging is
configured to show ``counterpoint`` records.

``COUNTERPOINT_OTEL`` is honoured here too: when a run starts and the variable's value
differs from the one seen last, :func:`counterpoint.telemetry.from_environment` is
called to turn tracing on or off (imported by name, so the core does not depend on
the telemetry layer, and only when the variable is set).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .events import Event
    from .ids import RunId
    from .state import RunState
    from .store import RunStore

__all__ = ["ENVIRONMENT_VARIABLE", "ObservedRun", "ObserverFactory", "RunObserver",
           "add_observer", "observers_for", "remove_observer"]

ENVIRONMENT_VARIABLE = "COUNTERPOINT_OTEL"


class ObservedRun(Protocol):
    """What a factory may read of the run it is asked about."""

    run_id: RunId
    parent: RunId | None
    """The run this one is a sub-run of (a graph node's sub-graph), if any."""
    store: RunStore
    state: RunState


class RunObserver(Protocol):
    """Receives a run's events as they are logged, then ``None`` when it ends."""

    def put_nowait(self, item: Event | None, /) -> None: ...


ObserverFactory = Callable[[ObservedRun], RunObserver | None]

_DEFAULTS = ("counterpoint.telemetry.logs", "log_records")
"""The factory every process starts with, imported by name when the first run starts."""
_factories: tuple[ObserverFactory, ...] = ()
_defaults_loaded = False
_environment: str | None = None
"""The value of ``COUNTERPOINT_OTEL`` last acted on."""


def add_observer(factory: ObserverFactory) -> None:
    """Call ``factory`` for every run that starts from now on (idempotent)."""
    global _factories
    _load_defaults()
    if factory not in _factories:
        _factories = (*_factories, factory)


def remove_observer(factory: ObserverFactory) -> None:
    """Stop calling ``factory`` for new runs (runs already observed keep their observer);
    the default log records too, if asked."""
    global _factories
    _load_defaults()
    _factories = tuple(f for f in _factories if f != factory)


def _load_defaults() -> None:
    global _defaults_loaded, _factories
    if not _defaults_loaded:
        _defaults_loaded = True
        default = getattr(importlib.import_module(_DEFAULTS[0]), _DEFAULTS[1])
        _factories = (default, *_factories)


def observers_for(run: ObservedRun) -> tuple[RunObserver, ...]:
    """The observers of ``run``, which is about to execute its first event."""
    global _environment
    if not _defaults_loaded:
        _load_defaults()
    value = os.environ.get(ENVIRONMENT_VARIABLE)
    if value != _environment:  # acted on once it worked: a failure is reported every run
        importlib.import_module("counterpoint.telemetry").from_environment()
        _environment = value
    if not _factories:
        return ()
    found = []
    for factory in _factories:
        observer = factory(run)
        if observer is not None:
            found.append(observer)
    return tuple(found)
