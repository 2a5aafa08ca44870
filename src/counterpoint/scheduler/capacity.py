"""Concurrency slots and named resources, shared by a top-level run and its sub-runs.

A run's ``max_concurrency`` and ``limits`` bound the run *with* its sub-graphs: a parent
and the sub-runs of its graph nodes draw on one :class:`Capacity`, so together they never
hold more of a resource, or run more nodes, than the top-level run allows. A graph node
waiting for its sub-run is a container and holds no slot of its own (it would otherwise
starve its own sub-run under ``max_concurrency=1``); the resources it declares it holds.

The pure core (:func:`counterpoint.state.pick`) reads the resource use from the run
state's ``in_use`` mapping: every member's state is given the same dict. When a member
frees capacity, the others that have nodes waiting are told to dispatch again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .pipeline import Pipeline


UNBOUNDED = 1 << 30
"""The slots of a run tree with no ``max_concurrency``."""


class Capacity:
    """Slots and resource use shared by the runs of one run tree (see the module doc)."""

    __slots__ = ("in_use", "members", "slots", "waiting")

    def __init__(self, max_concurrency: int | None, in_use: dict[str, int] | None = None
                 ) -> None:
        self.slots = max_concurrency or UNBOUNDED
        """Most nodes running at once over every member (graph nodes not counted)."""
        self.in_use: dict[str, int] = {} if in_use is None else in_use
        """Units of each named resource held now, over every member."""
        self.members: list[Pipeline] = []
        """The runs executing now that draw on this capacity (the top-level run first)."""
        self.waiting: dict[Pipeline, None] = {}
        """Members that were left with ready nodes by a dispatch (no slot or resource for
        them): the ones :meth:`released` tells. A map over a sub-graph has a member per
        item; telling only these keeps a release from costing one call per member."""

    def free(self) -> int:
        """Slots free now over every member (with no ``max_concurrency``: unbounded, and
        not counted member by member)."""
        if self.slots == UNBOUNDED:
            return UNBOUNDED
        used = 0
        for member in self.members:
            used += member.state.running - len(member._children)
        return self.slots - used

    def join(self, member: Pipeline) -> None:
        """``member`` starts drawing on this capacity; what its state already holds (a
        resumed sub-run's replayed attempts) is added to the shared use."""
        own = member.state.in_use
        if own is not self.in_use:
            for name, units in own.items():
                self.in_use[name] = self.in_use.get(name, 0) + units
            member.state.in_use = self.in_use
        self.members.append(member)

    def leave(self, member: Pipeline) -> None:
        if member in self.members:
            self.members.remove(member)
            self.waiting.pop(member, None)
            self.released(member)

    def wait(self, member: Pipeline) -> None:
        """``member``'s last dispatch left ready nodes: tell it when capacity is freed."""
        self.waiting[member] = None

    def released(self, source: Pipeline) -> None:
        """Capacity may have been freed by ``source``: the other members with nodes
        waiting dispatch again, each on its next pass of the loop."""
        if not self.waiting:
            return
        for member in list(self.waiting):
            if member is source:
                continue
            if not member.state.ready or member._loop is None:
                del self.waiting[member]  # nothing waits in it any more
                continue
            member._loop.call_soon(member.kick)
