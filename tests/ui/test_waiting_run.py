"""A run that ended its process to wait for a person (``counterpoint run
--detach-waiting``), in a real headless chromium: the list and its page say ``waiting``
(as ``counterpoint runs`` and ``show`` do), not ``interrupted``, with what answers it;
the answer given from the command line resumes it and the page follows."""

from __future__ import annotations

import re
from typing import Any

from ui_support import Workdir

from counterpoint.store import RunStore
from counterpoint.ui.server import Server

RELEASE = """
import counterpoint as cp


async def deploy(ctx: cp.NodeContext) -> str:
    return str(await ctx.ask("deploy v2 to prod?", {"version": "v2"}))


graph = cp.Graph("release")
graph.add("deploy", deploy)
"""


def test_a_detached_waiting_run_is_shown_waiting_and_its_answer_resumes_it(
        work: Workdir, served: Server, ui_store: RunStore, page: Any) -> None:
    work.write("release.py", RELEASE)
    detached = work.start("run", "release.py", "--detach-waiting")
    out, err = detached.communicate(timeout=120)
    assert detached.returncode == 3, err.decode()
    run_id = re.findall(r"r-\d{8}-\d{6}-[0-9a-f]+", out.decode())[0]
    approval = re.findall(r"ap-[0-9a-f]+", out.decode())[0]

    page.goto(served.url)
    page.wait_for_selector(f'tr[data-run="{run_id}"] .badge[data-status="waiting"]')
    page.select_option("#status-filter", "waiting")
    assert page.locator("tr[data-run]").count() == 1
    page.goto(f"{served.base}/runs/{run_id}")
    page.wait_for_selector('#run-head .badge[data-status="waiting"]')
    note = page.inner_text("#run-note")
    assert f"waiting for 1 approval(s) ({approval})" in note and "counterpoint approve" in note
    assert page.locator("#resume").count() == 1 and page.locator("#cancel").count() == 1
    page.click("#resume")  # before the answer: it runs on to the same wait, and says so
    said = page.wait_for_selector(f"#note >> text=run {run_id} resumed")
    assert f"waits again for approval(s) ({approval})" in said.inner_text()
    assert "exited with code" not in said.inner_text()

    answering = work.start("approve", approval)
    _, err = answering.communicate(timeout=120)
    assert answering.returncode == 0, err.decode()
    page.wait_for_selector('#run-head .badge[data-status="succeeded"]', timeout=60_000)
    assert page.locator("#run-note").count() == 0
