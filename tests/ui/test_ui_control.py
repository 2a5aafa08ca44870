"""The web view's controls (counterpoint.ui.control) over runs of another process,
without a browser: what a resume request answers when the resumed process fails."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from counterpoint.ids import RunId
from counterpoint.store import RunStore
from counterpoint.ui import control
from tests.support import wait_until

if TYPE_CHECKING:  # the fixture's type; importing conftest by name clashes across folders
    from ui_support import Workdir

SLOW = """
import asyncio
import counterpoint as cp


async def wait() -> str:
    await asyncio.sleep(600)
    return "done"


graph = cp.Graph("slow")
graph.add("wait", wait)
"""


def test_a_resume_that_fails_after_claiming_the_run_reports_its_error(
        work: Workdir, ui_store: RunStore) -> None:
    """``resume`` claims the run before it rebuilds the graph: a graph file that no longer
    imports fails after the claim, and the request must say so, not "resumed"."""
    work.write("slow.py", SLOW)
    proc = work.start("run", "slow.py", "--quiet")
    try:
        run_id = wait_until(lambda: next((r.run_id for r in ui_store.runs(5)), None),
                            "the run in the store")
        wait_until(lambda: any(e.kind.value == "node_started"
                               for e in ui_store.events(RunId(run_id))), "the node started")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    work.write("slow.py", "raise RuntimeError('slow.py is broken on purpose')\n")
    outcome = control.resume(ui_store, RunId(run_id), cwd=work.path)
    assert outcome.status == 409, outcome
    assert "broken on purpose" in outcome.message


def test_the_exit_code_of_a_resume_that_waits_is_the_commands() -> None:
    from counterpoint import exits
    from counterpoint.cli.approvals import WAITING_EXIT
    assert WAITING_EXIT == exits.WAITING == 3
