"""The page's model of a run (counterpoint.ui.projection): what a live page is sent."""

from __future__ import annotations

import pytest

import counterpoint as cp
from counterpoint.events import Event, EventKind
from counterpoint.store import MemoryStore, RunRecord
from counterpoint.ui import projection
from counterpoint.ui.projection import RunView


def _chain() -> tuple[RunRecord, list[Event], int]:
    """A finished run of a -> b -> c (its owner, this process, still runs), its log, and
    the position in the log just after a succeeded."""
    g = cp.Graph("chain")
    g.add("c", lambda b: b + 1, b=g.add("b", lambda a: a + 1, a=g.add("a", lambda: 1)))
    store = MemoryStore()
    result = cp.run_sync(g, store=store)
    events = store.events(result.run_id)
    record = store.run(result.run_id)
    store.close()
    split = next(i for i, ev in enumerate(events)
                 if ev.kind is EventKind.NODE_SUCCEEDED and ev.node == "a") + 1
    return record, events, split


def test_an_update_holds_the_nodes_that_changed_and_then_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(projection, "METRICS_SECONDS", 0.0)  # metrics at every update
    record, events, split = _chain()
    view = RunView(record)
    view.feed(events[:split])
    first = view.snapshot()
    assert first["reshaped"] and {n["id"]: n["status"] for n in first["nodes"]} == {
        "a": "succeeded", "b": "pending", "c": "pending"}
    assert view.update() is None
    view.feed(events[split:], record)
    later = view.update()
    assert later is not None and not later["reshaped"]
    assert sorted(n["id"] for n in later["nodes"]) == ["b", "c"]  # a did not change again
    assert later["run"]["status"] == "succeeded" and later["seq"] == events[-1].seq
    assert later["critical"] == ["a", "b", "c"]
    assert view.update() is None


def test_metrics_held_back_on_a_live_run_are_sent_fresh_at_the_next_look(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(projection, "SMALL_RUN", 0)  # held back as for a large run
    monkeypatch.setattr(projection, "METRICS_SECONDS", 3600.0)
    record, events, split = _chain()
    view = RunView(record)
    view.feed(events[:split])
    assert view.snapshot()["critical"] == ["a"]
    view.feed(events[split:], record)
    held = view.update()
    assert held is not None and held["critical"] == ["a"]  # computed before b and c ran
    monkeypatch.setattr(projection, "METRICS_SECONDS", 0.0)
    fresh = view.update()  # no new event: only the metrics were behind
    assert fresh is not None and fresh["nodes"] == [] and fresh["critical"] == ["a", "b", "c"]
    assert view.update() is None


def _release() -> cp.Graph:
    async def deploy(ctx: cp.NodeContext) -> str:
        return str(await ctx.ask("deploy v2 to prod?", {"version": "v2"}))

    g = cp.Graph("release")
    g.add("deploy", deploy)
    return g


def test_a_wait_for_a_person_is_sent_from_its_request_to_its_end() -> None:
    import asyncio
    store = MemoryStore()
    g = _release()
    waiting = cp.run_sync(g, store=store, options=cp.RunOptions(detach_when_waiting=True))
    view = RunView(store.run(waiting.run_id))
    view.feed(store.events(waiting.run_id))
    [node] = view.snapshot()["nodes"]
    [asked] = [ev for ev in store.events(waiting.run_id)
               if ev.kind is EventKind.APPROVAL_REQUESTED]
    assert node["status"] == "waiting" and node["asked"] == [[asked.at, None]]

    cp.approve(store, str((asked.data or {})["id"]))
    asyncio.run(cp.resume(waiting.run_id, store=store, graph=g))
    events = store.events(waiting.run_id)
    view.feed(events[view.seq:], store.run(waiting.run_id))
    [node] = view.update()["nodes"]  # type: ignore[index]
    # the detached run's wait ends where the terminal's Gantt ends it: at the resume
    # that takes the answer up (the answer is recorded in the log after it)
    [resumed] = [ev for ev in events if ev.kind is EventKind.RUN_RESUMED]
    assert node["status"] == "succeeded" and node["asked"] == [[asked.at, resumed.at]]
    store.close()
