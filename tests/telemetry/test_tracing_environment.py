"""Tracing turned on by ``COUNTERPOINT_OTEL=1`` and the standard OTLP variables: in this
process, and for the command line (a real ``counterpoint run`` in a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint import telemetry
from counterpoint.testing.otlp import OTLPReceiver

SRC = Path(__file__).resolve().parents[2] / "src"
GRAPH = '''
import counterpoint as cp

async def hello() -> str:
    return "hello"

async def world(greeting: str) -> str:
    return greeting + " world"

graph = cp.Graph("greeting")
graph.add("world", world, greeting=graph.add("hello", hello))
'''


async def test_the_variable_turns_tracing_on_and_off_as_runs_start(
        receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("COUNTERPOINT_OTEL", "1")
    g = cp.Graph("from_env")

    async def one() -> int:
        return 1

    g.add("one", one)
    await cp.run(g, store="memory")
    tracing = telemetry.active()
    assert tracing is not None and not tracing.content
    tracing.force_flush()
    spans = receiver.wait_for(lambda spans: any(s.name == "run from_env" for s in spans))
    assert {s.name for s in spans} == {"run from_env", "node one"}

    monkeypatch.setenv("COUNTERPOINT_OTEL", "0")
    await cp.run(g, store="memory")
    assert telemetry.active() is None
    assert len(receiver.spans) == 2, "the run after the variable was unset is not traced"


def test_the_command_line_exports_its_run_to_the_endpoint_of_the_environment(
        receiver: OTLPReceiver, tmp_path: Path) -> None:
    graph = tmp_path / "greeting.py"
    graph.write_text(GRAPH)
    env = {**os.environ, "PYTHONPATH": str(SRC), "COUNTERPOINT_OTEL": "1",
           "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
           "OTEL_SERVICE_NAME": "greeter"}
    done = subprocess.run([sys.executable, "-m", "counterpoint.cli", "run", str(graph),
                           "--db", str(tmp_path / "runs.db")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # the process exported its spans before it exited (the SDK flushes at exit)
    spans = receiver.spans
    run = next(s for s in spans if s.name == "run greeting")
    assert run.resource["service.name"] == "greeter"
    nodes = sorted(s.name for s in spans if s.parent_span_id == run.span_id)
    assert nodes == ["node hello", "node world"]
    assert run.attributes["counterpoint.run_id"] in done.stdout


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL='grpc' is not used"),
    ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json", "sends OTLP over HTTP/protobuf only"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318", "is not an http:// or https:// URL"),
    ("COUNTERPOINT_OTEL_CONTENT", "maybe", "COUNTERPOINT_OTEL_CONTENT='maybe' is not one of"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/v1/traces",
     "spans would go to http://127.0.0.1:4318/v1/traces/v1/traces; set it to "
     "http://127.0.0.1:4318 or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT to the whole URL"),
])
def test_a_variable_counterpoint_cannot_follow_is_named_in_a_warning(
        variable: str, value: str, message: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A value the exporter would silently ignore (or mis-parse only at the first export,
    after the run) is one warning on ``counterpoint.telemetry`` when tracing starts."""
    monkeypatch.setenv(variable, value)
    with caplog.at_level("WARNING", logger="counterpoint.telemetry"):
        tracing = telemetry.instrument()
        tracing.shutdown()
    found = [r.getMessage() for r in caplog.records if r.name == "counterpoint.telemetry"]
    assert len(found) == 1 and message in found[0], found


def test_a_bad_endpoint_given_in_code_is_a_user_error() -> None:
    with pytest.raises(cp.UserError, match="endpoint 'collector:4318' is not an http"):
        telemetry.instrument(endpoint="collector:4318")


async def test_an_endpoint_given_with_its_traces_path_is_followed(
        receiver: OTLPReceiver) -> None:
    """The collector's traces URL as its documentation prints it: spans go there, not to
    ``/v1/traces/v1/traces`` (the receiver's 404 left the run untraced)."""
    g = cp.Graph("whole_url")

    async def one() -> int:
        return 1

    g.add("one", one)
    with telemetry.instrument(endpoint=receiver.endpoint + "/v1/traces/") as tracing:
        await cp.run(g, store="memory")
        assert tracing.force_flush()
    assert {s.name for s in receiver.spans} == {"run whole_url", "node one"}
