"""Resume under a budget: a real process is killed (SIGKILL) while one model call is in
flight; the resumed run counts what was spent before the crash (read from the log) and
the call in flight at its whole bound (it may have been paid for), and its budget line
says so: spent, not reserved."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.budget import account, spent_in_log
from counterpoint.events import EventKind
from counterpoint.ids import RunId
from counterpoint.store import SQLiteStore
from counterpoint.testing import OpenAIServer, RecordedRequest, Reply, Usage

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))
from budget_graph import OPTIONS, graph  # noqa: E402


def _crash_during_b(db: Path, base_url: str, b_arrived: threading.Event) -> None:
    """Run the graph in a child process and SIGKILL it once b's call reached the server."""
    env = {**os.environ, "BUDGET_BASE_URL": base_url}
    proc = subprocess.Popen([sys.executable, str(FIXTURES / "budget_graph.py"), str(db),
                             "r-budget-crash"], env=env, stderr=subprocess.PIPE)
    try:
        assert b_arrived.wait(60), "the child never sent b's call"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)


async def _crash_then_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                            ) -> tuple[list[cp.Event], list[cp.Event], cp.RunResult, list[str]]:
    """The log before the resume, after it, the resumed run's result and the prompts the
    server saw."""
    b_arrived = threading.Event()
    seen: list[str] = []

    def respond(request: RecordedRequest) -> Reply:
        prompt = request.last_user_text
        seen.append(prompt)
        ok = Reply.text("ok", usage=Usage(prompt_tokens=10, completion_tokens=100))
        if prompt == "b" and seen.count("b") == 1:  # the first b hangs: the crash comes
            b_arrived.set()
            return Reply.hang(30)
        return ok

    db = tmp_path / "runs.db"
    with OpenAIServer(default=Reply.dynamic(respond)) as server:
        _crash_during_b(db, server.base_url, b_arrived)
        store = SQLiteStore(db)
        try:
            before = store.events(RunId("r-budget-crash"))
            assert sum(1 for e in before if e.kind is EventKind.BUDGET_RESERVED) >= 1
            spent, _ = spent_in_log(before)
            assert spent.usd >= 0.1 - 1e-12  # b's reservation counts at its bound
            monkeypatch.setenv("BUDGET_BASE_URL", server.base_url)
            result = await cp.resume("r-budget-crash", store=store, graph=graph,
                                     options=OPTIONS)
            after = store.events(result.run_id)
        finally:
            store.close()
    return before, after, result, seen


async def test_spend_before_a_crash_and_a_call_in_flight_count_after_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, after, result, seen = await _crash_then_resume(tmp_path, monkeypatch)
    total, _ = spent_in_log(after)
    assert total.usd <= 0.35 + 1e-12  # never over, the crashed call counted in full
    states = {str(n): ns.status for n, ns in result.state.nodes.items()}
    assert states["a"] == "succeeded" and states["b"] == "succeeded"
    assert seen.count("a") == 1  # a's success reached the log: not asked again
    # 0.1 (a) + 0.1 (b, crashed in flight) + 0.1 (b again) = 0.3: c's 0.1 does not fit
    assert states["c"] == "failed"
    failed = [e.data or {} for e in after if e.kind is EventKind.NODE_FAILED and e.node == "c"]
    assert failed[-1]["type"] == "BudgetExceeded"
    assert "c" not in seen


async def test_after_resume_the_dead_processs_reservation_shows_as_spent_not_reserved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before, after, _, _ = await _crash_then_resume(tmp_path, monkeypatch)
    dead = account(before)  # not resumed yet: b's call may still be in flight for all we know
    assert dead is not None and dead.reserved.usd == pytest.approx(0.1)
    assert dead.crashed.usd == 0
    resumed = account(after)
    assert resumed is not None
    assert resumed.reserved.usd == pytest.approx(0.0)  # no live process will settle it
    assert resumed.crashed.usd == pytest.approx(0.1)  # b's first call, at its bound
    assert resumed.spent.usd == pytest.approx(0.3)  # a, b lost to the crash, b again
    assert resumed.line().startswith(
        "$0.3000 of $0.35 spent (of which $0.1000 unsettled at the crash, counted at their "
        "bound), $0.0000 reserved, $0.0500 left"), resumed.line()
