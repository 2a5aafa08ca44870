"""``counterpoint ui`` over a store in a read-only folder (an archive, a CI artefact), whose
``-wal`` still holds the last run: the page's API lists and shows the runs, that run
included; cancel and resume answer 403 with a message the page shows (the store and
what to do), not a 500; nothing is written. A real ``counterpoint ui`` process held to
file permissions, on loopback."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from store.helpers import _WITHOUT_DAC, CLI_MAIN, file_digests, write_archive

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="POSIX permissions")

@dataclass
class Served:
    url: str
    folder: Path

    def digests(self) -> dict[str, str]:
        return file_digests(self.folder)

    def call(self, path: str, *, post: bool = False) -> tuple[int, Any]:
        request = urllib.request.Request(self.url.rstrip("/") + path,
                                         method="POST" if post else "GET",
                                         headers={"X-Counterpoint": "1"} if post else {})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as refused:
            return refused.code, json.loads(refused.read())


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("archive")
    write_archive(folder)
    assert (folder / "runs.db-wal").stat().st_size > 32
    proc = subprocess.Popen(
        [sys.executable, "-u", "-c", _WITHOUT_DAC + CLI_MAIN, "ui", "--db",
         str(folder / "runs.db"), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("counterpoint ui: http://127.0.0.1:"), \
            line + proc.communicate(timeout=30)[1]
        yield Served(url=line.split()[2], folder=folder)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        folder.chmod(0o755)


def _ids(served: Served) -> dict[str, str]:
    status, listed = served.call("/api/runs")
    assert status == 200, listed
    return {row["graph"]: row["run_id"] for row in listed["runs"]}


def test_the_runs_are_listed_and_shown_the_one_in_the_wal_too(served: Served) -> None:
    ids = _ids(served)
    assert set(ids) == {"ok", "dies"}
    status, shown = served.call(f"/api/runs/{quote(ids['dies'], safe='')}")
    assert status == 200, shown
    assert shown["run"]["status"] == "interrupted"


@pytest.mark.parametrize("action", ["cancel", "resume"])
def test_controls_answer_that_the_store_is_read_only(served: Served, action: str) -> None:
    before = served.digests()
    run_id = _ids(served)["dies"]
    status, answer = served.call(f"/api/runs/{quote(run_id, safe='')}/{action}", post=True)
    assert status == 403, answer
    store = served.folder / "runs.db"
    assert answer["error"] == (
        f"cannot {action} run {run_id}: store {store}: its directory {served.folder} is not "
        "writable, and SQLite must create runs.db-wal and runs.db-shm next to the file (WAL "
        f"mode); make {served.folder} writable, or copy the store to a writable directory "
        "(this page can only show its runs)")
    assert served.digests() == before
    assert _ids(served)["dies"] == run_id  # still served


def test_the_page_shows_the_refusal_of_a_cancel(served: Served, page: Any) -> None:
    """In chromium: the run's page, its Cancel button, and the answer in its note."""
    run_id = _ids(served)["dies"]
    page.goto(f"{served.url.rstrip('/')}/runs/{quote(run_id, safe='')}")
    page.wait_for_selector('#run-head .badge[data-status="interrupted"]')
    page.click("#cancel")
    note = page.wait_for_selector("#note.error")
    assert note.inner_text().startswith(f"cannot cancel run {run_id}: store "
                                        f"{served.folder / 'runs.db'}: its directory ")
    assert note.inner_text().endswith("(this page can only show its runs)")
