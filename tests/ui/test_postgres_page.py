"""The web view over a PostgreSQL database, in a real headless chromium: opened on a
fresh database (no counterpoint tables yet, as `counterpoint ui` is first started), it
shows the runs other processes write there once they have made the tables."""

from __future__ import annotations

from typing import Any

from ui_support import Workdir

from counterpoint.store import open_store
from counterpoint.testing.postgres import PostgresServer
from counterpoint.ui.server import Server

GRAPH = """
import counterpoint as cp


def hello() -> str:
    return "hello"


graph = cp.Graph("first_of_the_database")
graph.add("hello", hello)
"""


def test_a_page_opened_on_a_fresh_database_shows_the_runs_written_after(
        postgres_server: PostgresServer, work: Workdir, page: Any) -> None:
    url = postgres_server.create_database()
    store = open_store(url)  # before any table exists
    server = Server(store, cwd=work.path).start()
    try:
        page.goto(server.url)
        page.wait_for_selector("text=no runs in this store yet")
        work.write("hello.py", GRAPH)
        done = Workdir(path=work.path, db=url).start("run", "hello.py", "--quiet")
        assert done.wait(timeout=120) == 0, done.stderr.read() if done.stderr else ""
        row = page.wait_for_selector("tr[data-run]")  # the runs stream: it looks again
        assert "first_of_the_database" in row.inner_text()
        run_id = row.get_attribute("data-run")
        page.goto(f"{server.base}/runs/{run_id}")
        page.wait_for_selector('#dag [data-node="hello"][data-status="succeeded"]')
    finally:
        server.stop()
        store.close()
