"""Turning tracing on and off: the OpenTelemetry SDK configured from options or the
environment, and the observer factory that gives each run its spans.

Tracing is off by default and then nothing from OpenTelemetry is imported. It is on
after :func:`instrument` (or with ``COUNTERPOINT_OTEL=1`` in the environment), and
exports OTLP over HTTP to any collector: the endpoint, headers and timeouts come from
the standard ``OTEL_EXPORTER_OTLP_*`` variables unless given, the resource from
``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` (service name ``counterpoint`` by
default). Prompts, answers, tool arguments and results are recorded only when content
capture is asked for (``content=True`` or ``COUNTERPOINT_OTEL_CONTENT=1``).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING

from ..errors import UserError
from ..observers import ENVIRONMENT_VARIABLE, ObservedRun, add_observer, remove_observer

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import TracerProvider as AnyTracerProvider

    from .spans import OpenSpans, RunSpans

__all__ = ["CONTENT_VARIABLE", "Tracing", "active", "from_environment", "instrument",
           "uninstrument"]

CONTENT_VARIABLE = "COUNTERPOINT_OTEL_CONTENT"
_OFF = frozenset({"", "0", "false", "no", "off"})
_ON = frozenset({"1", "true", "yes", "on"})
_PROTOCOL = "http/protobuf"
_TRACES = "/v1/traces"
"""The OTLP/HTTP path of spans, below the collector's base URL."""
"""The only OTLP protocol the exporter counterpoint builds speaks."""
_log = logging.getLogger("counterpoint.telemetry")
_warned: set[tuple[str, str]] = set()
_INSTALL = "pip install 'counterpoint[otel]'"

QUEUE_SPANS = 32_768
"""Spans the provider :func:`instrument` builds holds for its exporter (unless
``OTEL_BSP_MAX_QUEUE_SIZE`` says otherwise), beyond which the oldest are dropped. The
SDK's default, 2,048, lost most of a 10,000-node run's spans to a healthy collector: a
run ends spans faster than one exporter thread sends them. About 2.8 KB a span, so
some 90 MB when full (a collector down during a run of 30,000 nodes)."""

_lock = threading.Lock()
_active: Tracing | None = None
_from_environment = False
"""Whether the active tracing was turned on by ``COUNTERPOINT_OTEL``."""


def _flag(name: str) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value not in _OFF | _ON:
        _warn_once(name, value, f"{name}={value!r} is not one of {', '.join(sorted(_ON))} "
                                f"or {', '.join(sorted(_OFF - {''}))}; taken as on")
    return value not in _OFF


def _warn_once(name: str, value: str, message: str) -> None:
    # the flags are read as every run starts: one warning per value is enough
    if (name, value) not in _warned:
        _warned.add((name, value))
        _log.warning(message)


def _check_exporter_environment(endpoint: str | None) -> None:
    """Warn about OTLP variables the HTTP/protobuf exporter would ignore, or fail on only
    at its first export (after the run); a bad ``endpoint=`` argument is a UserError."""
    if endpoint is not None and not _is_http_url(endpoint):
        raise UserError(f"instrument(): endpoint {endpoint!r} is not an http:// or https:// "
                        "URL; give the collector's OTLP/HTTP base, e.g. "
                        "http://127.0.0.1:4318")
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = os.environ.get(name, "").strip()
        if value and value != _PROTOCOL:
            _warn_once(name, value, f"{name}={value!r} is not used: counterpoint sends OTLP "
                                    f"over HTTP/protobuf only ({_PROTOCOL}); point "
                                    "OTEL_EXPORTER_OTLP_ENDPOINT at the collector's OTLP/HTTP "
                                    "port (usually 4318)")
            break
    if endpoint is not None:
        return
    # the exporter follows the traces variable, else the base one (adding /v1/traces)
    found = next((n for n in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
                  if os.environ.get(n, "").strip()), None)
    if found is None:
        return
    value = os.environ[found].strip()
    if not _is_http_url(value):
        _warn_once(found, value, f"{found}={value!r} is not an http:// or https:// URL, so no "
                                 "span will reach a collector; e.g. http://127.0.0.1:4318")
    elif found == "OTEL_EXPORTER_OTLP_ENDPOINT" and (base := _traces_base(value)) is not None:
        _warn_once(found, value, f"{found}={value!r} is the collector's base URL, to which "
                                 f"{_TRACES} is added: spans would go to "
                                 f"{value.rstrip('/')}{_TRACES}; set it to {base} or "
                                 "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT to the whole URL")


def _traces_base(url: str) -> str | None:
    """``url`` without its ending ``/v1/traces`` (``None``: it does not end so)."""
    bare = url.strip().rstrip("/")
    return bare[:-len(_TRACES)] if bare.endswith(_TRACES) else None


def _is_http_url(text: str) -> bool:
    from urllib.parse import urlsplit
    parts = urlsplit(text.strip())
    return parts.scheme in ("http", "https") and bool(parts.netloc) and " " not in text.strip()


class Tracing:
    """Tracing turned on in this process: every run that starts from now on is traced.

    Safe to use from any thread. :meth:`shutdown` stops tracing new runs, exports what
    is pending and, for a provider :func:`instrument` built, shuts it down.
    """

    def __init__(self, provider: AnyTracerProvider, *, content: bool, owns: bool) -> None:
        from .spans import OpenSpans
        self.provider = provider
        """The tracer provider the spans come from."""
        self.content = content
        """Whether prompts, answers and tool arguments and results are recorded."""
        self._owns = owns
        self._tracer = provider.get_tracer("counterpoint")
        self._open: OpenSpans = OpenSpans()

    def observe(self, run: ObservedRun) -> RunSpans:
        """The spans of ``run`` (the observer factory of :mod:`counterpoint.observers`)."""
        from .spans import RunSpans
        return RunSpans(self._tracer, run, self._open, self._parent(run),
                        content=self.content)

    def _parent(self, run: ObservedRun) -> Context | None:
        """Where a run starting now belongs: under the node attempt running its sub-graph,
        under the agent tool call that started it, under the node it was started from;
        else under the caller's current span (``None``: OpenTelemetry's current context)."""
        from opentelemetry import trace

        from ..agents.agent import current_tool_call
        from ..context import current_context
        key = current_tool_call()
        span = self._open.tools.get(key) if key is not None else None
        if span is None:
            ctx = current_context()
            if ctx is not None and ctx.run_id != run.run_id:
                span = self._open.attempts.get((str(ctx.run_id), str(ctx.node), ctx.attempt))
        return trace.set_span_in_context(span) if span is not None else None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export every span ended so far; ``False`` if that did not finish in time."""
        flush = getattr(self.provider, "force_flush", None)
        return bool(flush(timeout_millis)) if flush is not None else True

    def shutdown(self) -> None:
        """Stop tracing new runs; flush (and shut down a provider built here)."""
        global _active, _from_environment
        with _lock:
            remove_observer(self.observe)
            if _active is self:
                _active, _from_environment = None, False
        if self._owns:
            self.provider.shutdown()  # type: ignore[attr-defined]
        else:
            self.force_flush()

    def __enter__(self) -> Tracing:
        return self

    def __exit__(self, *_: object) -> None:
        self.shutdown()


def instrument(*, endpoint: str | None = None, content: bool | None = None,
               tracer_provider: AnyTracerProvider | None = None,
               exporter: SpanExporter | None = None,
               service_name: str | None = None) -> Tracing:
    """Trace every run that starts from now on; returns the :class:`Tracing` to stop it.

    ``endpoint`` is the OTLP/HTTP base URL (``http://collector:4318``; spans go to its
    ``/v1/traces``) or that traces URL itself, default ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
    ``localhost:4318``.
    ``exporter`` replaces the OTLP exporter (any OpenTelemetry ``SpanExporter``), and
    ``tracer_provider`` replaces the provider altogether (yours, e.g. the global one:
    then ``endpoint``, ``exporter`` and ``service_name`` do not apply). ``content``
    (default ``COUNTERPOINT_OTEL_CONTENT``) records prompts, answers and tool
    arguments and results. Tracing already on is shut down first.
    """
    global _active, _from_environment
    if tracer_provider is not None and (endpoint or exporter or service_name):
        raise UserError("instrument(): tracer_provider brings its own exporters and "
                        "resource; pass either it or endpoint/exporter/service_name")
    owns = tracer_provider is None
    provider = tracer_provider or _provider(endpoint, exporter, service_name)
    tracing = Tracing(provider, content=_flag(CONTENT_VARIABLE) if content is None
                      else content, owns=owns)
    with _lock:
        previous, _active, _from_environment = _active, tracing, False
        add_observer(tracing.observe)
    if previous is not None:
        previous.shutdown()
    return tracing


def _provider(endpoint: str | None, exporter: SpanExporter | None,
              service_name: str | None) -> TracerProvider:
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise UserError(f"tracing needs the OpenTelemetry SDK ({exc.name} is missing); "
                        f"{_INSTALL}") from None
    if exporter is None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,
            )
        except ImportError as exc:
            raise UserError(f"tracing needs the OTLP/HTTP exporter ({exc.name} is "
                            f"missing); {_INSTALL}") from None
        _check_exporter_environment(endpoint)
        # a base URL, or the traces URL itself as a collector's documentation gives it
        url = None if endpoint is None else \
            (_traces_base(endpoint) or endpoint.strip().rstrip("/")) + _TRACES
        exporter = OTLPSpanExporter(endpoint=url)
    attributes = {}
    if service_name is not None or not (os.environ.get("OTEL_SERVICE_NAME") or "service.name"
                                        in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")):
        attributes[SERVICE_NAME] = service_name or "counterpoint"
    from .trace_ids import RunTraceIds
    provider = TracerProvider(resource=Resource.create(attributes), id_generator=RunTraceIds())
    queue = None if os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE") else QUEUE_SPANS
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=queue))
    return provider


def uninstrument() -> None:
    """Stop tracing new runs (what was traced is exported first)."""
    tracing = active()
    if tracing is not None:
        tracing.shutdown()


def active() -> Tracing | None:
    """The tracing on in this process, if any."""
    return _active


def from_environment() -> Tracing | None:
    """Turn tracing on or off as ``COUNTERPOINT_OTEL`` says (called when a run starts
    and the variable changed: :mod:`counterpoint.observers`).

    Off it only turns off tracing that the variable turned on, never tracing that
    :func:`instrument` was asked for.
    """
    global _from_environment
    if _flag(ENVIRONMENT_VARIABLE):
        if _active is None:
            tracing = instrument()
            _from_environment = True
            return tracing
        return _active
    if _from_environment and _active is not None:
        _active.shutdown()
    return _active
