"""The page over a large run (3,001 nodes), in a real headless chromium: the DAG draws a
bounded subset with a note saying so, the critical path and the failed node are in it,
and the run's payload is bounded."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import counterpoint as cp
from benchmarks.large import build_l1
from counterpoint.store import RunStore
from counterpoint.ui import subset
from counterpoint.ui.server import Server


def _explode() -> int:
    raise ValueError("the fuse was lit")


def test_a_large_run_draws_a_bounded_subset_with_a_note(served: Server, ui_store: RunStore,
                                                         page: Any) -> None:
    g = build_l1(100, 30)
    g.add("boom", _explode, after=["n5-7"])
    run = cp.run_sync(g, store=ui_store)
    with urllib.request.urlopen(f"{served.base}/api/runs/{run.run_id}") as response:
        body = response.read()
    data = json.loads(body)
    assert data["partial"]["total"] == 3001 and len(data["nodes"]) <= subset.BOUND
    assert len(body) < 1_000_000  # the whole run is several megabytes
    page.goto(f"{served.base}/runs/{run.run_id}")
    note = page.wait_for_selector("#dag-some")
    drawn = page.locator("#dag g.node").count()
    assert 0 < drawn <= subset.BOUND
    assert f"{drawn:,} of 3,001 nodes drawn; the critical path" in note.text_content()
    assert "1 failed" in note.text_content()
    for node in data["critical"]:
        assert page.locator(f'#dag [data-node="{node}"].critical').count() == 1
    assert page.get_attribute('#dag [data-node="boom"]', "data-status") == "failed"
    assert "of 3,001 nodes" in page.inner_text("#gantt-some")  # as the DAG's note counts
    assert "3,001 nodes" in page.inner_text("#run-head")
    # summed times of thousands of nodes run to hours and days ("1526m 47s" was shown)
    assert page.evaluate("[59, 3599, 5000, 91607, 200000].map(Gantt.secs)") == [
        "59.00 s", "59m 59s", "1h 23m", "1d 01h", "2d 07h"]
    page.click('#dag [data-node="boom"]')
    page.wait_for_selector("#detail >> text=ValueError: the fuse was lit")
