"""Resume of a sampled call: a real process is killed (SIGKILL) while its fourth of
five samples is in flight; the resumed run answers the three samples that finished from
the run store and sends only the others, within the budget.

Which finished samples were durable when the process died is read from the database
(its response cache), not assumed: the kill comes when the fourth request reaches the
server, while the third answer may still be on its way to the disk."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.budget import spent_in_log
from counterpoint.events import EventKind
from counterpoint.store import SQLiteStore
from counterpoint.testing import OpenAIServer, RecordedRequest, Reply, Usage

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))
from sampled_graph import OPTIONS, graph  # noqa: E402


def _crash_at_fourth(db: Path, base_url: str, fourth: threading.Event) -> None:
    """Run the graph in a child process and SIGKILL it once its fourth sample arrived."""
    env = {**os.environ, "SAMPLES_BASE_URL": base_url}
    proc = subprocess.Popen([sys.executable, str(FIXTURES / "sampled_graph.py"), str(db),
                             "r-samples-crash"], env=env, stderr=subprocess.PIPE)
    try:
        assert fourth.wait(60), "the child never sent its fourth sample"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)


async def test_a_resume_after_a_crash_does_not_resend_finished_samples(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fourth = threading.Event()
    lock = threading.Lock()
    seeds: list[int] = []

    def respond(request: RecordedRequest) -> Reply:
        with lock:
            seeds.append(int(request.body["seed"]))
            count = len(seeds)
        if count == 4:  # the crash comes while the fourth sample is in flight
            fourth.set()
            return Reply.hang(30)
        return Reply.text("yes" if count % 2 else "no",
                          usage=Usage(prompt_tokens=10, completion_tokens=100))

    db = tmp_path / "runs.db"
    with OpenAIServer(default=Reply.dynamic(respond)) as server:
        _crash_at_fourth(db, server.base_url, fourth)
        with sqlite3.connect(db) as conn:
            [(cached,)] = conn.execute("SELECT count(*) FROM model_cache").fetchall()
        assert 1 <= cached <= 3, cached
        monkeypatch.setenv("SAMPLES_BASE_URL", server.base_url)
        store = SQLiteStore(db)
        try:
            result = await cp.resume("r-samples-crash", store=store, graph=graph,
                                     options=OPTIONS)
            events = store.events(result.run_id)
        finally:
            store.close()
    assert result.ok, result
    # 4 sent before the crash (3 answered, 1 lost), then every sample not durably answered
    assert len(seeds) == 4 + 5 - cached
    assert sum(1 for seed in seeds[:3] if seeds.count(seed) > 1) == 3 - cached
    assert seeds.count(seeds[3]) == 2  # the one in flight was sent again
    [sampled] = [e.data or {} for e in events if e.kind is EventKind.MODEL_SAMPLED]
    assert sampled["sent"] == 5 and sampled["answered"] == 5
    hits = [e for e in events if e.kind is EventKind.MODEL_CALL and (e.data or {}).get(
        "cache_hit")]
    assert len(hits) == cached
    spent, _ = spent_in_log(events)
    # 3 before the crash, the lost one at its bound, the ones sent after; and the fifth's
    # reservation if it was made (waiting for the model's one slot) before the crash
    sent_after = 5 - cached
    assert 0.1 * (4 + sent_after) - 1e-9 <= spent.usd <= 0.1 * (5 + sent_after) + 1e-9
    assert spent.usd <= 1.0
