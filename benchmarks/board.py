"""Blackboard benchmarks: what a write costs, against baselines in the same invocation.

    python -m benchmarks.board [--writes N]

B1 (async step): ``ctx.board.write(key, 1)`` on a ``sum`` key and on an ``error`` key
(read, then write based on it), N times in one node of a run logged to SQLite, against
(a) the same number of ``ctx.record(...)`` informational events (the run's event path
without the board: decide, copy, check) and (b) a dict updated under an
``asyncio.Lock`` (no log at all). B2 (sync step in a worker thread): the same, where
every board call is handed to the run's loop and waited for, against ``ctx.record``
(handed over without waiting) and a dict under a ``threading.Lock``. Prints seconds
per write and the ratios; medians of 5 interleaved rounds.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import counterpoint as cp  # noqa: E402
from counterpoint.events import EventKind  # noqa: E402
from counterpoint.store import SQLiteStore  # noqa: E402

KINDS = ("lock", "record", "sum", "cas")
ROUNDS = 5
BOARD = cp.Board(keys={"n": cp.Key(policy="sum"), "cas": cp.Key(policy="error")})


def _async_step(kind: str, n: int) -> Callable[..., Any]:
    async def step(ctx: cp.NodeContext) -> float:
        started = time.perf_counter()
        if kind == "sum":
            for _ in range(n):
                ctx.board.write("n", 1)
        elif kind == "cas":
            for _ in range(n):
                seen = ctx.board.read("cas")
                ctx.board.write("cas", (seen.value or 0) + 1, read=seen.version)
        elif kind == "record":
            for i in range(n):
                ctx.record(EventKind.PLAN_ROUND, {"key": "n", "value": i})
        else:
            lock, board = asyncio.Lock(), {"n": 0}
            for _ in range(n):
                async with lock:
                    board["n"] += 1
        return (time.perf_counter() - started) / n
    return step


def _sync_step(kind: str, n: int) -> Callable[..., Any]:
    def step(ctx: cp.NodeContext) -> float:
        started = time.perf_counter()
        if kind == "sum":
            for _ in range(n):
                ctx.board.write("n", 1)
        elif kind == "cas":
            for _ in range(n):
                seen = ctx.board.read("cas")
                ctx.board.write("cas", (seen.value or 0) + 1, read=seen.version)
        elif kind == "record":
            for i in range(n):
                ctx.record(EventKind.PLAN_ROUND, {"key": "n", "value": i})
        else:
            lock, board = threading.Lock(), {"n": 0}
            for _ in range(n):
                with lock:
                    board["n"] += 1
        return (time.perf_counter() - started) / n
    return step


async def _measure(make: Callable[[str, int], Callable[..., Any]], kind: str, n: int,
                   folder: Path, round_: int) -> float:
    g = cp.Graph("bench", board=BOARD)
    g.add("w", make(kind, n))
    store = SQLiteStore(folder / f"{kind}-{round_}-{make.__name__}.db")
    try:
        result = await cp.run(g, store=store)
    finally:
        store.close()
    assert result.ok, result.nodes
    if kind == "sum":
        assert result.board.values()["n"] == n
    per_write: float = result["w"]
    return per_write


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=5000)
    n = parser.parse_args().writes
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for label, make in (("B1 async step", _async_step), ("B2 sync step", _sync_step)):
            samples: dict[str, list[float]] = {k: [] for k in KINDS}
            for r in range(ROUNDS):  # rounds interleave the kinds, so load drift cancels
                for kind in KINDS:
                    samples[kind].append(asyncio.run(_measure(make, kind, n, folder, r)))
            medians = {k: statistics.median(v) for k, v in samples.items()}
            print(f"{label}, {n} writes, SQLite log (median of {ROUNDS}):")
            for kind, what in (("lock", "dict under a lock (no log)"),
                               ("record", "ctx.record (event path, no board)"),
                               ("sum", "board.write, sum key"),
                               ("cas", "board.read + write, error key")):
                print(f"  {what:38s} {medians[kind] * 1e6:8.2f} us/write")
            print(f"  board sum write / ctx.record: {medians['sum'] / medians['record']:.2f}x; "
                  f"read+write / ctx.record: {medians['cas'] / medians['record']:.2f}x; "
                  f"sum write / lock: {medians['sum'] / medians['lock']:.1f}x")


if __name__ == "__main__":
    main()
