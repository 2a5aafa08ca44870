"""The OTLP/HTTP test receiver: what it accepts, decodes and refuses."""

from __future__ import annotations

import gzip
import urllib.error
import urllib.request

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from counterpoint.testing.otlp import OTLPReceiver


def _body() -> bytes:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add()
    spans.resource.attributes.append(KeyValue(key="service.name",
                                              value=AnyValue(string_value="svc")))
    scope = spans.scope_spans.add()
    scope.scope.name = "lib"
    span = scope.spans.add()
    span.trace_id, span.span_id, span.name = bytes(range(16)), bytes(range(8)), "work"
    span.start_time_unix_nano, span.end_time_unix_nano = 10, 20
    span.attributes.append(KeyValue(key="n", value=AnyValue(int_value=3)))
    event = span.events.add()
    event.name, event.time_unix_nano = "retry", 15
    return request.SerializeToString()


def _post(receiver: OTLPReceiver, path: str, body: bytes, **headers: str) -> int:
    request = urllib.request.Request(receiver.endpoint + path, data=body, method="POST",
                                     headers={"content-type": "application/x-protobuf",
                                              **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_spans_are_decoded_plain_or_gzipped(receiver: OTLPReceiver) -> None:
    assert _post(receiver, "/v1/traces", _body()) == 200
    assert _post(receiver, "/v1/traces", gzip.compress(_body()),
                 **{"content-encoding": "gzip"}) == 200
    first, second = receiver.wait_for(lambda spans: len(spans) == 2)
    assert first == second and receiver.requests == 2
    assert (first.name, first.trace_id, first.span_id, first.parent_span_id) == \
        ("work", bytes(range(16)).hex(), bytes(range(8)).hex(), "")
    assert (first.start_ns, first.end_ns, first.attributes, first.scope) == \
        (10, 20, {"n": 3}, "lib")
    assert first.resource == {"service.name": "svc"}
    assert [(e.name, e.time_ns) for e in first.events] == [("retry", 15)]


def test_other_paths_and_undecodable_bodies_are_refused(receiver: OTLPReceiver) -> None:
    assert _post(receiver, "/v1/metrics", _body()) == 404
    assert _post(receiver, "/v1/traces", b"\xff\xff not protobuf") == 400
    assert receiver.spans == [] and receiver.requests == 0
    with pytest.raises(TimeoutError, match="0 span"):
        receiver.wait_for(lambda spans: bool(spans), timeout=0.2)
