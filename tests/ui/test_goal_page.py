"""A goal run's page tells its story as ``counterpoint show`` does (one projection,
counterpoint.goal_story): the goal, each round and the answer, in a real headless
chromium; a live page is sent the story again only when it changed.

Regression: the page showed a goal run's nodes and metrics only."""

from __future__ import annotations

from typing import Any

from goal_runs import ANSWER, GOAL, goal_run

import counterpoint as cp
from counterpoint.cli.recorded import log_report
from counterpoint.events import EventKind
from counterpoint.store import MemoryStore, RunStore
from counterpoint.ui.projection import RunView
from counterpoint.ui.server import Server


def test_a_goal_runs_page_shows_the_goal_the_rounds_and_the_answer(
        served: Server, ui_store: RunStore, page: Any) -> None:
    run = goal_run(ui_store)
    story = log_report(ui_store.run(run.run_id), ui_store.events(run.run_id)).goal
    assert story is not None  # what `counterpoint show` prints
    page.goto(f"{served.base}/runs/{run.run_id}")
    page.wait_for_selector("#goal-answer pre")
    assert page.inner_text("#goal-text") == GOAL
    assert page.inner_text("#goal-counts") == "1 plan, 2 verify, 1 re-plan"
    shown = page.locator("#goal-rounds li").all_inner_texts()
    assert shown == [f"{r['summary']} {r['node']}" for r in story["rounds"]]
    assert page.locator("#goal-rounds li[data-phase]").evaluate_all(
        "items => items.map(li => li.dataset.phase)") == ["plan", "verify", "replan", "verify"]
    assert page.inner_text("#goal-answer pre") == ANSWER
    assert "cites t1, t3" in page.inner_text("#goal-answer")
    page.click("#goal-rounds li:nth-child(3) a")  # the re-plan's node: verify-1
    page.wait_for_selector("#detail h3:has-text('verify-1')")
    # the critical path the page marks begins with the planning, as show's does
    data = page.evaluate(f"fetch('/api/runs/{run.run_id}').then(r => r.json())")
    assert data["critical"][0] == "plan" and data["goal"]["rounds"] == story["rounds"]


def test_a_live_page_is_sent_the_story_when_it_changes_and_not_otherwise() -> None:
    store = MemoryStore()
    run = goal_run(store)
    events = store.events(run.run_id)
    record = store.run(run.run_id)
    verdict = next(i for i, ev in enumerate(events) if ev.kind is EventKind.PLAN_ROUND
                   and (ev.data or {}).get("phase") == "verify")
    view = RunView(record)
    view.feed(events[:verdict])  # planned, the subtasks done, verify-1 running
    first = view.snapshot()["goal"]
    assert [r["phase"] for r in first["rounds"]] == ["plan"] and first["answer"] is None
    view.feed(events[verdict:verdict + 1], record)  # verify-1's verdict: no new node
    judged = view.update()
    assert judged is not None and not judged["reshaped"]
    assert [r["phase"] for r in judged["goal"]["rounds"]] == ["plan", "verify"]
    view.feed(events[verdict + 1:verdict + 2], record)  # a model call: the story is the same
    later = view.update()
    assert later is not None and "goal" not in later


def test_a_run_of_no_goal_has_no_story() -> None:
    g = cp.Graph("plain")
    g.add("a", lambda: 1)
    store = MemoryStore()
    run = cp.run_sync(g, store=store)
    view = RunView(store.run(run.run_id))
    view.feed(store.events(run.run_id))
    assert view.snapshot()["goal"] is None
