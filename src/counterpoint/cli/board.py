"""The blackboard part of ``counterpoint show``: keys, versions, conflicts, queues, claims.

Built from the run's projected state (:attr:`RunState.board`, folded from the log like
the rest of it), so it shows exactly what was logged, also after a crash.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

from ..board.projection import BoardState
from ..state import NodeStatus, RunState

KEY_ROWS = 20
CONFLICT_ROWS = 10
ITEM_ROWS = 10
VALUE_CHARS = 60


def _value(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS - 1] + "…"


def board_section(state: RunState) -> list[Text]:
    """Lines describing the run's blackboard (none if the run never used one)."""
    board = state.board
    if board is None:
        return []
    lines = [Text.assemble(("board     ", "bold"), f"{len(board.entries)} key(s), "
                           f"{len(board.conflicts)} conflict(s), {len(board.queues)} "
                           f"queue(s), {len(board.denied)} call(s) refused")]
    for name, entry in list(board.entries.items())[:KEY_ROWS]:
        last = entry.history[-1] if entry.history else None
        extra = f"  {entry.conflicts} conflict(s)" if entry.conflicts else ""
        owner = f"  owner {entry.owner}" if entry.owner else ""
        by = f"  last by {last.node} ({last.op})" if last is not None else ""
        lines.append(Text(f"  {name}  v{entry.version} = {_value(entry.value)}{by}{owner}"
                          f"{extra}"))
    if len(board.entries) > KEY_ROWS:
        lines.append(Text(f"  … {len(board.entries) - KEY_ROWS} more key(s)", style="dim"))
    for conflict in board.conflicts[-CONFLICT_ROWS:]:
        lines.append(Text(f"  conflict #{conflict.seq} {conflict.key} ({conflict.policy}, "
                          f"{conflict.outcome}) by {conflict.node}: {conflict.message}",
                          style="yellow"))
    lines.extend(_queues(board, state))
    for denial in board.denied[-CONFLICT_ROWS:]:
        lines.append(Text(f"  refused #{denial.seq} {denial.role} in node {denial.node} "
                          f"({denial.what}): {denial.reason}", style="red"))
    return lines


def _queues(board: BoardState, state: RunState) -> list[Text]:
    lines: list[Text] = []
    for name, queue in board.queues.items():
        counts = queue.counts()
        expired = sum(i.expired for i in queue.items.values())
        lines.append(Text.assemble(
            (f"queue {name}: ", "bold"), f"{counts['done']} done, {counts['claimed']} "
            f"claimed, {counts['open']} open" + (f" ({expired} claim(s) expired)"
                                                  if expired else "")))
        notable = [i for i in queue.items.values() if i.status == "claimed" or i.expired]
        for item in notable[:ITEM_ROWS]:
            holder = f"{item.holder[0]} attempt {item.holder[1]}" if item.holder else "nobody"
            if item.status == "claimed" and item.holder is not None:
                ns = state.nodes.get(item.holder[0])
                alive = ns is not None and ns.attempt == item.holder[1] and \
                    ns.status is NodeStatus.RUNNING
                what = f"claimed by {holder}" + ("" if alive else " (that attempt ended)")
            elif item.status == "done":
                what = f"done by {holder} = {_value(item.result)}"
            else:
                what = "open"
            lines.append(Text(f"  {item.id}  {what}; claim {item.claim}, {item.expired} "
                              "expired"))
        if len(notable) > ITEM_ROWS:
            lines.append(Text(f"  … {len(notable) - ITEM_ROWS} more", style="dim"))
    return lines


def board_payload(state: RunState) -> dict[str, Any] | None:
    """The JSON form of the run's blackboard for ``show --json``."""
    board = state.board
    if board is None:
        return None
    return {
        "keys": {k: {"value": e.value, "version": e.version, "owner": e.owner,
                     "conflicts": e.conflicts} for k, e in board.entries.items()},
        "conflicts": [{"seq": c.seq, "key": c.key, "policy": c.policy, "outcome": c.outcome,
                       "node": c.node, "message": c.message} for c in board.conflicts],
        "queues": {name: {"counts": q.counts(), "items": {
            i.id: {"status": i.status, "claim": i.claim, "expired": i.expired,
                   "holder": list(i.holder) if i.holder else None, "result": i.result}
            for i in q.items.values()}} for name, q in board.queues.items()},
        "denied": [{"seq": d.seq, "node": d.node, "role": d.role, "what": d.what,
                    "reason": d.reason} for d in board.denied],
    }
