"""Approvals' answers in the SQLite store: rows of the ``commands`` table (kind
``answer``) whose unique key makes the first answer to an approval the only one."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from typing import Any

from ..errors import ApprovalAnswered
from ..ids import RunId
from .answers import AnswerCallback


def insert(conn: sqlite3.Connection, run_id: RunId, approval_id: str,
           answer: dict[str, Any]) -> None:
    """Record ``answer``, or raise :class:`ApprovalAnswered` if there is one already."""
    try:
        conn.execute("INSERT INTO commands (run_id, kind, created_at, key, payload) "
                     "VALUES (?, 'answer', ?, ?, ?)",
                     (run_id, time.time(), f"answer:{approval_id}", json.dumps(answer)))
    except sqlite3.IntegrityError:
        raise ApprovalAnswered(f"approval {approval_id} (run {run_id}) was answered "
                               "already; the first answer stands") from None


def of_run(conn: sqlite3.Connection, run_id: RunId) -> dict[str, dict[str, Any]]:
    """Every answer recorded for ``run_id``, by approval id."""
    rows = conn.execute("SELECT key, payload FROM commands WHERE run_id = ? AND "
                        "kind = 'answer'", (run_id,)).fetchall()
    return {key.removeprefix("answer:"): json.loads(payload) for key, payload in rows}


def poll(conn: sqlite3.Connection,
         watched: dict[RunId, tuple[asyncio.AbstractEventLoop, AnswerCallback]],
         seen: set[str]) -> None:
    """Hand each answer to a watched run not handed over before to its callback."""
    marks = ",".join("?" * len(watched))
    rows = conn.execute(f"SELECT run_id, key, payload FROM commands WHERE kind = 'answer' "
                        f"AND run_id IN ({marks})", list(watched)).fetchall()
    for run_id, key, payload in rows:
        watcher = watched.get(run_id)
        if watcher is not None and key not in seen:
            seen.add(key)
            watcher[0].call_soon_threadsafe(watcher[1], key.removeprefix("answer:"),
                                            json.loads(payload))
