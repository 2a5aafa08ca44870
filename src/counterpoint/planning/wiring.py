"""How a plan becomes nodes: the subtask nodes, the next verify node and the answer.

The nodes a live edit adds take their results as keyword inputs, one per subtask, named
by :func:`_param` (subtask ids may hold ``.`` and ``-``) and read back by :func:`_unparam`;
:func:`_results_text` shows them to a model next to their subtasks. The ids the graph's own
nodes use (``plan``, ``answer``, ``verify-N``) are reserved: no subtask may take one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..graph import NodeRef
from ..ids import NodeId
from ..patch import Edit
from .fitting import fit
from .plan import Subtask
from .session import _dump, _Session

RESERVED = frozenset({"plan", "answer"})


def _reserved(subtask_id: str) -> bool:
    """Ids the graph's own nodes use (``plan``, ``answer``, ``verify-N``)."""
    return subtask_id in RESERVED or subtask_id.startswith("verify-")


def _add_subtasks(edit: Edit, session: _Session,
                  placed: Sequence[tuple[Subtask, str]]) -> None:
    """Record each subtask and the node holding its result, then add the nodes.

    Recording all of them first lets a subtask need one listed after it.
    """
    for subtask, node in placed:
        session.subtasks[subtask.id] = subtask
        session.latest[subtask.id] = node
    for subtask, node in placed:
        _add_subtask(edit, session, subtask, node)


def _add_subtask(edit: Edit, session: _Session, subtask: Subtask, node: str, *,
                 replace: bool = False) -> None:
    deps = {dep: session.latest[dep] for dep in subtask.needs}
    (edit.replace if replace else edit.add)(
        node, session.steps.work, subtask=_dump(subtask), goal=session.goal,
        **{_param(d): _ref(n) for d, n in deps.items()})


def _add_tail(edit: Edit, session: _Session, *, replace: bool,
              pending_verify: str | None = None) -> None:
    """The next verify node (if rounds remain) and the answer after it.

    ``pending_verify`` (a mid-run re-plan): the verify node that has not started yet; it
    is rewritten in place to judge the plan as it now stands.
    """
    inputs = {_param(sid): _ref(node) for sid, node in session.latest.items()}
    after: list[str] = list(session.latest.values())
    rounds = session.rounds
    if pending_verify is not None:
        edit.replace(pending_verify, session.steps.verify, plan=session.snapshot(rounds),
                     **inputs)
        after = [pending_verify]
        rounds += 1
    elif not session.stopped and session.used < session.limits.max_rounds:
        verify_id = f"verify-{session.rounds + 1}"
        edit.add(verify_id, session.steps.verify, plan=session.snapshot(rounds), **inputs)
        after = [verify_id]
        rounds += 1
    (edit.replace if replace else edit.add)("answer", session.steps.answer, after=after,
                                            plan=session.snapshot(rounds), **inputs)


def _results_text(session: _Session, results: Mapping[str, Any]) -> str:
    by_id = {_unparam(k): _text(v) for k, v in results.items()}
    fitted = fit(by_id, session.limits.context_chars)
    lines = []
    for sid, subtask in session.subtasks.items():
        expected = f" (expected: {subtask.expected})" if subtask.expected else ""
        lines.append(f"[{sid}] {subtask.task}{expected}\nresult: {fitted.get(sid, '(none)')}")
    return "\n\n".join(lines)


def _param(subtask_id: str) -> str:
    """A keyword-safe parameter name for a subtask id (ids may hold ``.`` and ``-``)."""
    return "r_" + "".join(c if c.isalnum() else f"_{ord(c):x}_" for c in subtask_id)


def _unparam(name: str) -> str:
    body = name[2:]
    out, i = [], 0
    while i < len(body):
        if body[i] == "_":
            end = body.index("_", i + 1)
            out.append(chr(int(body[i + 1:end], 16)))
            i = end + 1
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def _ref(node: str) -> Any:
    return NodeRef(NodeId(node))


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
