"""The web view's time to first paint, in a real headless chromium (Debian's).

    python -m benchmarks.ui_paint [--repeats N]

For each case the run page (``/runs/RUN_ID``) is opened in a fresh browser context, and
two times are read from the page, measured from the start of navigation: ``fcp``, the
Performance API's ``first-contentful-paint``, and ``dag``, when the page has drawn the
DAG (the ``dag-drawn`` mark it sets after its first layout). The medians over
``--repeats`` openings are printed, with their ratio to the baseline.

Cases:

* baseline: a finished run of 10 nodes;
* 1,000 nodes: a finished run of a 1,000-node layered graph (40 layers of 25);
* live 10,000 events: the page opened while a run of 5,100 nodes (150 layers of 34)
  executes in another process (``counterpoint run``) and its log grows past 10,000
  events; also ``caught up``, the time from the run's last event being recorded to the
  page showing the run finished.

The web view is served from a thread of this process over the store in a temporary
SQLite file, as ``counterpoint ui`` serves it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import counterpoint as cp
from counterpoint.ids import RunId
from counterpoint.store import RunStore, open_store
from counterpoint.ui.server import Server

SRC = Path(__file__).resolve().parents[1] / "src"

LIVE = """
import asyncio

import counterpoint as cp


async def seed() -> int:
    await asyncio.sleep(0.02)
    return 1


async def mix(a: int, b: int) -> int:
    await asyncio.sleep(0.02)
    return 1


graph = cp.Graph("live-bench")
WIDTH = 34
prev = [graph.add(f"n0_{i}", seed) for i in range(WIDTH)]
for layer in range(1, 150):
    prev = [graph.add(f"n{layer}_{i}", mix, a=prev[i], b=prev[(i + 1) % WIDTH])
            for i in range(WIDTH)]
"""


def _seed() -> int:
    return 1


def _mix(a: int, b: int) -> int:
    return 1


def layered(name: str, layers: int, width: int) -> cp.Graph:
    """``layers`` layers of ``width`` trivial nodes, each reading two of the layer before."""
    g = cp.Graph(name)
    prev = [g.add(f"n0_{i}", _seed) for i in range(width)]
    for layer in range(1, layers):
        prev = [g.add(f"n{layer}_{i}", _mix, a=prev[i], b=prev[(i + 3) % width])
                for i in range(width)]
    return g


def measure(browser: Any, url: str) -> tuple[float, float]:
    """(first contentful paint, DAG drawn), in ms from navigation start."""
    context = browser.new_context(viewport={"width": 1500, "height": 950})
    page = context.new_page()
    page.goto(url)
    page.wait_for_function("window.__dagDrawn !== undefined", timeout=120_000)
    page.wait_for_function(
        "performance.getEntriesByName('first-contentful-paint').length > 0", timeout=60_000)
    fcp = page.evaluate(
        "performance.getEntriesByName('first-contentful-paint')[0].startTime")
    dag = page.evaluate("window.__dagDrawn")
    context.close()
    return float(fcp), float(dag)


def medians(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return (statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples))


def start_live(store: RunStore, where: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A run of LIVE started in its own process; returns once the index lists it."""
    (where / "live_bench.py").write_text(textwrap.dedent(LIVE))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)}
    before = {r.run_id for r in store.runs(1000)}
    proc = subprocess.Popen([sys.executable, "-m", "counterpoint.cli", "run", "live_bench.py",
                             "--db", store.location, "--quiet", "--max-concurrency", "34"],
                            cwd=where, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        fresh = [r.run_id for r in store.runs(1000) if r.run_id not in before]
        if fresh:
            return proc, fresh[0]
        time.sleep(0.05)  # another process: its record is all there is to wait on
    proc.kill()
    raise SystemExit("error: the live run never started")


def live_case(browser: Any, server: Server, store: RunStore, where: Path,
              repeats: int) -> tuple[list[tuple[float, float]], int, float]:
    """Paint times of pages opened during a live run, its event count, and (for another
    live run, watched by one page alone) how long after its last event the page showed
    it finished."""
    proc, run_id = start_live(store, where)
    try:
        samples = [measure(browser, f"{server.base}/runs/{run_id}") for _ in range(repeats)]
        proc.wait(timeout=300)
        count = len(store.events(RunId(run_id)))
        proc, run_id = start_live(store, where)
        context = browser.new_context()
        watcher = context.new_page()
        watcher.goto(f"{server.base}/runs/{run_id}")
        watcher.wait_for_selector('#run-head .badge[data-status="succeeded"]',
                                  timeout=300_000)
        shown = watcher.evaluate("window.__finishedAt") / 1000
        caught_up = shown - store.events(RunId(run_id))[-1].at
        context.close()
        proc.wait(timeout=300)
        return samples, count, caught_up
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright
    executable = shutil.which("chromium")
    if executable is None:
        sys.exit("error: this benchmark needs Debian's chromium on PATH: apt-get install chromium")
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        store = open_store(where / "runs.db")
        small = cp.run_sync(layered("ten", 2, 5), store=store)
        big = cp.run_sync(layered("thousand", 40, 25), store=store)
        server = Server(store, cwd=where).start()
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=executable, args=["--no-sandbox"])
                measure(browser, f"{server.base}/runs/{small.run_id}")  # warm the server
                base = medians([measure(browser, f"{server.base}/runs/{small.run_id}")
                                for _ in range(args.repeats)])
                thousand = medians([measure(browser, f"{server.base}/runs/{big.run_id}")
                                    for _ in range(args.repeats)])
                live, count, caught_up = live_case(browser, server, store, where, args.repeats)
                browser.close()
        finally:
            server.stop()
            store.close()
    rows = [("baseline: 10 nodes, finished", base),
            ("1,000 nodes, finished", thousand),
            (f"live run, {count:,} events", medians(live))]
    print(f"{'case':34} {'fcp ms':>8} {'x base':>7} {'dag ms':>8} {'x base':>7}")
    for name, (fcp, dag) in rows:
        print(f"{name:34} {fcp:8.0f} {fcp / base[0]:7.2f} {dag:8.0f} {dag / base[1]:7.2f}")
    print(f"live run: the open page showed the run finished {caught_up * 1000:.0f} ms after "
          "its last event was recorded")


if __name__ == "__main__":
    main()
