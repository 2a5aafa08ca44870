"""A run deleted by another process (``counterpoint delete``) while the web view shows it,
in a real headless chromium: it leaves the runs list, its open page says it was deleted,
and the API says so too (not only "not found")."""

from __future__ import annotations

import signal
from typing import Any

from ui_support import Workdir

import counterpoint as cp
from counterpoint.store import RunStore
from counterpoint.ui.server import Server


def _pair() -> cp.Graph:
    def one() -> int:
        return 1

    def two(x: int) -> int:
        return x + 1

    g = cp.Graph("pair")
    g.add("two", two, x=g.add("one", one))
    return g


def test_a_run_deleted_elsewhere_leaves_the_list_and_its_open_page_says_so(
        work: Workdir, served: Server, ui_store: RunStore, page: Any) -> None:
    kept = cp.run_sync(_pair(), store=ui_store)
    doomed = cp.run_sync(_pair(), store=ui_store)
    listing = page.context.new_page()
    listing.goto(served.url)
    listing.wait_for_selector(f'tr[data-run="{doomed.run_id}"]')
    page.goto(f"{served.base}/runs/{doomed.run_id}?node=two")
    page.wait_for_selector('#dag [data-node="two"][data-status="succeeded"]')
    page.wait_for_selector("#detail h3")

    deleting = work.start("delete", doomed.run_id)
    _, err = deleting.communicate(timeout=60)
    assert deleting.returncode == 0, err.decode()

    listing.wait_for_selector(f'tr[data-run="{doomed.run_id}"]', state="detached")
    assert listing.locator(f'tr[data-run="{kept.run_id}"]').count() == 1
    said = page.wait_for_selector("#deleted").inner_text()
    assert f"run {doomed.run_id} was deleted" in said and "counterpoint delete" in said
    page.click("text=back to the runs list")
    page.wait_for_selector(f'tr[data-run="{kept.run_id}"]')

    # the server saw the run: asking for it again says it was deleted
    answer = page.request.get(f"{served.base}/api/runs/{doomed.run_id}")
    assert answer.status == 404 and "was deleted" in answer.json()["error"]
    node = page.request.get(f"{served.base}/api/runs/{doomed.run_id}/nodes/two")
    assert node.status == 404 and "was deleted" in node.json()["error"]


def test_a_store_file_replaced_under_the_server_is_said_on_the_open_pages(
        work: Workdir, served: Server, ui_store: RunStore, page: Any) -> None:
    import os
    run = cp.run_sync(_pair(), store=ui_store)
    listing = page.context.new_page()
    listing.goto(served.url)
    listing.wait_for_selector(f'tr[data-run="{run.run_id}"]')
    page.goto(f"{served.base}/runs/{run.run_id}")
    page.wait_for_selector('#dag [data-node="two"][data-status="succeeded"]')

    for suffix in ("", "-wal", "-shm"):  # as `rm runs.db*` would
        if os.path.exists(work.db + suffix):
            os.remove(work.db + suffix)
    work.write("pair.py", """
        import counterpoint as cp
        graph = cp.Graph("pair")
        graph.add("one", lambda: 1)
    """)
    fresh = work.start("run", "pair.py", "--quiet")  # a new file at the same path
    _, err = fresh.communicate(timeout=120)
    assert fresh.returncode == 0, err.decode()

    said = listing.wait_for_selector("#replaced").inner_text()
    assert f"the store file {work.db} was deleted or replaced" in said
    assert "restart `counterpoint ui`" in said
    assert "deleted or replaced" in page.wait_for_selector("#replaced").inner_text()
    answer = page.request.get(f"{served.base}/api/runs")
    assert answer.status == 409 and "restart `counterpoint ui`" in answer.json()["error"]


def _visibility(page: Any, state: str) -> None:
    page.evaluate("s => { Object.defineProperty(document, 'visibilityState', "
                  "{value: s, configurable: true}); "
                  "document.dispatchEvent(new Event('visibilitychange')); }", state)


def test_a_background_tab_gives_its_finished_runs_stream_up_and_catches_up_when_shown(
        work: Workdir, served: Server, ui_store: RunStore, page: Any) -> None:
    """A browser holds at most 6 connections to one server: the stream a finished run's
    page keeps open (to say if the run is deleted) is closed while the tab is hidden."""
    run = cp.run_sync(_pair(), store=ui_store)
    page.goto(f"{served.base}/runs/{run.run_id}")
    page.wait_for_function("window.__streamEnded === true")
    assert page.get_attribute("#conn", "class") == "on"  # still open after the end
    _visibility(page, "hidden")
    page.wait_for_selector("#conn.off")
    page.evaluate("window.__streamEnded = false")
    _visibility(page, "visible")  # shown again: the run is sent whole, and drawn
    page.wait_for_function("window.__streamEnded === true")
    page.wait_for_selector('#conn.on')
    page.wait_for_selector('#dag [data-node="two"][data-status="succeeded"]')
    _visibility(page, "hidden")
    page.wait_for_selector("#conn.off")
    ui_store.delete_runs([run.run_id])
    _visibility(page, "visible")
    said = page.wait_for_selector("#main p.error").inner_text()
    assert f"run {run.run_id} was deleted" in said


HOLD = """
import asyncio
import counterpoint as cp


async def hold() -> int:
    await asyncio.sleep(3600)  # until the test kills the process
    return 1


graph = cp.Graph("hold")
graph.add("hold", hold)
"""


def test_an_interrupted_run_deleted_while_its_page_follows_it_says_so(
        work: Workdir, served: Server, ui_store: RunStore, page: Any) -> None:
    """A run whose process died is still followed (it may be resumed): deleting it ends
    the page's stream with the same message."""
    work.write("hold.py", HOLD)
    proc = work.start("run", "hold.py", "--quiet")
    try:
        page.goto(served.url)
        page.wait_for_selector("tr[data-run] a").click()
        page.wait_for_selector('#dag [data-node="hold"][data-status="running"]')
        run_id = page.url.rpartition("/")[2].partition("?")[0]
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    page.wait_for_selector('#run-head .badge[data-status="interrupted"]')
    deleting = work.start("delete", run_id)
    _, err = deleting.communicate(timeout=60)
    assert deleting.returncode == 0, err.decode()
    assert f"run {run_id} was deleted" in page.wait_for_selector("#deleted").inner_text()
