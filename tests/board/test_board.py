"""The blackboard through ``ctx.board``: each policy's behaviour as a step sees it, atomic
updates from threads, histories and ``board_at`` read back from the store, a board rebuilt
on resume, and one clear error for each mistake."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from support import stop_executing

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.store import MemoryStore, SQLiteStore

WAIT = 10.0
"""Seconds before a test gives up on something that should happen at once."""


async def _run(g: cp.Graph) -> tuple[cp.RunResult, MemoryStore]:
    store = MemoryStore()
    return await cp.run(g, store=store), store


async def test_a_stale_write_under_error_raises_a_conflict_the_step_can_retry() -> None:
    g = cp.Graph("error", board=cp.Board(keys={"plan": cp.Key(policy="error")}))
    first_read = asyncio.Event()
    other_wrote = asyncio.Event()

    async def planner(ctx: cp.NodeContext) -> dict[str, Any]:
        seen = ctx.board.read("plan")
        first_read.set()
        await asyncio.wait_for(other_wrote.wait(), WAIT)
        try:
            ctx.board.write("plan", ["mine"])  # based on what it read: version 0
        except cp.BoardConflict as exc:
            caught = {"key": exc.key, "read": exc.read, "version": exc.version,
                      "retryable": exc.retryable}
        fresh = ctx.board.read("plan")
        done = ctx.board.write("plan", [*fresh.value, "mine"])
        return {"seen": seen.version, "caught": caught, "final": done.version}

    async def other(ctx: cp.NodeContext) -> int:
        await asyncio.wait_for(first_read.wait(), WAIT)
        version = ctx.board.write("plan", ["theirs"]).version
        other_wrote.set()
        return version

    g.add("planner", planner)
    g.add("other", other)
    result, store = await _run(g)
    assert result["planner"] == {"seen": 0, "final": 2, "caught": {
        "key": "plan", "read": 0, "version": 1, "retryable": True}}
    assert result.board.values() == {"plan": ["theirs", "mine"]}
    conflicts = [e for e in store.events(result.run_id) if e.kind is EventKind.BOARD_CONFLICT]
    assert [(e.node, (e.data or {})["outcome"]) for e in conflicts] == [("planner", "raised")]


async def test_first_wins_keeps_the_first_and_last_wins_warns(
        caplog: pytest.LogCaptureFixture) -> None:
    g = cp.Graph("wins", board=cp.Board(keys={"first": cp.Key(policy="first_wins"),
                                              "last": cp.Key(policy="last_wins")}))

    def a(ctx: cp.NodeContext) -> Any:
        ctx.board.write("last", "a")
        return ctx.board.write("first", "a").value

    def b(ctx: cp.NodeContext) -> Any:
        ctx.board.write("last", "b")  # never read it: overwrites a version it did not see
        return ctx.board.write("first", "b").value

    g.add("b", b, after=[g.add("a", a)])
    with caplog.at_level(logging.WARNING, logger="counterpoint.board"):
        result, _ = await _run(g)
    assert (result["a"], result["b"]) == ("a", "a")  # the loser sees the winning value
    assert result.board.values() == {"first": "a", "last": "b"}
    outcomes = [(c.key, c.outcome, c.node) for c in result.board.conflicts]
    assert outcomes == [("last", "overwrote", "b"), ("first", "kept", "b")]
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "'last' (last_wins): overwrote version 1 while based on " \
        "version 0" in warned[0]


async def test_owner_only_lets_the_declared_owner_or_the_first_writer_alone_write() -> None:
    g = cp.Graph("owners", board=cp.Board(keys={"report": cp.Key(policy="owner_only",
                                                                 owner="lead"),
                                                "draft": cp.Key(policy="owner_only")}))

    def lead(ctx: cp.NodeContext) -> int:
        ctx.board.write("draft", "lead's")
        ctx.board.write("report", "v1")
        return ctx.board.write("report", "v2").version

    def intruder(ctx: cp.NodeContext) -> list[str]:
        refused = []
        for key in ("report", "draft"):
            try:
                ctx.board.write(key, "mine")
            except cp.BoardConflict as exc:
                refused.append(str(exc))
        return refused

    g.add("intruder", intruder, after=[g.add("lead", lead)])
    result, _ = await _run(g)
    assert result["lead"] == 2
    assert len(result["intruder"]) == 2
    assert all("owned by node 'lead'; node 'intruder' may not write it" in m
               for m in result["intruder"])
    assert result.board.values() == {"draft": "lead's", "report": "v2"}
    assert result.board.entries["draft"].owner == "lead"


async def test_update_is_atomic_from_threads_and_async_steps_alike() -> None:
    g = cp.Graph("updates", board=cp.Board(keys={"n": cp.Key(policy="error")}))

    def bump_sync(ctx: cp.NodeContext) -> None:
        for _ in range(25):
            ctx.board.update("n", lambda v: (v or 0) + 1)

    async def bump_async(ctx: cp.NodeContext) -> None:
        for _ in range(25):
            ctx.board.update("n", lambda v: (v or 0) + 1)
            await asyncio.sleep(0)

    for i in range(16):
        g.add(f"u{i}", bump_sync if i % 2 else bump_async)
    result, _ = await _run(g)
    assert result.ok
    assert result.board.get("n") == cp.Versioned(400, 400)
    assert result.board.conflicts == []


async def test_history_and_board_at_read_any_moment_back_from_the_store(tmp_path: Any) -> None:
    g = cp.Graph("history", board=cp.Board(keys={"notes": cp.Key(policy="append"),
                                                 "seen": cp.Key(policy="merge")}))

    def write(ctx: cp.NodeContext) -> list[int]:
        for word in ("a", "b", "c"):
            ctx.board.write("notes", word)
            ctx.board.write("seen", {word: True})
        return [w.seq for w in ctx.board.history("notes")]

    g.add("w", write)
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        result = await cp.run(g, store=store)
        seqs = result["w"]
        assert [cp.board_at(store, result.run_id, "notes", s) for s in seqs] == [
            cp.Versioned(["a"], 1), cp.Versioned(["a", "b"], 2),
            cp.Versioned(["a", "b", "c"], 3)]
        assert cp.board_at(store, result.run_id, "seen", seqs[1]) == \
            cp.Versioned({"a": True}, 1)  # the merge of "b" comes after that event
        assert cp.board_at(store, result.run_id, "notes", seqs[0] - 1) == cp.Versioned(None, 0)
    finally:
        store.close()
    # where the store is, as cp.approvals takes it: opened for the call
    assert cp.board_at(str(tmp_path / "runs.db"), result.run_id, "notes", seqs[1]) == \
        cp.Versioned(["a", "b"], 2)


async def test_a_resumed_run_rebuilds_the_board_from_its_log() -> None:
    g = cp.Graph("resumed", board=cp.Board(keys={"steps": cp.Key(policy="append")}))
    wrote = asyncio.Event()

    async def worker(ctx: cp.NodeContext) -> Any:
        ctx.board.write("steps", f"attempt {ctx.attempt}")
        if ctx.attempt == 1:
            await ctx.flush()
            wrote.set()
            await asyncio.Event().wait()  # the "process" dies here
        return ctx.board.read("steps").value

    g.add("worker", worker)
    store = MemoryStore()
    handle = await cp.start(g, store=store)
    await asyncio.wait_for(wrote.wait(), WAIT)
    await stop_executing(handle)
    result = await cp.resume(handle.run_id, store=store, graph=g)
    assert result["worker"] == ["attempt 1", "attempt 2"]
    assert result.board.get("steps") == cp.Versioned(["attempt 1", "attempt 2"], 2)


async def test_each_mistake_gets_one_clear_error() -> None:
    g = cp.Graph("mistakes", board=cp.Board(keys={"total": cp.Key(policy="sum"),
                                                  "bag": cp.Key(policy="merge")},
                                            default=None))

    def step(ctx: cp.NodeContext) -> list[str]:
        errors = []
        for key, value in (("typo", 1), ("total", "3"), ("bag", [1]), ("total", object())):
            try:
                ctx.board.write(key, value)
            except (cp.BoardConflict, cp.OutputNotSerializable) as exc:
                errors.append(f"{type(exc).__name__} {exc.retryable}: {exc}")
        return errors

    g.add("s", step)
    result, _ = await _run(g)
    typo, text, bag, unjson = result["s"]
    assert typo.startswith("BoardConflict False: run ") and \
        "blackboard key 'typo': the graph's Board declares no such key (and no default); " \
        "declared: ['bag', 'total']" in typo
    # where (run, node, attempt) and what to do, as every other board error says
    assert text.startswith("BoardConflict False: run ") and text.endswith(
        "node 's', attempt 1: blackboard key 'total' (policy sum) takes a finite number, "
        "got '3'; write a number, which is added to the key")
    assert bag.startswith("BoardConflict False: run ") and bag.endswith(
        "node 's', attempt 1: blackboard key 'bag' (policy merge) takes a dict, got list; "
        "write a dict of the entries to merge into the key")
    assert unjson.startswith("OutputNotSerializable False: run ") and \
        "node 's', attempt 1: blackboard key 'total': output of type object" in unjson
    assert result.board.entries == {}

    with pytest.raises(cp.UserError, match="policy 'sometimes' is unknown"):
        cp.Key(policy="sometimes")  # type: ignore[arg-type]
    with pytest.raises(cp.UserError, match="owners apply to policy='owner_only' only"):
        cp.Key(policy="sum", owner="x")
    with pytest.raises(cp.UserError, match="must be a non-empty string without '/'"):
        cp.Board(keys={"a/b": cp.Key()})
    with pytest.raises(cp.UserError, match="lease must be > 0 seconds"):
        cp.WorkQueue(lease=0)


async def test_a_commit_based_on_a_stale_read_set_writes_nothing() -> None:
    g = cp.Graph("commits", board=cp.Board(keys={
        "left": cp.Key(), "right": cp.Key(), "audit": cp.Key(policy="owner_only",
                                                            owner="bank")}))
    read_both = asyncio.Event()
    moved = asyncio.Event()

    async def bank(ctx: cp.NodeContext) -> dict[str, Any]:
        ctx.board.commit({"left": 10, "right": 0})
        tx = ctx.board.transaction()
        left, right = tx.read("left"), tx.read("right")
        read_both.set()
        await asyncio.wait_for(moved.wait(), WAIT)
        tx.write("left", left.value - 5)
        tx.write("right", right.value + 5)
        try:
            tx.commit()
        except cp.BoardConflict as exc:
            stale = str(exc)
        with ctx.board.transaction() as again:  # read afresh, commit on leaving the block
            left, right = again.read("left"), again.read("right")
            again.write("left", left.value - 5)
            again.write("right", right.value + 5)
            again.write("audit", "moved 5")
        return {"stale": stale}

    async def thief(ctx: cp.NodeContext) -> str:
        await asyncio.wait_for(read_both.wait(), WAIT)
        ctx.board.update("left", lambda v: v - 1)
        moved.set()
        ctx.board.read("right")
        try:  # a commit whose one write its policy refuses writes none of them
            ctx.board.commit({"right": 99, "audit": "mine"})
        except cp.BoardConflict as exc:
            return str(exc)
        return "not refused"

    g.add("bank", bank)
    g.add("thief", thief)
    result, store = await _run(g)
    assert "stale: ['left']" in result["bank"]["stale"] and "nothing was written" in \
        result["bank"]["stale"]
    assert "owned by node 'bank'; node 'thief' may not write it" in result["thief"]
    assert result.board.values() == {"left": 4, "right": 5, "audit": "moved 5"}
    assert [w.value for w in result.board.entries["right"].history] == [0, 5]
    outcomes = [(c.key, c.policy, c.outcome) for c in result.board.conflicts]
    assert outcomes == [("audit", "owner_only", "refused"), ("left", "read_set", "raised")]
    writes = [e.data or {} for e in store.events(result.run_id)
              if e.kind is EventKind.BOARD_WRITE and (e.data or {})["key"] == "right"]
    assert writes[-1]["reads"] == {"left": 2, "right": 1}  # the versions it was based on
