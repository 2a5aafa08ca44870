"""Which endpoint of a replicated model serves a call: a workflow sticks to its replica (M35).

A model name may be served by several endpoints (``base_urls = [...]`` in
``counterpoint.toml``): replicas of one engine, each with a prefix cache of its own. A
workflow's calls share long prefixes (its system prompt, its documents, the
conversation so far), so sending them all to the replica that served the first one
turns their prefill into cache hits; spreading them round-robin makes every replica
prefill every prefix.

``balance = "sticky"`` (the default) ranks the replicas per workflow by rendezvous
hashing (highest random weight: ``sha256(workflow | url)``), so a workflow always
prefers the same replica and adding or removing one moves only the workflows that
preferred it. The preference yields to load, as in consistent hashing with bounded
loads: a replica takes a new call while it has a free slot (fewer calls in flight than
the model's ``max_concurrency``, which is per replica) or while its calls in flight
stay within ``slack`` times the mean over the replicas (rounded up); otherwise the next
replica in the workflow's order does. A call that would only queue at its workflow's
replica goes where a slot is free, and one that would queue everywhere waits at the
replica that holds its prefix. Calls made outside any run share one anonymous workflow.

``balance = "round_robin"`` hands calls to the replicas in turn (the baseline the
scheduling benchmark compares with).

The order is also the failover order: a call whose replica could not be reached
(:class:`~counterpoint.errors.ModelUnavailable` after its retries) is tried on the next
replica before the model's fallbacks. The state (calls in flight per replica, the
round-robin counter) is process-wide and guarded by a lock, shared by every event loop.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

Balance = Literal["sticky", "round_robin"]
BALANCES: tuple[Balance, ...] = ("sticky", "round_robin")
SLACK = 1.25
"""How far above the mean load a workflow's preferred replica may go before it spills."""

__all__ = ["BALANCES", "SLACK", "Balance", "ReplicaSet", "replica_set"]


class ReplicaSet:
    """The endpoints of one model name and the calls each has in flight."""

    def __init__(self, urls: tuple[str, ...], balance: Balance = "sticky",
                 slack: float = SLACK, capacity: int | None = None) -> None:
        if not urls:
            raise ValueError("a replica set needs at least one endpoint")
        if balance not in BALANCES:
            raise ValueError(f"unknown balance {balance!r}; expected one of {BALANCES}")
        self.urls = urls
        self.balance = balance
        self.slack = slack
        self.capacity = capacity
        """Calls one replica serves at once (``max_concurrency``), if known."""
        self._load = dict.fromkeys(urls, 0)
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def load(self, url: str) -> int:
        """Calls in flight at ``url``."""
        with self._lock:
            return self._load[url]

    def order(self, workflow: str) -> list[str]:
        """The replicas to try for a call of ``workflow``, first choice first."""
        with self._lock:
            if self.balance == "round_robin":
                start = next(self._turn) % len(self.urls)
                return [*self.urls[start:], *self.urls[:start]]
            ranked = sorted(self.urls, key=lambda url: _weight(workflow, url), reverse=True)
            bound = math.ceil(self.slack * (sum(self._load.values()) + 1) / len(self.urls))
            free = self.capacity
            for index, url in enumerate(ranked):
                load = self._load[url]
                if (free is not None and load < free) or load + 1 <= bound:
                    return [url, *ranked[:index], *ranked[index + 1:]]
            return ranked  # unreachable: some replica is at or below the mean

    @contextmanager
    def holding(self, url: str) -> Iterator[None]:
        """Count a call in flight at ``url`` for as long as the block runs."""
        with self._lock:
            self._load[url] += 1
        try:
            yield
        finally:
            with self._lock:
                self._load[url] -= 1


def _weight(workflow: str, url: str) -> int:
    digest = hashlib.sha256(f"{workflow}|{url}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


_SETS: dict[tuple[str, tuple[str, ...], Balance, int | None], ReplicaSet] = {}
_SETS_LOCK = threading.Lock()


def replica_set(name: str, urls: tuple[str, ...], balance: Balance,
                capacity: int | None = None) -> ReplicaSet:
    """The process-wide replica set of model ``name`` over ``urls``."""
    key = (name, urls, balance, capacity)
    with _SETS_LOCK:
        found = _SETS.get(key)
        if found is None:
            found = _SETS[key] = ReplicaSet(urls, balance, capacity=capacity)
        return found
