"""``ctx.idempotency_key``: one key per node of a run, kept by its retries and its resume."""

from __future__ import annotations

import asyncio
from pathlib import Path

from support import run_cli

import counterpoint as cp

FLOW = '''
import os
import asyncio
from pathlib import Path

import counterpoint as cp

HERE = Path(__file__).parent


async def charge(ctx: cp.NodeContext, amount: int) -> str:
    """Sends its key with the effect; its first attempt of the first run dies after it."""
    with (HERE / "keys").open("a") as keys:
        keys.write(f"{ctx.node} {ctx.attempt} {ctx.idempotency_key}\\n")
    if not (HERE / "died").exists():
        (HERE / "died").touch()
        await ctx.flush()
        os._exit(9)  # the effect went out; its success never reached the log
    return f"charged {amount}"


graph = cp.Graph("pay")
graph.add("charge", charge, amount=5)
graph.add("refund", charge, amount=-5)
'''


def test_the_key_survives_a_crash_and_resume_and_differs_per_node(tmp_path: Path) -> None:
    (tmp_path / "pay.py").write_text(FLOW)
    crashed = run_cli("run", "pay.py", "-q", "--db", "runs.db", cwd=tmp_path)
    assert crashed.returncode == 9, crashed.stderr
    run_id = run_cli("runs", "--db", "runs.db", cwd=tmp_path).stdout.splitlines()[1].split()[0]
    resumed = run_cli("resume", run_id, "-q", "--db", "runs.db", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    lines = [line.split() for line in (tmp_path / "keys").read_text().splitlines()]
    keys = {node: {key for n, _, key in lines if n == node} for node in ("charge", "refund")}
    runs = {node: sum(n == node for n, _, _ in lines) for node in ("charge", "refund")}
    assert max(runs.values()) == 2  # the node that died ran again after the resume...
    assert keys["charge"] and keys["refund"]
    assert all(len(k) == 1 for k in keys.values()), keys  # ...with the key it had
    assert keys["charge"] != keys["refund"]


def test_retries_keep_the_key_and_runs_do_not_share_it() -> None:
    keys: list[tuple[int, str]] = []

    async def flaky(ctx: cp.NodeContext) -> str:
        keys.append((ctx.attempt, ctx.idempotency_key))
        if ctx.attempt == 1:
            raise RuntimeError("transient")
        return ctx.idempotency_key

    graph = cp.Graph("again")
    graph.add("effect", flaky, retries=1, policy=cp.Policy(backoff=cp.Backoff(initial=0.0)))
    first = cp.run_sync(graph, store=cp.MemoryStore())
    second = cp.run_sync(graph, store=cp.MemoryStore())
    assert [attempt for attempt, _ in keys] == [1, 2, 1, 2]
    assert keys[0][1] == keys[1][1] == first["effect"]
    assert keys[2][1] == keys[3][1] == second["effect"] != first["effect"]
    assert first["effect"].startswith("cp-") and len(first["effect"]) == 35


def test_a_retried_sub_graph_node_keeps_the_keys_of_the_nodes_inside_it() -> None:
    """A sub-graph node retried (its attempt timed out) runs its sub-graph again in a new
    sub-run (``run/order~2``): an effect inside it that had run in the first sub-run is
    the same effect, with the same key, so the service given the key does it once."""
    seen: list[tuple[str, str, str]] = []

    async def charge(ctx: cp.NodeContext, amount: int) -> str:
        seen.append((ctx.run_id, ctx.node, ctx.idempotency_key))
        return f"charged {amount}"

    async def ship(ctx: cp.NodeContext, receipt: str) -> str:
        seen.append((ctx.run_id, ctx.node, ctx.idempotency_key))
        if ctx.run_id.endswith("/order"):  # the order's first sub-run: the courier never
            await asyncio.Event().wait()     # answers, and the order times out
        return "shipped"

    order = cp.Graph("order")
    order.add("ship", ship, receipt=order.add("charge", charge, amount=order.input("amount")))
    shop = cp.Graph("shop")
    shop.add("order", order, amount=5, retries=1, timeout=0.2,
             policy=cp.Policy(backoff=cp.Backoff(initial=0.0)))
    shop.add("gift", order, amount=0)
    result = cp.run_sync(shop, store=cp.MemoryStore())
    assert result.ok, result.nodes["order"].error
    runs = sorted({run.split("/", 1)[1] for run, _, _ in seen})
    assert runs == ["gift", "order", "order~2"]  # the retry ran the sub-graph again...
    keys = {(run.split("/", 1)[1].split("~")[0], node): set() for run, node, _ in seen}
    for run, node, key in seen:
        keys[(run.split("/", 1)[1].split("~")[0], node)].add(key)
    assert all(len(k) == 1 for k in keys.values()), keys  # ...with the keys it had
    assert len(set().union(*keys.values())) == 4  # and no other node shares one
