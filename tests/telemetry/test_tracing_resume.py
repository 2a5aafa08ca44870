"""A run killed and resumed from the command line is one trace: the spans its first
process exported before it was killed (SIGKILL of a real ``counterpoint run``) and the
resumed run's, exported by ``counterpoint resume``, share the trace id."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from counterpoint.testing.otlp import OTLPReceiver

SRC = Path(__file__).resolve().parents[2] / "src"
GRAPH = '''
import asyncio
from pathlib import Path

import counterpoint as cp

HERE = Path(__file__).parent


async def first() -> str:
    return "first"


async def second(before: str, ctx: cp.NodeContext) -> str:
    if not (HERE / "resumed").exists():
        await ctx.flush()  # first's success is on disk: the resume does not run it again
        print("recorded", flush=True)
        await asyncio.sleep(600)  # killed here
    return before + " then second"


graph = cp.Graph("crashing")
graph.add("second", second, before=graph.add("first", first))
'''


def test_a_killed_and_resumed_run_is_one_trace(receiver: OTLPReceiver, tmp_path: Path) -> None:
    (tmp_path / "crashing.py").write_text(GRAPH)
    env = {**os.environ, "PYTHONPATH": str(SRC), "COUNTERPOINT_OTEL": "1",
           "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
           "OTEL_BSP_SCHEDULE_DELAY": "10"}  # export each span as it ends
    db = str(tmp_path / "runs.db")
    run = subprocess.Popen([sys.executable, "-m", "counterpoint.cli", "run", "crashing.py",
                            "--db", db, "--quiet"], cwd=tmp_path, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Spans are exported as events are recorded, before the log commits them; a kill
        # between the two would (rightly) run ``first`` again in the resume.
        assert run.stdout is not None and run.stdout.readline() == "recorded\n"
        receiver.wait_for(lambda spans: any(s.name == "node first" for s in spans), timeout=60)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    (tmp_path / "resumed").touch()
    done = subprocess.run([sys.executable, "-m", "counterpoint.cli", "resume", "last",
                           "--db", db], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    spans = receiver.spans  # the resume exported its spans before it exited
    [before] = [s for s in spans if s.name == "node first"]
    [resumed] = [s for s in spans if s.name == "run crashing"]
    [again] = [s for s in spans if s.name == "node second"]
    assert resumed.attributes["counterpoint.resumed"] is True
    assert again.parent_span_id == resumed.span_id
    assert before.attributes["counterpoint.run_id"] == resumed.attributes["counterpoint.run_id"]
    assert before.trace_id == resumed.trace_id == again.trace_id
