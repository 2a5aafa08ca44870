"""The timeline of a node waiting for a person, in a real headless chromium: the wait is
drawn apart from running (its own bar over the attempt), named in the legend, and ends
once the run goes on."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.store import RunStore
from counterpoint.ui.server import Server


def _release() -> cp.Graph:
    async def deploy(ctx: cp.NodeContext) -> str:
        return str(await ctx.ask("deploy v2 to prod?", {"version": "v2"}))

    g = cp.Graph("release")
    g.add("deploy", deploy)
    return g


def test_a_wait_for_a_person_is_drawn_apart_from_running_with_a_legend(
        served: Server, ui_store: RunStore, page: Any) -> None:
    g = _release()
    waiting = cp.run_sync(g, store=ui_store, options=cp.RunOptions(detach_when_waiting=True))
    page.goto(f"{served.base}/runs/{waiting.run_id}")
    page.wait_for_selector('#dag [data-node="deploy"][data-status="waiting"]')
    bar = page.wait_for_selector('#gantt [data-row="deploy"] rect.approval')
    title = bar.text_content()
    assert "waited for a person" in title and "so far" in title
    assert page.locator('#gantt [data-row="deploy"] rect.bar').count() == 1  # the attempt
    fill = page.eval_on_selector('#gantt [data-row="deploy"] rect.approval',
                                 "e => getComputedStyle(e).fill")
    running = page.eval_on_selector('#gantt [data-row="deploy"] rect.bar',
                                    "e => getComputedStyle(e).fill")
    assert fill != running
    legend = page.inner_text("#gantt-legend")
    assert "waiting for a person (an approval)" in legend and "running" in legend

    [asked] = [ev for ev in ui_store.events(waiting.run_id)
               if ev.kind is EventKind.APPROVAL_REQUESTED]
    cp.approve(ui_store, str((asked.data or {})["id"]))
    # in a thread of its own: Playwright's sync API keeps an event loop in this one
    resumer = threading.Thread(target=asyncio.run, args=(
        cp.resume(waiting.run_id, store=ui_store, graph=g),))
    resumer.start()
    resumer.join(timeout=60)
    page.wait_for_selector('#dag [data-node="deploy"][data-status="succeeded"]')
    page.wait_for_function("() => { const r = document.querySelector("
                           "'#gantt [data-row=\"deploy\"] rect.approval');"
                           " return r && !r.textContent.includes('so far'); }")
