"""Runs with many sub-runs, in a real headless chromium: the runs list holds the runs a
user started (a map over a sub-graph has a sub-run per item, which would push them out
of the list's 200 rows), sub-runs only when asked; a run's page lists its own sub-runs
however many newer runs the store holds."""

from __future__ import annotations

from typing import Any

from ui_support import mapped_graph

import counterpoint as cp
from counterpoint.store import RunStore
from counterpoint.ui.server import Server


def _single() -> cp.Graph:
    g = cp.Graph("single")
    g.add("one", lambda: 1)
    return g


def test_the_runs_list_holds_top_level_runs_and_sub_runs_when_asked(
        served: Server, ui_store: RunStore, page: Any) -> None:
    first = cp.run_sync(_single(), store=ui_store)
    mapped = cp.run_sync(mapped_graph(250), store=ui_store)  # 250 sub-runs, newer than `first`
    page.goto(served.url)
    page.wait_for_selector(f'tr[data-run="{first.run_id}"]')
    page.wait_for_selector(f'tr[data-run="{mapped.run_id}"]')
    assert page.locator("tr[data-run]").count() == 2
    page.check("#sub-runs")
    page.wait_for_function("document.querySelectorAll('tr[data-run]').length == 200")
    shown = page.eval_on_selector_all("tr[data-run]", "rows => rows.map(r => r.dataset.run)")
    assert sum(r.startswith(f"{mapped.run_id}/each[") for r in shown) >= 199  # the newest
    page.uncheck("#sub-runs")
    page.wait_for_selector(f'tr[data-run="{first.run_id}"]')
    assert page.locator("tr[data-run]").count() == 2


def test_a_runs_page_lists_its_sub_runs_however_many_newer_runs_there_are(
        served: Server, ui_store: RunStore, page: Any) -> None:
    outer = cp.Graph("outer")
    inner = cp.Graph("inner")
    inner.add("think", lambda: "ok")
    outer.add("sub", inner)
    older = cp.run_sync(outer, store=ui_store)
    mapped = cp.run_sync(mapped_graph(1001), store=ui_store)  # 1,001 newer sub-runs
    page.goto(f"{served.base}/runs/{older.run_id}")
    page.wait_for_selector(f'#children a[href="/runs/{older.run_id}%2Fsub"]')
    assert page.inner_text("#children summary") == "1 sub-run(s)"
    page.goto(f"{served.base}/runs/{mapped.run_id}")
    said = page.wait_for_selector("#children summary").inner_text()
    assert said.startswith("1001 sub-run(s) (the first 200 listed")
    assert page.locator("#children a").count() == 200
