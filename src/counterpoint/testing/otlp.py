"""A test receiver for OpenTelemetry traces: OTLP over HTTP on loopback.

:class:`OTLPReceiver` is a deliberate test double for a collector: a real HTTP server on
127.0.0.1 (a thread of its own, so it serves whatever event loop the code under test
runs) that accepts ``POST /v1/traces`` with an ``ExportTraceServiceRequest`` in
protobuf (optionally gzip-compressed), decodes it with ``opentelemetry-proto`` and keeps
every span as a :class:`ReceivedSpan`. Any other path is a 404, a body that does not
decode a 400. Point a real OTLP/HTTP exporter at :attr:`OTLPReceiver.endpoint` and
assert on what arrived; :meth:`OTLPReceiver.wait_for` waits, with a deadline, for spans
to come in. :meth:`OTLPReceiver.hold` makes it a stalled collector: requests wait
unanswered until :meth:`OTLPReceiver.release`. It needs the ``otel`` extra.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["OTLPReceiver", "ReceivedEvent", "ReceivedSpan"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReceivedEvent:
    """A span event as it arrived."""

    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReceivedSpan:
    """A span as it arrived (ids in hex; ``parent_span_id`` is ``""`` for a root)."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    """The OTLP ``SpanKind`` number (1 internal, 3 client, ...)."""
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: tuple[ReceivedEvent, ...] = ()
    status_code: int = 0
    """0 unset, 1 ok, 2 error."""
    status_message: str = ""
    scope: str = ""
    """The instrumentation scope (the tracer's name)."""
    resource: dict[str, Any] = field(default_factory=dict)


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, which)


def _attributes(pairs: Sequence[KeyValue]) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ``ExportTraceServiceRequest`` (raises ``DecodeError``)."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(ReceivedSpan(
                    trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(), name=span.name, kind=span.kind,
                    start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano,
                    attributes=_attributes(span.attributes),
                    events=tuple(ReceivedEvent(name=e.name, time_ns=e.time_unix_nano,
                                               attributes=_attributes(e.attributes))
                                 for e in span.events),
                    status_code=span.status.code, status_message=span.status.message,
                    scope=scope_spans.scope.name, resource=resource))
    return spans


class OTLPReceiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1 (see the module docstring).

    Use it as a context manager, or call :meth:`start` and :meth:`stop`. Its spans are
    safe to read from any thread while requests come in.
    """

    def __init__(self, port: int = 0) -> None:
        self._port = port
        self._spans: list[ReceivedSpan] = []
        self._bodies = 0
        self._changed = threading.Condition()
        self._open = threading.Event()
        self._open.set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        """The base URL to give an exporter (``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
        if self._server is None:
            raise RuntimeError("the OTLP receiver is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, in arrival order."""
        with self._changed:
            return list(self._spans)

    @property
    def requests(self) -> int:
        """Export requests received and decoded so far."""
        with self._changed:
            return self._bodies

    def hold(self) -> None:
        """Leave every export request unanswered from now on, as a stalled collector does
        (the exporter waits for its timeout), until :meth:`release`."""
        self._open.clear()

    def release(self) -> None:
        """Answer the requests held since :meth:`hold`, and the next ones at once."""
        self._open.set()

    def clear(self) -> None:
        with self._changed:
            self._spans.clear()

    def wait_for(self, done: Callable[[list[ReceivedSpan]], bool], *,
                 timeout: float = 10.0) -> list[ReceivedSpan]:
        """Wait until ``done(spans)`` holds; returns the spans. Raises ``TimeoutError``
        with what did arrive if it does not hold within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not done(list(self._spans)):
                left = deadline - time.monotonic()
                if left <= 0:
                    names = sorted(s.name for s in self._spans)
                    raise TimeoutError(f"OTLP receiver: condition not met within {timeout}s; "
                                       f"{len(names)} span(s) arrived: {names}")
                self._changed.wait(left)
            return list(self._spans)

    def _received(self, spans: list[ReceivedSpan]) -> None:
        with self._changed:
            self._spans.extend(spans)
            self._bodies += 1
            self._changed.notify_all()

    def start(self) -> OTLPReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                receiver._open.wait()
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                if self.path.split("?", 1)[0] != "/v1/traces":
                    self._reply(404, b"not found")
                    return
                try:
                    if self.headers.get("content-encoding") == "gzip":
                        body = gzip.decompress(body)
                    spans = decode(body)
                except (DecodeError, OSError, EOFError) as exc:
                    self._reply(400, f"not an ExportTraceServiceRequest: {exc}".encode())
                    return
                receiver._received(spans)
                self._reply(200, ExportTraceServiceResponse().SerializeToString(),
                            "application/x-protobuf")

            def _reply(self, status: int, body: bytes, kind: str = "text/plain") -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # a test server stays quiet

        server = self._server = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        server.daemon_threads = True
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,),
                                        name="otlp-receiver",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._open.set()  # a held request would keep its thread, and shutdown, waiting
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> OTLPReceiver:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def __iter__(self) -> Iterator[ReceivedSpan]:
        return iter(self.spans)
