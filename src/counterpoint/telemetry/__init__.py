"""OpenTelemetry traces and Python ``logging`` records of runs.

- :func:`instrument` (or ``COUNTERPOINT_OTEL=1``) traces every run that starts from
  then on and exports the spans over OTLP/HTTP (:mod:`.setup`); the spans and their
  GenAI attributes are described in :mod:`.spans`. Nothing from OpenTelemetry is
  imported until tracing is turned on (the ``otel`` extra installs it).
- Log records under ``counterpoint.run``, ``counterpoint.node``,
  ``counterpoint.model`` and ``counterpoint.tool`` for every run, once logging is
  configured (:mod:`.logs`).
"""

from __future__ import annotations

from .logs import LogRecords, log_records
from .setup import CONTENT_VARIABLE, Tracing, active, from_environment, instrument, uninstrument

__all__ = ["CONTENT_VARIABLE", "LogRecords", "Tracing", "active", "from_environment",
           "instrument", "log_records", "uninstrument"]
