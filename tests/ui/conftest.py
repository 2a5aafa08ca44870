"""Fixtures of the web view's tests: a real headless chromium (Debian's, driven by
Playwright), the web view served on loopback over a store in a file, and a working
directory whose runs execute in their own ``counterpoint run`` processes."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_support import Workdir

from counterpoint.store import RunStore, open_store
from counterpoint.ui.server import Server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless chromium. Fails (never skips) when it is missing: these tests must run.

    One per test module, not per session: Playwright's sync API keeps an event loop of
    its own while it runs, which the async tests of later modules must not find."""
    from playwright.sync_api import sync_playwright
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("the web view's tests need Debian's chromium on PATH: run "
                    "`apt-get install chromium` (as root)", pytrace=False)
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1500, "height": 950})
    the_page = context.new_page()
    yield the_page
    context.close()


@pytest.fixture
def work(tmp_path: Path) -> Workdir:
    return Workdir(path=tmp_path, db=str(tmp_path / "runs.db"))


@pytest.fixture
def ui_store(work: Workdir) -> Iterator[RunStore]:
    """The store the web view reads (the runs write it from other processes)."""
    store = open_store(work.db)
    yield store
    store.close()


@pytest.fixture
def served(ui_store: RunStore, work: Workdir) -> Iterator[Server]:
    """The web view on a free loopback port, served from a thread of this process."""
    server = Server(ui_store, cwd=work.path).start()
    yield server
    server.stop()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ui_args(*args): arguments of `counterpoint ui`")
