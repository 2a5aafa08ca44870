"""An in-memory run store: the reference implementation and the test double."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import orjson

from ..errors import ApprovalAnswered, RunClaimed, RunNotFound
from ..events import Event, EventKind
from ..ids import RunId
from . import owners
from .answers import AnswerCallback
from .base import RunningMeans, RunRecord, RunStore
from .deletion import BLOB_GRACE, Deletion, digests, doomed
from .index import fork_point

_INDEXED = frozenset({EventKind.RUN_CREATED, EventKind.RUN_FINISHED, EventKind.RUN_RESUMED})


class MemoryStore(RunStore):
    """Keeps every run in process memory. Appends are immediately "durable".

    Claims follow the same rule as in any store (:func:`.owners.refusal`), under the
    store's lock: an owner is whichever process last claimed or wrote the run, so a
    claim made for another process's pid is refused while that process lives.
    """

    location = "memory"

    def __init__(self) -> None:
        self._events: dict[RunId, list[Event]] = {}
        self._records: dict[RunId, RunRecord] = {}
        self._steps = RunningMeans()
        self._cancel: set[RunId] = set()
        self._lock = threading.Lock()
        self._watch: dict[RunId, tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = {}
        self._blobs: dict[str, str] = {}
        self._blob_at: dict[str, float] = {}
        """Blob -> when it was last stored (see :mod:`.deletion`)."""
        self._cache: dict[str, str] = {}
        self._cached_at: dict[str, float] = {}
        self._answers: dict[RunId, dict[str, dict[str, Any]]] = {}
        self._answer_watch: dict[RunId, tuple[asyncio.AbstractEventLoop, AnswerCallback]] = {}

    def append(self, run_id: RunId, event: Event) -> None:
        log = self._events.get(run_id)
        if log is None:
            with self._lock:
                log = self._events.setdefault(run_id, [])
        log.append(event)  # atomic under the GIL; readers copy the list under the lock
        if event.kind in _INDEXED:
            with self._lock:
                self._index(run_id, event)

    def _index(self, run_id: RunId, event: Event) -> None:
        me = owners.this_process()
        if event.kind is EventKind.RUN_CREATED:
            data = event.data or {}
            self._records[run_id] = RunRecord(
                run_id=run_id, graph=data.get("graph", "?"), status="running",
                created_at=event.at, updated_at=event.at, parent=data.get("parent"),
                source=data.get("source", {}), options=data.get("options", {}),
                owner_pid=me.pid, owner_host=me.host, owner_token=me.token,
                forked_from=fork_point(data))
            return
        record = self._records.get(run_id)
        if record is None:
            return
        status = record.status
        if event.kind is EventKind.RUN_FINISHED:
            status = (event.data or {}).get("status", "failed")
            self._cancel.discard(run_id)
        elif event.kind is EventKind.RUN_RESUMED:
            status = "running"
        self._records[run_id] = dataclasses.replace(
            record, status=status, updated_at=event.at, owner_pid=me.pid, owner_host=me.host,
            owner_token=me.token)

    async def flush(self) -> None:
        return None

    def settle_when_flushed(self, fut: asyncio.Future[None]) -> None:
        if not fut.done():  # everything is in memory already
            fut.set_result(None)

    def flush_sync(self) -> None:
        return None

    def events(self, run_id: RunId) -> list[Event]:
        with self._lock:
            if run_id not in self._events:
                raise RunNotFound(f"run {run_id} not found in the memory store")
            return [Event(e.kind, e.at, e.node, e.attempt, e.data, e.value, None, e.seq)
                    for e in self._events[run_id]]

    def run(self, run_id: RunId) -> RunRecord:
        with self._lock:
            if run_id not in self._records:
                raise RunNotFound(f"run {run_id} not found in the memory store")
            return self._records[run_id]

    def runs(self, limit: int = 50) -> list[RunRecord]:
        with self._lock:
            ordered = sorted(self._records.values(), key=lambda r: r.created_at, reverse=True)
        return ordered[:limit]

    def top_runs(self, limit: int = 50) -> list[RunRecord]:
        with self._lock:
            top = [r for r in self._records.values() if r.parent is None]
        return sorted(top, key=lambda r: r.created_at, reverse=True)[:limit]

    def claim(self, run_id: RunId, *, pid: int, host: str) -> None:
        by = owners.claimant(pid, host)
        with self._lock:
            record = self._records.get(run_id)
            if record is None:
                raise RunNotFound(f"run {run_id} not found in the memory store")
            refused = owners.refusal(run_id, status=record.status, owner=owners.owner_of(record),
                                     claimed=record.claimed_at is not None, by=by)
            if refused is not None:
                raise RunClaimed(refused)
            if record.status == "running":
                self._records[run_id] = dataclasses.replace(
                    record, owner_pid=by.pid, owner_host=by.host, owner_token=by.token,
                    claimed_at=time.time())

    def release(self, run_id: RunId, *, pid: int, host: str, previous: RunRecord) -> None:
        with self._lock:
            record = self._records.get(run_id)
            if record is not None and (record.owner_pid, record.owner_host) == (pid, host):
                self._records[run_id] = dataclasses.replace(
                    record, owner_pid=previous.owner_pid, owner_host=previous.owner_host,
                    owner_token=previous.owner_token, claimed_at=previous.claimed_at)

    def estimates(self) -> Mapping[str, float]:
        return self._steps.published()

    def record_durations(self, samples: Mapping[str, Sequence[float]]) -> None:
        with self._lock:
            self._steps.fold(samples)

    def request_cancel(self, run_id: RunId) -> None:
        self.run(run_id)
        self._cancel.add(run_id)
        watcher = self._watch.get(run_id)
        if watcher is not None:
            watcher[0].call_soon_threadsafe(watcher[1])

    def watch_cancel(self, run_id: RunId, loop: asyncio.AbstractEventLoop,
                     callback: Callable[[], None]) -> None:
        self._watch[run_id] = (loop, callback)

    def unwatch_cancel(self, run_id: RunId) -> None:
        self._watch.pop(run_id, None)

    def cancel_requests(self) -> set[RunId]:
        return set(self._cancel)

    def answer_approval(self, run_id: RunId, approval_id: str, answer: dict[str, Any]) -> None:
        self.run(run_id)
        with self._lock:
            answers = self._answers.setdefault(run_id, {})
            if approval_id in answers:
                raise ApprovalAnswered(f"approval {approval_id} (run {run_id}) was answered "
                                       "already; the first answer stands")
            answers[approval_id] = dict(answer)
        watcher = self._answer_watch.get(run_id)
        if watcher is not None:
            watcher[0].call_soon_threadsafe(watcher[1], approval_id, dict(answer))

    def approval_answers(self, run_id: RunId) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {k: dict(v) for k, v in self._answers.get(run_id, {}).items()}

    def watch_answers(self, run_id: RunId, loop: asyncio.AbstractEventLoop,
                      callback: AnswerCallback) -> None:
        self._answer_watch[run_id] = (loop, callback)

    def unwatch_answers(self, run_id: RunId) -> None:
        self._answer_watch.pop(run_id, None)

    def put_blob(self, text: str) -> str:
        digest = hashlib.sha256(text.encode()).hexdigest()
        self._blobs.setdefault(digest, text)
        self._blob_at[digest] = time.time()
        return digest

    def blob(self, digest: str) -> str | None:
        return self._blobs.get(digest)

    def cache_get(self, key: str) -> str | None:
        return self._cache.get(key)

    def cache_put(self, key: str, response: str) -> None:
        self._cache[key] = response
        self._cached_at[key] = time.time()

    def cache_age(self, key: str) -> float | None:
        at = self._cached_at.get(key)
        return None if at is None else max(0.0, time.time() - at)

    def delete_runs(self, run_ids: Iterable[RunId], *,
                    blob_grace: float = BLOB_GRACE) -> Deletion:
        """See :meth:`.RunDeletion.delete_runs`: under the store's lock."""
        run_ids = list(run_ids)
        if not run_ids:
            return Deletion()
        with self._lock:
            ids = doomed(run_ids, self._records.get,
                         lambda run_id: RunNotFound(f"run {run_id} not found in the memory "
                                                    "store"),
                         lambda: [r for r, rec in self._records.items()
                                  if rec.parent is not None])
            events = 0
            for run_id in ids:
                events += len(self._events.pop(run_id, ()))
                self._records.pop(run_id, None)
                self._answers.pop(run_id, None)
                self._cancel.discard(run_id)
            before = time.time() - blob_grace
            unused = {h for h, at in self._blob_at.items() if at < before}
            if unused:
                unused -= digests(orjson.dumps([e.data, e.value], default=str).decode()
                                  for log in self._events.values() for e in log)
            for digest in unused:
                del self._blobs[digest], self._blob_at[digest]
            return Deletion(runs=tuple(ids), events=events, blobs=len(unused))

    def close(self) -> None:
        return None
