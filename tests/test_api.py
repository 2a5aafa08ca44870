"""The public entry points (counterpoint.api): where they may be called, what they promise."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import counterpoint as cp


async def double(x: int) -> int:
    return 2 * x


def test_run_sync_works_inside_a_running_event_loop() -> None:
    """Regression: in a Jupyter cell (a loop is running) run_sync raised a raw
    RuntimeError and left 'coroutine was never awaited'."""
    g = cp.Graph("nested")
    g.add("d", double, x=21)

    async def cell() -> cp.RunResult:
        return cp.run_sync(g, store="memory")

    result = asyncio.run(cell())
    assert result.ok and result["d"] == 42


def test_run_sync_inside_a_loop_passes_errors_through() -> None:
    g = cp.Graph("needs-input")
    g.input("x")
    g.add("d", double, x=cp.InputRef("x"))

    async def cell() -> None:
        cp.run_sync(g, store="memory")

    with pytest.raises(cp.UserError, match=r"needs input\(s\) \['x'\]"):
        asyncio.run(cell())


_STARTER = textwrap.dedent("""
    import asyncio, json, os, signal, sys
    import counterpoint as cp

    async def forever() -> None:
        await asyncio.Event().wait()

    g = cp.Graph("killed-early")
    g.add("wait", forever)

    async def main() -> None:
        handle = await cp.start(g, store=sys.argv[1])
        print(json.dumps({"run": handle.run_id}), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # right after the id was shown

    asyncio.run(main())
""")


def test_a_run_whose_id_was_shown_survives_a_kill_right_after(tmp_path: Path) -> None:
    """Regression: a run killed in its first ~50 ms left no record although its id had
    been shown; ``resume`` said it did not exist."""
    db = tmp_path / "runs.db"
    script = tmp_path / "starter.py"
    script.write_text(_STARTER)
    proc = subprocess.run([sys.executable, str(script), str(db)], capture_output=True,
                          text=True, timeout=120, env={**os.environ})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    run_id = json.loads(proc.stdout.strip().splitlines()[-1])["run"]
    store = cp.SQLiteStore(db)
    try:
        record = store.run(cp.RunId(run_id))
        assert record.graph == "killed-early"
        assert run_id in [r.run_id for r in store.runs()]
    finally:
        store.close()



_EFFECT_THEN_DIE = textwrap.dedent("""
    import asyncio, os, signal, sys
    from pathlib import Path
    import counterpoint as cp

    HERE = Path(__file__).parent

    async def pay() -> int:
        with (HERE / "effects.txt").open("a") as f:  # an effect outside the run: a payment
            f.write("paid\\n")
        if not (HERE / "go").exists():
            os.kill(os.getpid(), signal.SIGKILL)  # the process dies inside the first step
        return 1

    g = cp.Graph("dies-in-its-first-step")
    g.add("pay", pay)

    async def main() -> None:
        if sys.argv[2] == "start":
            await (await cp.start(g, store=sys.argv[1])).result()
        else:
            await cp.run(g, store=sys.argv[1])

    if __name__ == "__main__":
        if sys.argv[2] == "run_sync":
            cp.run_sync(g, store=sys.argv[1])
        else:
            asyncio.run(main())
""")


def test_no_step_begins_before_its_run_is_in_the_store(tmp_path: Path) -> None:
    """Regression: ``cp.start`` (and so ``counterpoint run``) returned once the run was in
    the store, but a root step ran while that write was on its way: a step that killed
    the process in its first milliseconds left its effect done and no run to resume.
    (``cp.run`` and ``run_sync`` begin at once: see their docstring.)"""
    db = tmp_path / "runs.db"
    script = tmp_path / "dies.py"
    script.write_text(_EFFECT_THEN_DIE)
    proc = subprocess.run([sys.executable, str(script), str(db), "start"], capture_output=True,
                          text=True, timeout=120, env={**os.environ})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (tmp_path / "effects.txt").read_text() == "paid\n"
    store = cp.SQLiteStore(db)
    try:
        [record] = store.runs()  # the run whose step died is recorded
        assert record.graph == "dies-in-its-first-step"
        (tmp_path / "go").touch()
        result = asyncio.run(cp.resume(record.run_id, store=store))
        assert result.ok and result["pay"] == 1, result
    finally:
        store.close()


def test_a_failure_under_run_sync_records_only_its_own_traceback() -> None:
    """Regression: ``run_sync`` ran the whole run inside the handler of the
    ``RuntimeError`` that told it no loop was running, so every failure it recorded had
    "no running event loop ... During handling of the above exception" in its traceback."""
    async def broken() -> int:
        raise ValueError("the step's own mistake")

    g = cp.Graph("own-traceback")
    g.add("a", broken)
    result = cp.run_sync(g, store="memory")
    error = result.nodes["a"].error
    assert error is not None and error["type"] == "ValueError"
    assert "the step's own mistake" in error["traceback"]
    assert "no running event loop" not in error["traceback"]
    assert "During handling" not in error["traceback"]


def test_a_step_held_until_its_run_is_in_the_store_shows_that_wait_as_waiting(
        tmp_path: Path) -> None:
    """The hold before a run's first steps (they begin once ``run_created`` is durable)
    is the attempt's waiting for the log, not its work: metrics say so, and the duration
    learned for the step leaves it out (the first write of a process waits for the
    store's writer to start, which made a trivial step look slow)."""
    async def quick() -> int:
        return 1

    g = cp.Graph("held")
    g.add("a", quick)
    store = cp.SQLiteStore(tmp_path / "runs.db")

    async def started() -> cp.RunResult:
        return await (await cp.start(g, store=store)).result()

    try:
        result = asyncio.run(started())
        timing = result.metrics.nodes["a"]
        assert timing.waited.get("log", 0.0) > 0.0
        assert timing.busy_time == pytest.approx(timing.run_time - timing.waited["log"])
        [(key, learned)] = store.estimates().items()
        assert key.endswith("quick") and learned == pytest.approx(timing.busy_time, abs=1e-6)
    finally:
        store.close()


def _one() -> cp.Graph:
    g = cp.Graph("one")
    g.add("d", double, x=1)
    return g


@pytest.mark.parametrize(("call", "said"), [
    (lambda tmp: cp.run_sync(_one(), store="memory", options={"max_concurrency": 2}),
     r"^options must be a cp.RunOptions, got dict \{'max_concurrency': 2\}; write "
     r"options=cp.RunOptions\(max_concurrency=...\)$"),
    (lambda tmp: cp.run_sync(double, store="memory"),
     r"^graph must be a cp.Graph, got function double; build one with g = cp.Graph"),
    (lambda tmp: cp.run_sync(_one(), store=123),
     r"^store must be a RunStore, a file path, a postgresql:// URL or 'memory', got int 123"),
    (lambda tmp: cp.run_sync(_one(), store="memory", run_id=3),
     r"^run_id must be a non-empty string without '/' .* got 3"),
    (lambda tmp: cp.run_sync(_one(), store="memory", run_id="a/b"),
     r"^run_id must be a non-empty string without '/' .* got 'a/b'"),
    (lambda tmp: cp.run_sync(_one(), store="memory", backend="ray"),
     r"^backend must be a counterpoint Backend .* got str 'ray'"),
    (lambda tmp: cp.run_sync(_one(), store="memory", inputs=[1]),
     r"^inputs must be a mapping of the graph's input names to values, .* got list \[1\]"),
    (lambda tmp: asyncio.run(cp.resume("r-1", store=tmp / "runs.db", options={"seed": 1})),
     r"^options must be a cp.RunOptions, got dict"),
    (lambda tmp: cp.fork_sync("r-1", store=7), r"^store must be a RunStore"),
], ids=["options-dict", "graph-function", "store-int", "run-id-int", "run-id-slash",
        "backend-str", "inputs-list", "resume-options-dict", "fork-store-int"])
def test_an_argument_of_the_wrong_kind_is_a_user_error_saying_what_to_pass(
        call: Any, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: AttributeError from inside prepare_run ('dict' object has no attribute
    'budget'), a run recorded under the int id 3, a failed run for backend='ray', and
    for store=123 a SQLite file named 123 in the working directory."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(cp.errors.UserError, match=said):
        call(tmp_path)
    assert os.listdir(tmp_path) == []  # nothing was created


def test_a_workflow_passed_for_its_graph_is_told_to_pass_its_graph() -> None:
    class Workflow:  # what load_workflow returns holds the graph in .graph
        graph = _one()

    with pytest.raises(cp.errors.UserError, match=r"pass its .graph"):
        cp.run_sync(Workflow(), store="memory")  # type: ignore[arg-type]
