"""Approvals answered from the page, in a real headless chromium: two branches of a live
run wait for a person, one is approved and the other rejected with a reason, and the run
goes on in its own process; a run whose process ended to wait is resumed by the answer;
a body that is not an answer, a rejection without a reason and a second answer are
refused with what to send."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from typing import Any

from ui_support import Workdir

from counterpoint.store import RunStore
from counterpoint.ui.server import Server

BRANCHES = """
import counterpoint as cp


async def eu(ctx: cp.NodeContext) -> str:
    answer = await ctx.ask("deploy to the EU?", {"region": "eu"})
    return f"eu {answer.approved} {answer.reason}"


async def us(ctx: cp.NodeContext) -> str:
    answer = await ctx.ask("deploy to the US?", {"region": "us"})
    return f"us {answer.approved} {answer.reason}"


def report(eu: str, us: str) -> str:
    return eu + " / " + us


graph = cp.Graph("regions")
graph.add("report", report, eu=graph.add("eu", eu), us=graph.add("us", us))
"""


def _answer(page: Any, node: str, *, reason: str | None = None) -> str:
    page.click(f'#dag [data-node="{node}"]')
    page.wait_for_selector(f"#detail .approvals >> text=deploy to the {node.upper()}?")
    if reason is None:
        page.click("#detail button.approve")
    else:
        page.fill("#detail input.reason", reason)
        page.click("#detail button.reject")
    return str(page.wait_for_selector("#note:not(:text-matches('^answering'))").inner_text())


def test_two_waiting_branches_are_approved_and_rejected_from_the_page(
        work: Workdir, served: Server, ui_store: RunStore, page: Any) -> None:
    work.write("regions.py", BRANCHES)
    proc = work.start("run", "regions.py", "--quiet")
    try:
        page.goto(served.url)
        run_id = page.wait_for_selector("tr[data-run]").get_attribute("data-run")
        page.goto(f"{served.base}/runs/{run_id}")
        page.wait_for_selector('#dag [data-node="eu"][data-status="waiting"]')
        page.wait_for_selector('#dag [data-node="us"][data-status="waiting"]')
        said = _answer(page, "eu")
        assert re.match(r"approved ap-\w+ \(node 'eu'\); process \d+ continues the run", said)
        page.wait_for_selector('#dag [data-node="eu"][data-status="succeeded"]')
        _answer(page, "us", reason="not before Monday")
        page.wait_for_selector('#run-head .badge[data-status="succeeded"]')
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    page.click('#dag [data-node="us"]')
    page.wait_for_selector("#detail .approvals >> text=not before Monday")
    assert page.locator("#detail button.approve").count() == 0  # answered: no buttons
    view = json.loads(urllib.request.urlopen(
        f"{served.base}/api/runs/{run_id}/values/report", timeout=10).read())
    assert view == "eu True None / us False not before Monday"


RELEASE = """
import counterpoint as cp


async def deploy(ctx: cp.NodeContext) -> str:
    return str((await ctx.ask("deploy to the DEPLOY?", {"version": "v2"})).approved)


graph = cp.Graph("release")
graph.add("deploy", deploy)
"""


def _post(served: Server, path: str, body: bytes) -> tuple[int, str]:
    request = urllib.request.Request(served.base + path, data=body, method="POST",
                                     headers={"X-Counterpoint": "1"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answered:
            return answered.status, json.loads(answered.read())["message"]
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())["error"]


def test_an_answer_from_the_page_resumes_a_run_that_ended_to_wait(
        work: Workdir, served: Server, ui_store: RunStore, page: Any) -> None:
    work.write("release.py", RELEASE)
    detached = work.start("run", "release.py", "--detach-waiting")
    out, err = detached.communicate(timeout=120)
    assert detached.returncode == 3, err.decode()
    run_id = re.findall(r"r-\d{8}-\d{6}-[0-9a-f]+", out.decode())[0]
    approval = re.findall(r"ap-[0-9a-f]+", out.decode())[0]
    path = f"/api/runs/{run_id}/approvals/{approval}"
    assert _post(served, path, b"approve it") == (
        400, f'answer to {approval}: send {{"approved": true}} or {{"approved": false, '
             '"reason": "why"} as JSON')
    status, said = _post(served, path, b'{"approved": false, "reason": "  "}')
    assert status == 400 and "say why in the reason" in said
    status, said = _post(served, f"/api/runs/{run_id}/approvals/ap-nothing", b"{}")
    assert status == 400  # the body is checked first
    status, said = _post(served, f"/api/runs/{run_id}/approvals/ap-nothing",
                         b'{"approved": true}')
    assert status == 404 and "no approval ap-nothing" in said

    page.goto(f"{served.base}/runs/{run_id}")
    page.wait_for_selector('#run-head .badge[data-status="waiting"]')
    said = _answer(page, "deploy")
    assert said.startswith(f"approved {approval} (node 'deploy'); run {run_id} resumed")
    page.wait_for_selector('#run-head .badge[data-status="succeeded"]', timeout=60_000)
    status, said = _post(served, path, b'{"approved": false, "reason": "too late"}')
    assert status == 409 and "was approved by web view already" in said
