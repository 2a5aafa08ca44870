"""Test doubles that ship with counterpoint, for its own tests, its benchmarks and users.

- `OpenAIServer`: a real HTTP server on loopback that speaks the OpenAI Chat
  Completions API, answering with scripted `Reply` objects (text, JSON, tool calls,
  refusals, HTTP errors, hangs, cut-off streams, malformed bodies) and optionally
  enforcing a rate limit. Standard library only.
- `SimulatedEngine`: the timing of a serving engine (slots, prefill and decode per
  token, a prefix cache) that an `OpenAIServer` can answer with: a simulation, for
  benchmarks that compare schedulers.
- `counterpoint.testing.simulated_models`: simulated models (price, latency, success
  per difficulty) behind one `OpenAIServer`, and a task suite with known answers, for
  routing evaluations: a simulation.
- `ManualClock`: a clock for approvals' timeouts that moves only when a test says so.
- `counterpoint.testing.otlp.OTLPReceiver`: a real OTLP/HTTP trace receiver on
  loopback that decodes what an exporter sends, and can stall as a slow collector
  does (imported from its module, as it needs the ``otel`` extra).
"""

from __future__ import annotations

from .clock import ManualClock
from .engine import SimulatedEngine
from .openai_server import OpenAIServer, TokenBucket
from .replies import RecordedRequest, Reply, ToolCall, Usage

__all__ = ["ManualClock", "OpenAIServer", "RecordedRequest", "Reply", "SimulatedEngine",
           "TokenBucket", "ToolCall", "Usage"]
