"""Claim-queue work on the blackboard: items put, claimed under leases, completed once.

A claim belongs to the node attempt that took it, and lasts while that attempt runs and
its lease (if any) has time left. Before every queue operation, claims whose holder's
attempt has ended (failed, cancelled, finished, or lost with a killed process: a resumed
run starts new attempts) or whose lease ran out are expired in the log, and their items
are open again. A result is recorded only by the claim that holds the item, so an item
is completed exactly once however many agents took it. Time for leases comes from the
graph's ``Board(clock=...)``, never from a sleep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import BoardConflict, ClaimLost, PermissionDenied
from ..events import EventKind
from ..permissions import write_refusal
from ..state import RUNNING, RunStatus
from .link import Link, as_json
from .projection import Item, QueueState

if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass(frozen=True, kw_only=True, slots=True)
class Claim:
    """A claim on one item, held by the attempt that took it."""

    queue: str
    item: str
    payload: Any
    number: int
    """Which claim on the item this is (1 for the first; each expiry lets another)."""
    lease_until: float | None
    """When the lease runs out on the board's clock (``None``: while the attempt runs)."""


class QueueAccess:
    """One work queue of the run's blackboard, as one node attempt sees it."""

    __slots__ = ("_link", "name")

    def __init__(self, link: Link, name: str) -> None:
        self._link = link
        self.name = name

    def put(self, payload: Any, *, id: str | None = None) -> str:
        """Add an item; returns its id. Putting an id that is there already does nothing,
        and an attempt's n-th put without ``id`` is named ``<node>#<n>``: a node re-run
        after a crash puts the same items, not new ones."""
        refusal = write_refusal(f"queue:{self.name}")
        data = as_json(payload, lambda: f"{self._link.where}: queue {self.name!r}")
        return self._link.on_loop(lambda: self._put(data, id, refusal))

    def claim(self, *, lease: float | None = None) -> Claim | None:
        """Claim the oldest open item (``None`` if no item is open), for ``lease``
        seconds (default: the queue's; ``None``: while this attempt runs)."""
        refusal = write_refusal(f"queue:{self.name}")
        if lease is not None and not lease > 0:
            raise BoardConflict(f"{self._link.where}: queue {self.name!r}: lease must be > "
                                f"0 seconds, got {lease!r}", retryable=False)
        return self._link.on_loop(lambda: self._claim(lease, refusal))

    def complete(self, claim: Claim, result: Any) -> None:
        """Record ``result`` for the claimed item. Raises :class:`~counterpoint.ClaimLost`
        if the claim is no longer held (its lease ran out), and
        :class:`~counterpoint.BoardConflict` if the queue's ``verify`` refuses it (the
        claim stays held: fix the result and complete again)."""
        refusal = write_refusal(f"queue:{self.name}")
        data = as_json(result, lambda: f"{self._link.where}: queue {self.name!r}, "
                                     f"item {claim.item!r}")
        verify = self._link.spec.queue(self.name).verify
        verdict = None if verify is None else verify(claim.payload, data)
        rejected = None if verdict is None or verdict is True else \
            (verdict if isinstance(verdict, str) and verdict else "its verify check said no")
        self._link.on_loop(lambda: self._complete(claim, data, rejected, refusal))

    def release(self, claim: Claim) -> None:
        """Give the claim back: the item is open again for any worker."""
        self._link.on_loop(lambda: self._release(claim))

    def counts(self) -> dict[str, int]:
        """How many items are ``open``, ``claimed`` and ``done`` (after expiring claims
        whose holder has ended)."""
        def count() -> dict[str, int]:
            queue = self._queue()
            if self._link.execution.state.status is RunStatus.RUNNING:
                self._sweep(queue)
            return queue.counts()
        return self._link.on_loop(count)

    def results(self) -> dict[str, Any]:
        """The result of every completed item, by item id, in the order they were put."""
        return self._link.on_loop(lambda: {
            i.id: i.result for i in self._queue().items.values() if i.status == "done"})

    # ------------------------------------------------------------ on the loop
    def _queue(self) -> QueueState:
        return self._link.board.queue(self.name)

    def _refuse(self, refusal: tuple[str, str] | None, action: str) -> None:
        if refusal is None:
            return
        role, why = refusal
        self._link.emit(EventKind.PERMISSION_DENIED, {"role": role, "what": "board_write",
                                                      "key": f"queue:{self.name}",
                                                      "action": action, "reason": why})
        raise PermissionDenied(f"{self._link.where}: queue {self.name!r}: {action} refused: "
                               f"{why}")

    def _put(self, payload: Any, id: str | None, refusal: tuple[str, str] | None) -> str:
        link = self._link
        link.check_live()
        self._refuse(refusal, "put")
        if id is None:
            slot = (link.node, link.attempt, self.name)
            count = link.board.puts[slot] = link.board.puts.get(slot, 0) + 1
            id = f"{link.node}#{count}"
        elif not isinstance(id, str) or not id:
            raise BoardConflict(f"{link.where}: queue {self.name!r}: an item id must be a "
                                f"non-empty string, got {id!r}", retryable=False)
        if id not in self._queue().items:
            link.emit(EventKind.QUEUE_PUT, {"queue": self.name, "item": id,
                                            "payload": payload})
        return id

    def _claim(self, lease: float | None, refusal: tuple[str, str] | None) -> Claim | None:
        link = self._link
        link.check_live()
        self._refuse(refusal, "claim")
        queue = self._queue()
        self._sweep(queue)
        item_id = next(iter(queue.open), None)
        if item_id is None:
            return None
        item = queue.items[item_id]
        seconds = lease if lease is not None else link.spec.queue(self.name).lease
        until = None if seconds is None else round(link.spec.clock() + seconds, 6)
        link.emit(EventKind.CLAIM_TAKEN, {"queue": self.name, "item": item_id,
                                          "claim": item.claim + 1, "lease_until": until})
        return Claim(queue=self.name, item=item_id, payload=item.payload,
                     number=item.claim, lease_until=until)

    def _complete(self, claim: Claim, result: Any, rejected: str | None,
                  refusal: tuple[str, str] | None) -> None:
        link = self._link
        link.check_live()
        self._refuse(refusal, "complete")
        queue = self._queue()
        self._sweep(queue)
        item = self._held(queue, claim, "complete")
        if rejected is not None:
            link.emit(EventKind.BOARD_CONFLICT, {
                "key": f"{self.name}/{claim.item}", "policy": "verify", "outcome": "rejected",
                "read": claim.number, "version": item.claim, "message": rejected})
            raise BoardConflict(f"{link.where}: queue {self.name!r}, item {claim.item!r}: "
                                f"result refused: {rejected}; the claim is still held",
                                key=f"{self.name}/{claim.item}")
        link.emit(EventKind.CLAIM_DONE, {"queue": self.name, "item": claim.item,
                                         "claim": claim.number, "result": result})

    def _release(self, claim: Claim) -> None:
        link = self._link
        link.check_live()
        queue = self._queue()
        self._sweep(queue)
        self._held(queue, claim, "release")
        link.emit(EventKind.CLAIM_RELEASED, {"queue": self.name, "item": claim.item,
                                             "claim": claim.number})

    def _held(self, queue: QueueState, claim: Claim, action: str) -> Item:
        link = self._link
        item = queue.items.get(claim.item)
        mine = (link.node, link.attempt)
        if item is None or claim.queue != self.name:
            raise ClaimLost(f"{link.where}: queue {self.name!r} has no item {claim.item!r}",
                            key=f"{self.name}/{claim.item}")
        if item.status == "claimed" and item.claim == claim.number and item.holder == mine:
            return item
        now = "completed already" if item.status == "done" else \
            f"claimed again by {item.holder[0]!r}" if item.holder else "open again"
        raise ClaimLost(f"{link.where}: queue {self.name!r}, item {claim.item!r}: claim "
                        f"{claim.number} is no longer held (its lease ran out; the item is "
                        f"{now}), so it cannot {action} it", key=f"{self.name}/{claim.item}",
                        read=claim.number, version=item.claim)

    def _sweep(self, queue: QueueState) -> None:
        """Expire the claims whose holder's attempt has ended or whose lease ran out."""
        if not queue.claimed:
            return
        link = self._link
        nodes = link.execution.state.nodes
        now: Callable[[], float] | float = link.spec.clock
        for item_id in list(queue.claimed):
            item = queue.items[item_id]
            assert item.holder is not None
            node, attempt = item.holder
            ns = nodes.get(node)
            if ns is None or ns.attempt != attempt or ns.status is not RUNNING:
                reason = f"attempt {attempt} of node {node!r} ended without completing it"
            else:
                if callable(now):
                    now = now()
                if item.lease_until is None or now < item.lease_until:
                    continue
                reason = f"the lease of attempt {attempt} of node {node!r} ran out"
            link.emit(EventKind.CLAIM_EXPIRED, {"queue": self.name, "item": item_id,
                                                "claim": item.claim, "reason": reason})

