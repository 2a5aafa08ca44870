"""The PostgreSQL store's command bus and answer box: rows of ``cp_commands``, announced
with ``NOTIFY`` and heard with ``LISTEN``.

A cancel request or an approval's answer is one row, inserted with a ``NOTIFY`` on
:data:`CHANNEL` in the same transaction (PostgreSQL delivers it at the commit), from any
process on any machine. A :class:`Listener` thread, started by the first watch, keeps one
autocommit connection that listens; each notification (and, as a fallback for one
missed while reconnecting, every :data:`POLL_SECONDS`) makes it read the open rows of
the runs it watches and hand each new one to its watcher's loop. The unique ``key`` of
an answer's row makes the first answer to an approval the only one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from ..errors import ApprovalAnswered
from ..ids import RunId
from .answers import AnswerCallback
from .postgres_url import connect

CHANNEL = "cp_commands"
POLL_SECONDS = 2.0
"""How often the listener reads the table without a notification (a notification sent
while its connection was down is not replayed)."""
_Conn = psycopg.Connection[tuple[Any, ...]]


def request_cancel(conn: _Conn, run_id: RunId) -> None:
    """Record a cancel request for ``run_id`` and announce it (commits)."""
    with conn.transaction():
        conn.execute("INSERT INTO cp_commands (run_id, kind, created_at) VALUES "
                     "(%s, 'cancel', %s)", (run_id, time.time()))
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, run_id))


def answer(conn: _Conn, run_id: RunId, approval_id: str, answer: dict[str, Any]) -> None:
    """Record ``answer`` and announce it, or raise :class:`ApprovalAnswered`."""
    try:
        with conn.transaction():
            conn.execute("INSERT INTO cp_commands (run_id, kind, created_at, key, payload) "
                         "VALUES (%s, 'answer', %s, %s, %s)",
                         (run_id, time.time(), f"answer:{run_id}:{approval_id}",
                          json.dumps(answer)))
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, run_id))
    except psycopg.errors.UniqueViolation:
        raise ApprovalAnswered(f"approval {approval_id} (run {run_id}) was answered "
                               "already; the first answer stands") from None


def answers_of(conn: _Conn, run_id: RunId) -> dict[str, dict[str, Any]]:
    """Every answer recorded for ``run_id``'s approvals, by approval id."""
    prefix = f"answer:{run_id}:"
    rows = conn.execute("SELECT key, payload FROM cp_commands WHERE run_id = %s AND "
                        "kind = 'answer' ORDER BY id", (run_id,)).fetchall()
    return {str(key).removeprefix(prefix): json.loads(payload) for key, payload in rows}


def open_cancels(conn: _Conn) -> set[RunId]:
    """Runs still running whose cancel was requested and not yet answered by a finish."""
    rows = conn.execute("SELECT DISTINCT c.run_id FROM cp_commands c JOIN cp_runs r "
                        "ON r.run_id = c.run_id WHERE NOT c.done AND c.kind = 'cancel' "
                        "AND r.status = 'running'").fetchall()
    return {RunId(r[0]) for r in rows}


class Listener:
    """Watches ``cp_commands`` for the runs of one store (see the module docstring).
    Safe to call from any thread; callbacks run on their watchers' loops."""

    def __init__(self, url: str, *, lock_timeout: float) -> None:
        self.url, self.lock_timeout = url, lock_timeout
        self.cancel_watch: dict[RunId, tuple[asyncio.AbstractEventLoop, Callable[[], None]]] \
            = {}
        self.answer_watch: dict[RunId, tuple[asyncio.AbstractEventLoop, AnswerCallback]] = {}
        self._cancel_seen: set[RunId] = set()
        self._answers_seen: set[str] = set()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stop = False
        self._conn: _Conn | None = None

    def start(self) -> None:
        """Start listening unless it does already; returns once ``LISTEN`` is in place,
        so a command sent after a watch begins is heard."""
        with self._lock:
            if self._thread is not None:
                return
            self._conn = self._listen()
            self._thread = threading.Thread(target=self._loop, name="counterpoint-pg-listen",
                                            daemon=True)
            self._thread.start()

    def _listen(self) -> _Conn:
        conn = connect(self.url, lock_timeout=self.lock_timeout, autocommit=True)
        conn.execute(f"LISTEN {CHANNEL}")
        return conn

    def stop(self, waker: _Conn | None) -> None:
        """Stop the thread: ``waker`` (any connection) sends the notification that ends
        its wait at once. Idempotent."""
        self._stop = True
        thread, self._thread = self._thread, None
        if thread is None:
            return
        if waker is not None:
            with contextlib.suppress(psycopg.Error):
                waker.execute("SELECT pg_notify(%s, '')", (CHANNEL,))
                waker.commit()
        thread.join()

    def _loop(self) -> None:
        while not self._stop:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = self._listen()
                self._deliver(self._conn)
                for _ in self._conn.notifies(timeout=POLL_SECONDS, stop_after=1):
                    pass
            except Exception:  # a dropped connection (or a closed loop): start again
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                if not self._stop:
                    time.sleep(0.2)  # a backoff before reconnecting
        if self._conn is not None:
            self._conn.close()

    def _deliver(self, conn: _Conn) -> None:
        cancels, answers = dict(self.cancel_watch), dict(self.answer_watch)
        if cancels:
            rows = conn.execute("SELECT DISTINCT run_id FROM cp_commands WHERE NOT done AND "
                                "kind = 'cancel' AND run_id = ANY(%s)",
                                (list(cancels),)).fetchall()
            for (run_id,) in rows:
                watcher = cancels.get(run_id)
                if watcher is not None and run_id not in self._cancel_seen:
                    self._cancel_seen.add(run_id)
                    watcher[0].call_soon_threadsafe(watcher[1])
        if answers:
            rows = conn.execute("SELECT run_id, key, payload FROM cp_commands WHERE "
                                "kind = 'answer' AND run_id = ANY(%s) ORDER BY id",
                                (list(answers),)).fetchall()
            for run_id, key, payload in rows:
                answering = answers.get(run_id)
                if answering is not None and key not in self._answers_seen:
                    self._answers_seen.add(key)
                    answering[0].call_soon_threadsafe(
                        answering[1], str(key).removeprefix(f"answer:{run_id}:"),
                        json.loads(payload))
