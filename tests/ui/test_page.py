"""The page over finished runs, in a real headless chromium: the runs list's filter and
search, a map's children folded into one box and unfolded, a failed node's traceback, the
links between a fork and its parent (and a fork whose parent was deleted)."""

from __future__ import annotations

from typing import Any

import counterpoint as cp
from counterpoint.store import RunStore
from counterpoint.ui.server import Server


def _fan(n: int) -> cp.Graph:
    def items() -> list[int]:
        return list(range(n))

    def square(x: int) -> int:
        return x * x

    g = cp.Graph("fan")
    g.map("square", square, over=g.add("items", items))
    return g


def _broken() -> cp.Graph:
    def explode() -> int:
        raise ValueError("the fuse was lit")

    g = cp.Graph("broken")
    g.add("explode", explode)
    return g


def test_the_runs_list_filters_by_status_and_searches(served: Server, ui_store: RunStore,
                                                     page: Any) -> None:
    fan = cp.run_sync(_fan(3), store=ui_store)
    broken = cp.run_sync(_broken(), store=ui_store)
    page.goto(served.url)
    page.wait_for_selector(f'tr[data-run="{fan.run_id}"]')
    page.wait_for_selector(f'tr[data-run="{broken.run_id}"]')
    page.select_option("#status-filter", "failed")
    page.wait_for_selector(f'tr[data-run="{fan.run_id}"]', state="detached")
    assert page.locator("tr[data-run]").count() == 1
    page.select_option("#status-filter", "")
    page.fill("#search", "fan")
    page.wait_for_selector(f'tr[data-run="{broken.run_id}"]', state="detached")
    assert page.inner_text(f'tr[data-run="{fan.run_id}"] td:nth-child(3)') == "fan"
    page.fill("#search", "no such run")
    page.wait_for_selector("text=no run matches")


def test_a_large_map_folds_into_one_box_that_unfolds(served: Server, ui_store: RunStore,
                                                     page: Any) -> None:
    run = cp.run_sync(_fan(12), store=ui_store)
    page.goto(f"{served.base}/runs/{run.run_id}")
    group = page.wait_for_selector('#dag [data-group="square"][data-status="succeeded"]')
    assert "×12" in group.text_content()
    assert page.locator("#dag [data-node^='square[']").count() == 0
    group.click()
    page.wait_for_selector('#dag [data-node="square[11]"][data-status="succeeded"]')
    assert page.locator("#dag [data-node^='square[']").count() == 12


def test_a_failed_node_shows_its_error_and_traceback(served: Server, ui_store: RunStore,
                                                     page: Any) -> None:
    run = cp.run_sync(_broken(), store=ui_store)
    page.goto(f"{served.base}/runs/{run.run_id}?node=explode")
    page.wait_for_selector("#detail >> text=ValueError: the fuse was lit")
    page.click("#detail summary:has-text('traceback')")
    assert 'raise ValueError("the fuse was lit")' in page.inner_text("#detail pre.tb")
    assert page.get_attribute('#dag [data-node="explode"]', "data-status") == "failed"


def test_a_fork_and_its_parent_link_to_each_other(served: Server, ui_store: RunStore,
                                                  page: Any) -> None:
    g = _fan(3)
    parent = cp.run_sync(g, store=ui_store)
    child = cp.fork_sync(parent.run_id, at="square", store=ui_store, graph=g)
    assert child.ok
    page.goto(f"{served.base}/runs/{child.run_id}")
    page.wait_for_selector(f'#forked-from a[href="/runs/{parent.run_id}"]')
    assert "at node square" in page.inner_text("#forked-from")
    page.goto(f"{served.base}/runs/{parent.run_id}")
    page.wait_for_selector(f'#forks a[href="/runs/{child.run_id}"]')


def test_a_fork_whose_parent_was_deleted_names_it_without_a_link(
        served: Server, ui_store: RunStore, page: Any) -> None:
    g = _fan(3)
    parent = cp.run_sync(g, store=ui_store)
    child = cp.fork_sync(parent.run_id, at="square", store=ui_store, graph=g)
    ui_store.delete_runs([parent.run_id])
    page.goto(f"{served.base}/runs/{child.run_id}")
    said = page.wait_for_selector("#forked-from").inner_text()
    assert f"forked from {parent.run_id} (deleted)" in said and "at node square" in said
    assert page.locator("#forked-from a").count() == 0  # no link to a page that 404s
    answer = page.request.get(f"{served.base}/api/runs/{child.run_id}")
    assert answer.json()["parent_deleted"] is True


def test_a_malformed_run_address_says_what_is_wrong(served: Server, ui_store: RunStore,
                                                    page: Any) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{served.base}/runs/r-2026%E0%A4%A")
    said = page.wait_for_selector("#bad-address").inner_text()
    assert "does not name a run" in said and "percent-encoding" in said
    assert errors == []
    page.goto(f"{served.base}/runs/r-no-such-run")  # well formed, unknown: the store says
    assert "run r-no-such-run not found in store" in \
        page.wait_for_selector("#main p.error").inner_text()


def test_a_long_node_id_and_html_in_values_are_shown_as_text_inside_the_panel(
        served: Server, ui_store: RunStore, page: Any) -> None:
    long_id = "step_" + "x" * 300 + '<b>"bold"&amp;'

    def evil() -> str:
        return "<img src=x onerror=window.__owned=1><script>window.__owned=2</script>"

    def boom(x: str) -> str:
        raise ValueError("<script>window.__owned=3</script> bad </pre>")

    g = cp.Graph("<i>markup</i>")
    g.add("then<script>", boom, x=g.add(long_id, evil))
    run = cp.run_sync(g, store=ui_store)
    page.goto(f"{served.base}/runs/{run.run_id}?node=then%3Cscript%3E")
    page.wait_for_selector("#detail .history")
    assert "<script>window.__owned=3</script> bad </pre>" in page.inner_text("#detail p.error")
    assert page.inner_text("#run-head h2").startswith("<i>markup</i>")
    page.locator("#dag [data-node]").filter(has_text="step_").click()
    page.wait_for_selector("#detail pre.value")
    assert "<img src=x" in page.inner_text("#detail pre.value")
    assert page.text_content("#detail h3").startswith(long_id)  # shown upper-cased
    assert page.evaluate("window.__owned") is None  # nothing the run wrote was run
    wide = page.evaluate("() => [...document.querySelectorAll('#detail h3, #detail summary')]"
                         ".filter(e => e.scrollWidth > e.clientWidth + 1).length")
    assert wide == 0  # the long id wraps inside the panel
