"""The web view end to end: a run executing in its own process while a real headless
chromium shows it. Nodes change state on the page as the run proceeds, a model call's
prompt is visible, and the page's Cancel button stops the run. The screenshot of the
README (docs/ui-run.png) is taken here: it is written into docs/ only when
COUNTERPOINT_UPDATE_SCREENSHOT=1, so a test run leaves the checkout as it was."""

from __future__ import annotations

import os
import re
import shutil
import signal
from pathlib import Path
from typing import Any

from ui_support import Workdir

from counterpoint.ids import RunId
from counterpoint.store import RunStore
from counterpoint.ui.server import Server

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "ui-run.png"

LIVE = """
import asyncio
from pathlib import Path

import counterpoint as cp

HERE = Path(__file__).parent
model = cp.Model(cp.ScriptedModel(["Paris is the capital of France."], name="geo"))


async def gate(name: str) -> None:
    for _ in range(6000):  # at most 5 min if the test never opens it
        if (HERE / name).exists():
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{name} never appeared")


def first() -> list[int]:
    return [1, 2, 3]


def square(x: int) -> int:
    return x * x


async def wait(xs: list[int]) -> int:
    await gate("release")
    return sum(xs)


async def ask(total: int) -> str:
    answer = await model.generate(f"What is the capital of France? (asked after {total})")
    return answer.text


async def hold(answer: str) -> str:
    await gate("never")
    return answer


graph = cp.Graph("live")
xs = graph.add("first", first)
graph.map("square", square, over=xs)
total = graph.add("wait", wait, xs=xs)
graph.add("hold", hold, answer=graph.add("ask", ask, total=total))
"""


def node(name: str, status: str) -> str:
    return f'#dag [data-node="{name}"][data-status="{status}"]'


def test_a_live_run_changes_state_shows_its_prompt_and_is_cancelled_from_the_page(
        work: Workdir, served: Server, ui_store: RunStore, page: Any) -> None:
    work.write("live.py", LIVE)
    proc = work.start("run", "live.py", "--quiet")
    try:
        page.goto(served.url)
        link = page.wait_for_selector("tr[data-run] a")
        run_id = link.inner_text()
        assert re.fullmatch(r"r-\d{8}-\d{6}-[0-9a-f]+", run_id)
        link.click()

        page.wait_for_selector(node("wait", "running"))
        assert page.get_attribute('#dag [data-node="ask"]', "data-status") == "pending"
        page.wait_for_selector(node("square[2]", "succeeded"))

        (work.path / "release").touch()  # the run goes on while the page watches
        page.wait_for_selector(node("wait", "succeeded"))
        page.wait_for_selector(node("ask", "succeeded"))
        page.wait_for_selector(node("hold", "running"))

        page.click('#dag [data-node="ask"]')
        prompt = page.wait_for_selector(".prompt >> text=What is the capital of France?")
        assert "asked after 6" in prompt.inner_text()  # sum([1, 2, 3]), passed along the run
        answer = page.wait_for_selector(".answer")
        assert answer.inner_text() == "Paris is the capital of France."
        shot = work.path / "ui-run.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes().startswith(b"\x89PNG")
        if os.environ.get("COUNTERPOINT_UPDATE_SCREENSHOT") == "1":
            shutil.copyfile(shot, SCREENSHOT)

        page.click("#cancel")
        page.wait_for_selector('#run-head .badge[data-status="cancelled"]')
        page.wait_for_selector(node("hold", "cancelled"))
        assert proc.wait(timeout=30) == 1  # the run's own exit code: cancelled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert ui_store.run(run_id).status == "cancelled"
    assert page.get_attribute('#dag [data-node="ask"]', "data-status") == "succeeded"


SLOW = """
import asyncio
from pathlib import Path

import counterpoint as cp

HERE = Path(__file__).parent


def first() -> int:
    return 1


async def wait(x: int) -> int:
    for _ in range(6000):  # at most 5 min if the test never releases it
        if (HERE / "release").exists():
            return x + 1
        await asyncio.sleep(0.05)
    raise TimeoutError("never released")


def last(y: int) -> int:
    return y * 10


graph = cp.Graph("slow")
graph.add("last", last, y=graph.add("wait", wait, x=graph.add("first", first)))
"""


def test_a_run_whose_process_died_is_resumed_from_the_page(
        work: Workdir, served: Server, ui_store: RunStore, page: Any) -> None:
    work.write("slow.py", SLOW)
    proc = work.start("run", "slow.py", "--quiet")
    try:
        page.goto(served.url)
        page.wait_for_selector("tr[data-run] a").click()
        page.wait_for_selector(node("wait", "running"))
        run_id = page.url.rpartition("/")[2].partition("?")[0]
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    page.wait_for_selector('#run-head .badge[data-status="interrupted"]')
    (work.path / "release").touch()
    page.click("#resume")
    page.wait_for_selector('#run-head .badge[data-status="succeeded"]')
    page.wait_for_selector(node("last", "succeeded"))
    # the resumed run can end before the page has the answer to its POST: wait for it
    page.wait_for_selector('#note:has-text("resumed in process")')
    assert ui_store.run(RunId(run_id)).status == "succeeded"
