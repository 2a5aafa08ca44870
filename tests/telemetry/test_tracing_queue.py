"""A large run's spans all reach the collector: the spans wait in the exporter's queue
while the collector is slow (held, here), as a run of thousands of nodes ends them faster
than one exporter thread sends them, and the run does not wait for it."""

from __future__ import annotations

import pytest

import counterpoint as cp
from counterpoint import telemetry
from counterpoint.testing.otlp import OTLPReceiver

NODES = 5_000
"""More than twice the OpenTelemetry SDK's default queue (2,048 spans)."""


async def _one(i: int) -> int:
    return i


async def test_every_span_of_a_large_run_waits_for_a_slow_collector(
        receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "120")  # held, not failed
    monkeypatch.delenv("OTEL_BSP_MAX_QUEUE_SIZE", raising=False)
    g = cp.Graph("wide")
    for i in range(NODES):
        g.add(f"n{i}", _one, i=i)
    receiver.hold()
    with telemetry.instrument(endpoint=receiver.endpoint) as tracing:
        result = await cp.run(g, store="memory")  # returns while no export is answered
        assert result.ok
        receiver.release()
        assert tracing.force_flush(120_000)  # answered: the receiver has what was sent
    spans = receiver.spans
    assert sorted(s.name for s in spans) == sorted(
        ["run wide", *(f"node n{i}" for i in range(NODES))])
