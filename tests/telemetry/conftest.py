"""Tracing fixtures: a real OTLP/HTTP receiver on 127.0.0.1 and tracing pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from counterpoint import telemetry
from counterpoint.testing.otlp import OTLPReceiver


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as the_receiver:
        yield the_receiver


@pytest.fixture
def tracing(receiver: OTLPReceiver) -> Iterator[telemetry.Tracing]:
    """Tracing on, exporting with the real OTLP/HTTP exporter to ``receiver``."""
    with telemetry.instrument(endpoint=receiver.endpoint, content=False) as on:
        yield on
