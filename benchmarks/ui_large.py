"""The web view of a large run: payload, a node's detail and the page, against the whole run.

    python -m benchmarks.ui_large [--width 1000 --layers 100] [--runs 5000]

A finished run of the L1 graph (``benchmarks.large.build_l1``; 100,000 nodes by default)
in a temporary SQLite store is served as ``counterpoint ui`` serves it. Measured: ``GET
/api/runs/RUN`` (the subset the page is sent) against ``GET /api/runs/RUN?full=1`` (every
node, what every run was sent before) in the same invocation, each twice (the first read
of a run after the server starts reads its whole log); one node's detail; and the page in
Debian's headless chromium, from navigation to the DAG and the timeline drawn. The store
also holds ``--runs`` one-node runs made before the large one, for the runs list: ``GET
/api/runs`` on the fresh server (from the run index) against the list as it was built
before (every listed run's log read for its totals, which is what the runs stream now does
apart), in the same invocation.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path

import counterpoint as cp
from benchmarks.large import build_l1
from counterpoint.store import RunStore, open_store
from counterpoint.ui.projection import run_row
from counterpoint.ui.server import Server


def _get(url: str) -> tuple[float, int]:
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        size = len(response.read())
    return time.perf_counter() - began, size


def _page(base: str, run_id: str) -> tuple[float, int]:
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"),
                                     args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1500, "height": 950})
        page.set_default_timeout(600_000)
        began = time.perf_counter()
        page.goto(f"{base}/runs/{run_id}")
        page.wait_for_function("window.__dagDrawn !== undefined")
        page.wait_for_selector("#gantt svg", state="attached")
        took = time.perf_counter() - began
        boxes = page.locator("#dag g.node").count()
        browser.close()
    return took, boxes


def _small_runs(store: RunStore, count: int) -> None:
    async def one() -> int:
        return 1

    g = cp.Graph("tiny")
    g.add("a", one)

    async def make() -> None:
        for start in range(0, count, 1000):
            await asyncio.gather(*(cp.run(g, store=store)
                                   for _ in range(min(1000, count - start))))
    asyncio.run(make())


def _old_list(store: RunStore) -> float:
    """The runs list as it was built before it came from the index alone: each of the
    newest 200 runs' logs read for its totals (commit ac7ac13's ``_Rows``, first look)."""
    began = time.perf_counter()
    [run_row(r, store.events(r.run_id)) for r in store.runs(200)]
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=1000)
    parser.add_argument("--layers", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as where:
        store = open_store(str(Path(where) / "runs.db"))
        _small_runs(store, args.runs)
        run_id = cp.run_sync(build_l1(args.width, args.layers), store=store).run_id
        server = Server(store, cwd=Path(where)).start()
        try:
            url = f"{server.base}/api/runs/{run_id}"
            print(f"L1 {args.width}x{args.layers} and {args.runs} one-node runs, "
                  f"load {os.getloadavg()[0]:.2f}")
            listed = [_get(f"{server.base}/api/runs")[0] for _ in range(2)]
            old = _old_list(store)
            print(f"GET runs list: {listed[0]:.3f} s first, {listed[1]:.3f} s again; built "
                  f"as before (200 logs read): {old:.3f} s; new / old (first) "
                  f"{listed[0] / old:.3f}")
            full = [_get(url + "?full=1") for _ in range(2)]
            sent = [_get(url) for _ in range(2)]
            for name, (t, size) in [("full, first", full[0]), ("full, again", full[1]),
                                    ("subset, first", sent[0]), ("subset, again", sent[1])]:
                print(f"GET run ({name}): {t:.3f} s, {size / 1e6:.3f} MB")
            print(f"subset / full: size {sent[1][1] / full[1][1]:.4f}, "
                  f"time (again) {sent[1][0] / full[1][0]:.3f}")
            detail = _get(f"{server.base}/api/runs/{run_id}/nodes/n{args.layers // 2}-5")
            print(f"GET node detail: {detail[0]:.4f} s")
            took, boxes = _page(server.base, run_id)
            print(f"page: DAG and timeline drawn in {took:.2f} s, {boxes} boxes; "
                  f"load {os.getloadavg()[0]:.2f}")
        finally:
            server.stop()
            store.close()


if __name__ == "__main__":
    main()
