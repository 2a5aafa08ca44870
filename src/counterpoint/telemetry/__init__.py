"""OpenTelemetry traces and Python ``logging`` records of runs.

- :func:`instrument` (or ``COUNTERPOINT_OTEL=1``) traces every run that starts from
  then on and exports the spans over OTLP/HTTP (:mod:`.setup`); the spans and their
  GenAI attributes are described in :mod:`.spans`. Nothing from OpenTelemetry is
  imported until tracing is turned on (the ``otel`` extra installs it).
- Log records under ``counterpoint.run``, ``counterpoint.node``,
  ``counterpoint.model`` and ``counterpoint.tool`` for every run, once logging is
  configured (:mod:`.logs`).

The names below are imported on first use (PEP 562): a process that only logs never
loads the tracing setup.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .logs import LogRecords, log_records
    from .setup import (
        CONTENT_VARIABLE,
        Tracing,
        active,
        from_environment,
        instrument,
        uninstrument,
    )

__all__ = ["CONTENT_VARIABLE", "LogRecords", "Tracing", "active", "from_environment",
           "instrument", "log_records", "uninstrument"]

_EXPORTS = {"LogRecords": "logs", "log_records": "logs", "CONTENT_VARIABLE": "setup",
            "Tracing": "setup", "active": "setup", "from_environment": "setup",
            "instrument": "setup", "uninstrument": "setup"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'counterpoint.telemetry' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # found once, then an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
