"""Trace ids of runs: a run that starts a trace takes one derived from its run id.

A run is run by more than one process when it is resumed (after a crash, a Ctrl-C, a
wait for a person), and each process exports the spans it saw. With the SDK's random
ids each process started a trace of its own, and the spans a killed process exported
(its finished attempts) hung in a trace with no run span, apart from the resumed
run's. Derived from the run id, every process's spans of the run are one trace.

Only a run that starts a trace is affected: a run inside a caller's span, and a
sub-run, belong to their parent's trace. Used by the tracer provider that
:func:`~counterpoint.telemetry.instrument` builds; a provider of your own keeps its
id generator.
"""

from __future__ import annotations

import hashlib

from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from .spans import starting_run


class RunTraceIds(RandomIdGenerator):
    """Random ids, except the trace id of a run span that starts a trace (the run being
    started is :data:`~counterpoint.telemetry.spans.starting_run`). Safe from any
    thread; the context variable is the starting thread's."""

    def generate_trace_id(self) -> int:
        run_id = starting_run.get()
        if run_id is None:
            return super().generate_trace_id()
        digest = hashlib.sha256(f"counterpoint trace {run_id}".encode()).digest()
        return int.from_bytes(digest[:16], "big") or 1  # 0 is the invalid trace id

    def is_trace_id_random(self) -> bool:
        return True  # a hash of a unique id: as good as random for ratio sampling
