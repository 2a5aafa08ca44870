"""Approvals: what waiting for people costs, against hand-written asyncio futures.

    python benchmarks/approvals.py [--nodes N] [--trials T]

A1, many approvals at once: one run of N parallel nodes (default 1,000), each awaiting
``ctx.ask(...)``; as soon as all N are pending they are answered from the run's handle in
reverse order, and the run finishes (a fan-in reads every answer). Counted: from the
start of the run to its result, SQLite log on. Baseline in the same invocation: N asyncio
tasks each awaiting a future from a dict, resolved in reverse order once all are
waiting, then gathered. Printed: medians and the ratio (per approval: ask, log, answer
through the store, log, continue).

A2, an answer from another process: a run whose one node waits; another process records
the answer with ``counterpoint.approve`` in the same SQLite file. Counted: from the
answer being durable to the node's next event (the command poll's period bounds it).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT / "src") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "src"))

import counterpoint as cp  # noqa: E402
from counterpoint.events import EventKind  # noqa: E402


def _graph(n: int) -> cp.Graph:
    g = cp.Graph("many-approvals")

    async def gate(ctx: cp.NodeContext, i: int) -> bool:
        return (await ctx.ask("go?", {"i": i})).approved

    refs = [g.add(f"g{i}", gate, i=i) for i in range(n)]

    def fan_in(**answers: bool) -> int:
        return sum(answers.values())
    g.add("fan_in", fan_in, **{f"a{i}": r for i, r in enumerate(refs)})
    return g


async def _counterpoint(n: int, db: Path) -> float:
    graph = _graph(n)
    store = cp.SQLiteStore(db)
    try:
        started = time.perf_counter()
        handle = await cp.start(graph, store=store)
        asked = 0
        async for event in handle.events():
            if event.kind is EventKind.APPROVAL_REQUESTED:
                asked += 1
                if asked == n:
                    break
        for approval in reversed(handle.approvals()):
            handle.approve(approval.id)
        result = await handle.result()
        took = time.perf_counter() - started
    finally:
        store.close()
    assert result.outputs["fan_in"] == n, result.status
    return took


async def _asyncio(n: int) -> float:
    started = time.perf_counter()
    loop = asyncio.get_running_loop()
    futures: dict[int, asyncio.Future[bool]] = {}
    waiting = asyncio.Event()

    async def gate(i: int) -> bool:
        futures[i] = loop.create_future()
        if len(futures) == n:
            waiting.set()
        return await futures[i]

    tasks = [asyncio.create_task(gate(i)) for i in range(n)]
    await waiting.wait()
    for i in reversed(range(n)):
        futures[i].set_result(True)
    total = sum(await asyncio.gather(*tasks))
    assert total == n
    return time.perf_counter() - started


_ANSWER = """
import sys, time
import counterpoint as cp
db = sys.argv[1]
while True:
    pending = [a for a in cp.approvals(db) if a.status == "pending"]
    if pending:
        break
    time.sleep(0.01)
cp.approve(db, pending[0].id)
print(time.time())
"""


async def _cross_process(db: Path) -> float:
    g = cp.Graph("one-approval")

    async def gate(ctx: cp.NodeContext) -> bool:
        answer = await ctx.ask("go?")
        return answer.approved
    g.add("gate", gate)
    store = cp.SQLiteStore(db)
    try:
        handle = await cp.start(g, store=store)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _ANSWER, str(db), stdout=subprocess.PIPE,
            env={"PYTHONPATH": str(REPO_ROOT / "src")})
        async for event in handle.events():
            if event.kind is EventKind.APPROVAL_ANSWERED:
                taken = time.time()
                break
        out, _ = await proc.communicate()
        await handle.result()
    finally:
        store.close()
    return taken - float(out.decode().strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    ours, theirs, cross = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for trial in range(args.trials):
            ours.append(asyncio.run(_counterpoint(args.nodes, Path(tmp) / f"a1-{trial}.db")))
            theirs.append(asyncio.run(_asyncio(args.nodes)))
            cross.append(asyncio.run(_cross_process(Path(tmp) / f"a2-{trial}.db")))
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"A1 {args.nodes} approvals at once: counterpoint {a:.3f}s, asyncio futures "
          f"{b:.4f}s, ratio {a / b:.0f}x; {a / args.nodes * 1e3:.2f} ms per approval "
          "(ask, log, answer through the store, log, continue)")
    print(f"A2 answer from another process to the waiting node: median "
          f"{statistics.median(cross) * 1e3:.0f} ms (store command poll every 250 ms)")


if __name__ == "__main__":
    main()
