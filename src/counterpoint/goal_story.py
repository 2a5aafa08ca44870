"""A goal run's story as its log records it: the goal, each planning round (the plan,
every verify, every re-plan and check, with what each decided and why) and the answer.

``counterpoint show`` prints it and the web view draws it; both take it from here, from
the run's events alone (``plan_round``, ``topology_chosen``, the edits' recorded inputs
and the ``answer`` node's output), so a finished run read in a fresh process tells the
same story as the terminal did while it ran. :class:`GoalStory` folds events in as they
arrive (the web view follows a live run with one); :func:`goal_story` folds a whole log.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .events import Event, EventKind
from .plan_text import round_lines
from .texts import some

__all__ = ["ANSWER_NODE", "GoalStory", "goal_story"]

ANSWER_NODE = "answer"
"""The node that writes a goal run's answer (:mod:`counterpoint.planning.wiring`)."""
GAPS_SHOWN = 3
"""Most gaps a verify round's summary names (the round's ``gaps`` holds them all)."""


class GoalStory:
    """A goal run's story, folded in from its events as they arrive (in log order).

    :attr:`changed` says whether the story changed since the caller last cleared it.
    """

    def __init__(self) -> None:
        self.goal: str | None = None
        self.rounds: list[dict[str, Any]] = []
        self.answer: dict[str, Any] | None = None
        self.changed = False
        self._verdicts: dict[tuple[str, Any], list[str]] = {}
        """The gaps of each verify round and each re-check (by phase and round or
        subtask): what a re-plan that follows answers."""

    def feed(self, events: Iterable[Event]) -> GoalStory:
        """Fold ``events`` (the ones after those already folded, in order) in."""
        for ev in events:
            kind = ev.kind
            if kind is EventKind.PLAN_ROUND and ev.data:
                self._round(ev)
            elif kind is EventKind.TOPOLOGY_CHOSEN and ev.data:
                self._topology(ev.data)
            elif kind is EventKind.PATCH_APPLIED and self.goal is None and ev.data:
                self._goal_of_edit(ev.data)
            elif kind is EventKind.NODE_SUCCEEDED and ev.node == ANSWER_NODE and self.rounds:
                self._answer(ev)
        return self

    def view(self) -> dict[str, Any] | None:
        """The story as JSON-ready data (``None`` for a run that is not a goal run):
        ``goal``, ``rounds`` (each with ``phase``, ``node``, ``summary`` and what it
        decided), ``verify_rounds``, ``replans`` and ``answer`` (text and cited subtasks,
        once the answer node succeeded)."""
        if not self.rounds:
            return None
        return {"goal": self.goal, "rounds": [dict(r) for r in self.rounds],
                "verify_rounds": sum(r["phase"] == "verify" for r in self.rounds),
                "replans": sum(r["phase"] == "replan" for r in self.rounds),
                "answer": self.answer}

    # ------------------------------------------------------------ folding
    def _round(self, ev: Event) -> None:
        data = ev.data or {}
        phase = str(data.get("phase"))
        self.changed = True
        if phase == "plan":
            self._plan(ev, data)
            return
        entry: dict[str, Any] = {"phase": phase, "node": ev.node, "at": ev.at}
        if phase == "verify":
            gaps = [str(g.get("problem", "")) + (f" ({g['subtask']})" if g.get("subtask")
                                                  else "") for g in data.get("gaps") or ()]
            self._verdicts[("verify", data.get("round"))] = gaps
            complete = bool(data.get("complete")) and not gaps
            entry.update(round=data.get("round"), verdict="complete" if complete else "gaps",
                         gaps=gaps, stop=data.get("stop"))
            entry["summary"] = f"verify {data.get('round')}: " + (
                "complete" if complete else
                f"{len(gaps)} gap(s): {some(gaps, GAPS_SHOWN)}" if gaps else "incomplete") + (
                f"; stopping: {data['stop']}" if data.get("stop") else "")
        elif phase == "replan":
            midrun = bool(data.get("midrun"))
            why = self._verdicts.get(("recheck", data.get("after")) if midrun
                                     else ("verify", data.get("round")), [])
            if data.get("failed"):  # an escalated failure, not a verdict
                why = [f"{data.get('after')} failed: {str(data['failed'])[:160]}"]
            entry.update(round=data.get("round"), midrun=midrun, after=data.get("after"),
                         why=why, applied=bool(data.get("applied")),
                         added=list(data.get("added") or ()),
                         redone=list(data.get("redone") or ()),
                         cancelled=list(data.get("cancelled") or ()),
                         problems=list(data.get("problems") or ()), stop=data.get("stop"))
            entry["summary"] = _replan_summary(entry)
        else:  # a checked subtask: check, recheck
            if phase == "recheck":
                self._verdicts[("recheck", data.get("subtask"))] = [
                    str(g) for g in data.get("gaps") or ()]
            entry.update(subtask=data.get("subtask"), gaps=list(data.get("gaps") or ()),
                         redone=bool(data.get("redone")))
            entry["summary"] = " ".join(round_lines(data)) or phase
        self.rounds.append(entry)

    def _plan(self, ev: Event, data: Mapping[str, Any]) -> None:
        """A plan attempt: attempts of one ``plan`` node's planning are one round."""
        if isinstance(data.get("goal"), str):
            self.goal = data["goal"]
        last = self.rounds[-1] if self.rounds else None
        if last is None or last["phase"] != "plan" or last["final"] or last["node"] != ev.node:
            last = {"phase": "plan", "node": ev.node, "at": ev.at, "attempts": 0,
                    "rejected": [], "final": False, "subtasks": [], "decompose": None,
                    "repairs": [], "topology": None, "why": None}
            self.rounds.append(last)
        problems = [str(p) for p in data.get("problems") or ()]
        repaired = data.get("attempt") == "repaired"
        if not repaired:
            last["attempts"] += 1
        if problems:
            last["rejected"].append({"attempt": data.get("attempt"), "problems": problems})
        plan = data.get("plan")
        if isinstance(plan, Mapping) and (repaired or not problems):
            last.update(final=True, decompose=plan.get("decompose"),
                        subtasks=[str(s.get("id")) for s in plan.get("subtasks") or ()],
                        repairs=list(data.get("repairs") or ()))
        last["summary"] = _plan_summary(last)

    def _topology(self, data: Mapping[str, Any]) -> None:
        plan = next((r for r in reversed(self.rounds) if r["phase"] == "plan"), None)
        if plan is None:
            return
        plan.update(topology=data.get("shape"), why=data.get("why"))
        plan["summary"] = _plan_summary(plan)
        self.changed = True

    def _goal_of_edit(self, data: Mapping[str, Any]) -> None:
        """The goal as an edit recorded it (a log written before plan rounds named it):
        a subtask's ``goal`` input, or a verify or answer node's ``plan``."""
        for spec in data.get("add") or ():
            inputs = spec.get("inputs") or {}
            for name, key in (("goal", None), ("plan", "goal")):
                value = (inputs.get(name) or {}).get("$lit") if isinstance(
                    inputs.get(name), Mapping) else None
                if key is not None and isinstance(value, Mapping):
                    value = value.get(key)
                if isinstance(value, str):
                    self.goal = value
                    self.changed = True
                    return

    def _answer(self, ev: Event) -> None:
        try:
            value = json.loads(ev.value) if ev.value is not None else ev.output
        except ValueError:
            return
        if isinstance(value, Mapping) and isinstance(value.get("answer"), str):
            self.answer = {"node": ev.node, "text": value["answer"],
                           "cited": [str(c) for c in value.get("cited") or ()]}
            self.changed = True


def goal_story(events: Iterable[Event]) -> dict[str, Any] | None:
    """The story of the run whose log is ``events`` (:meth:`GoalStory.view`)."""
    return GoalStory().feed(events).view()


def _plan_summary(entry: Mapping[str, Any]) -> str:
    ids = entry["subtasks"]
    tries = entry["attempts"]
    if not entry["final"]:
        head = f"plan: no valid plan after {tries} attempt{'s' if tries != 1 else ''}"
    elif entry["decompose"] is False or len(ids) == 1:
        head = f"plan: not decomposed, one subtask ({some(ids)})"
    else:
        head = f"plan: {len(ids)} subtasks ({some(ids, 8)})"
    if entry["topology"]:
        head += f", {entry['topology']}" + (f" ({entry['why']})" if entry["why"] else "")
    if entry["final"] and tries > 1:
        head += f"; {tries} attempts"
    if entry["rejected"]:
        last = entry["rejected"][-1]
        head += f"; attempt {last['attempt']} refused: {some(last['problems'], 2)}"
    if entry["repairs"]:
        head += f"; repaired: {'; '.join(entry['repairs'])}"
    return head


def _replan_summary(entry: Mapping[str, Any]) -> str:
    if entry["midrun"]:
        head = f"re-plan after the check of {entry['after']} (round {entry['round']})"
    else:
        head = f"re-plan {entry['round']}"
    if entry["why"]:
        head += f", for {some(entry['why'], GAPS_SHOWN)}"
    if entry["stop"] and not entry["applied"]:
        return f"{head}: not asked, stopping: {entry['stop']}"
    if not entry["applied"]:
        return f"{head}: no valid edit ({'; '.join(entry['problems'])[:160]})"
    done = [f"added {some(entry['added'])}" if entry["added"] else "",
            f"redoing {some(entry['redone'])}" if entry["redone"] else "",
            f"cancelled {some(entry['cancelled'])}" if entry["cancelled"] else ""]
    return f"{head}: " + (", ".join(d for d in done if d) or "no change")
