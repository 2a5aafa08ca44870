"""A run's Gantt chart (counterpoint.pictures.gantt), from the log of a real run: queued
time and retry back-off drawn apart from attempts, failed attempts marked, the critical
path outlined, an unfinished run drawn up to where its log ends."""

from __future__ import annotations

import asyncio
import itertools
import re
import xml.etree.ElementTree as ET

import counterpoint as cp
from counterpoint.events import Event, EventKind
from counterpoint.ids import NodeId
from counterpoint.pictures.gantt import gantt_html, gantt_svg, timeline
from counterpoint.policy import Backoff

SVG = "{http://www.w3.org/2000/svg}"


def recorded_run() -> tuple[cp.RunResult, list[Event]]:
    calls = {"n": 0}

    async def slow(x: int = 0) -> int:
        await asyncio.sleep(0.02)
        return x + 1

    async def flaky(x: int) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("first call fails")
        return x

    async def explode(x: int) -> int:
        raise ValueError("always")

    g = cp.Graph("chart")
    a = g.add("a", slow)
    b = g.add("b", slow)  # with one slot, b or a waits: a queued stretch
    f = g.add("flaky", flaky, x=a, retries=2, policy=cp.Policy(
        backoff=Backoff(initial=0.05, jitter=0.0)))
    g.add("boom", explode, x=b)
    g.add("last", slow, x=f)
    store = cp.MemoryStore()
    result = cp.run_sync(g, store=store, options=cp.RunOptions(max_concurrency=1))
    return result, store.events(result.run_id)


def test_each_attempt_queued_time_and_back_off_is_a_bar_of_its_own() -> None:
    result, events = recorded_run()
    line = timeline(result.run_id, events, critical=result.metrics.critical_path_nodes)
    rows = {row.node: row for row in line.rows}
    assert set(rows) == {"a", "b", "flaky", "boom", "last"}
    assert line.status == "failed" and line.note == "" and line.graph == "chart"
    flaky = [(bar.kind, bar.outcome) for bar in rows[NodeId("flaky")].bars]
    assert ("run", "failed") in flaky and ("backoff", "") in flaky
    assert flaky[-1] == ("run", "succeeded")
    assert flaky.index(("run", "failed")) < flaky.index(("backoff", "")) < len(flaky) - 1
    assert [b.outcome for b in rows[NodeId("boom")].bars if b.kind == "run"] == ["failed"]
    queued = [bar for row in line.rows for bar in row.bars if bar.kind == "queued"]
    assert queued, "one slot for two ready nodes: one of them waited"
    for row in line.rows:
        starts = [(bar.start, bar.end) for bar in row.bars]
        assert all(s <= e for s, e in starts)
        assert all(e1 <= s2 + 1e-9 for (_, e1), (s2, _) in itertools.pairwise(starts))
        assert all(line.start <= s and e <= line.end for s, e in starts)
    assert line.critical == set(result.metrics.critical_path_nodes) and line.critical


def test_the_svg_marks_failed_attempts_and_outlines_the_critical_path() -> None:
    result, events = recorded_run()
    line = timeline(result.run_id, events, critical=result.metrics.critical_path_nodes)
    root = ET.fromstring(gantt_svg(line))
    bars = [r for r in root.iter(f"{SVG}rect") if (r.get("class") or "").startswith("bar")]
    failed = [r for r in bars if r.get("class") == "bar run failed"]
    assert len(failed) == 2  # flaky's first attempt and boom's only one
    outlined = {r.find(f"{SVG}title").text.split(" attempt")[0]  # type: ignore[union-attr]
                for r in bars if r.get("stroke") == "#000"}
    assert outlined == {str(n) for n in result.metrics.critical_path_nodes}
    assert any(r.get("class") == "bar backoff" for r in bars)
    labels = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "node"]
    assert sorted(labels) == ["a", "b", "boom", "flaky", "last"]
    assert not [t for t in root.iter(f"{SVG}text") if t.get("class") == "status"]


def test_a_node_that_never_ran_says_why() -> None:
    async def fail() -> int:
        raise ValueError("no")

    async def after(x: int) -> int:
        return x

    g = cp.Graph("blocked")
    g.add("after", after, x=g.add("fail", fail))
    store = cp.MemoryStore()
    result = cp.run_sync(g, store=store)
    root = ET.fromstring(gantt_svg(timeline(result.run_id, store.events(result.run_id))))
    assert [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "status"] == \
        ["blocked"]


def test_the_html_page_is_self_contained() -> None:
    result, events = recorded_run()
    page = gantt_html(timeline(result.run_id, events))
    assert page.startswith("<!doctype html>") and "<svg" in page
    assert "<script" not in page and "<link" not in page
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"]


def test_a_run_whose_process_died_is_drawn_up_to_its_last_event() -> None:
    result, events = recorded_run()
    cut = next(i for i, e in enumerate(events)
               if e.kind is EventKind.NODE_STARTED and e.node == "last")
    line = timeline(result.run_id, events[:cut + 1])
    assert line.status == "interrupted" and "process is gone" in line.note
    assert line.end == events[cut].at
    last = {row.node: row for row in line.rows}[NodeId("last")].bars
    assert [(b.kind, b.outcome) for b in last] == [("run", "interrupted")]
    live = timeline(result.run_id, events[:cut + 1], live=True, now=events[cut].at + 5)
    assert live.status == "running" and live.end == events[cut].at + 5
    assert "still running" in live.note
    running = {row.node: row for row in live.rows}[NodeId("last")].bars[-1]
    assert running.outcome == "running" and running.end == live.end


def test_waiting_for_an_approval_is_drawn_over_the_attempt_that_asked() -> None:
    async def gate(ctx: cp.NodeContext) -> bool:
        return (await ctx.ask("ship it?")).approved

    g = cp.Graph("release")
    g.add("gate", gate)
    store = cp.MemoryStore()

    async def scenario() -> cp.RunResult:
        handle = await cp.start(g, store=store)
        async for event in handle.events():
            if event.kind is EventKind.APPROVAL_REQUESTED:
                cp.approve(store, (event.data or {})["id"], by="lead")
                break
        return await handle.result()

    result = asyncio.run(scenario())
    assert result.ok
    line = timeline(result.run_id, store.events(result.run_id))
    [row] = line.rows
    kinds = sorted(bar.kind for bar in row.bars)
    assert kinds == ["approval", "run"]
    run = next(b for b in row.bars if b.kind == "run")
    wait = next(b for b in row.bars if b.kind == "approval")
    assert run.start <= wait.start <= wait.end <= run.end  # inside the attempt
    svg = gantt_svg(line)
    assert svg.index('class="bar run succeeded"') < svg.index('class="bar approval"')
    assert "waiting for a person (an approval)" in svg and ">approval</text>" in svg
