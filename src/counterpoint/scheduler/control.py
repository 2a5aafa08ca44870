"""Control of a running run: live edits, cancelling nodes, stopping the run."""

from __future__ import annotations

import time
from dataclasses import replace

from ..errors import PatchError
from ..events import NODE_CANCELLED, PATCH_APPLIED, RUN_STOPPING, Event
from ..ids import NodeId
from ..patch import Edit, Patch, edit_digest, patch_to_data, require_edit
from ..rules import check_patch
from ..state import RUNNING, TERMINAL
from .core import JOIN
from .limits import over_limit
from .success import Success


class Control(Success):
    """Edits, cancels and stops (see the module docstring)."""

    __slots__ = ()

    def apply(self, edit: Edit) -> int:
        """Validate ``edit`` against the current state and apply it as one event."""
        edit = require_edit(edit, f"run {self.run_id}")
        made = self._made_before(edit)
        if made is not None:
            return made
        patch = edit.build(self.state.graph, self.state.specs(), self.graph.inputs)
        return self.apply_patch(patch)

    def _made_before(self, edit: Edit) -> int | None:
        """The version an earlier attempt of the node making ``edit`` got for the same
        edit, if one made it: a re-run (a retry, the resume after a crash) makes its
        edits again, and the log holds them already (applied again, they failed with
        'duplicate node id'). ``None``: a new edit."""
        by = edit.by
        edits = self.state.edits
        made = edits.get(by) if edits is not None and by is not None else None
        if not made:
            return None
        attempt = self.state.nodes[by].attempt  # type: ignore[index]
        specs = self.state.specs()
        for earlier in made:
            if earlier.attempt >= attempt:  # one attempt's edits are all new to it
                continue
            before = {k: v for k, v in specs.items() if k not in earlier.added}
            try:  # the edit as it was built then: against the graph without its nodes
                patch = edit.build(self.state.graph, before, self.graph.inputs)
            except PatchError:
                continue
            if edit_digest(patch_to_data(patch)) == earlier.digest:
                return earlier.version
        return None

    def apply_patch(self, patch: Patch) -> int:
        nodes = self.state.nodes
        spawned = [c for n in patch.cancel if n in nodes and nodes[n].spec.kind is JOIN
                   for c in nodes[n].spec.after
                   if c not in patch.cancel and nodes[c].status not in TERMINAL]
        if spawned:  # a map's items go with it
            patch = replace(patch, cancel=(*patch.cancel, *spawned))
        check_patch(self.state, patch)
        excess = over_limit((*patch.add, *patch.replace), self.state.limits)
        if excess:
            raise PatchError(f"run {self.run_id}: {excess[1]}")
        data = {**patch_to_data(patch), "version": self.state.version + 1}
        running = [n for n in patch.cancel if n in self._tasks]
        self.emit(Event(PATCH_APPLIED, time.time(), data=data, output=patch))
        for node in running:
            self._cancel_task(node, patch.reason or "cancelled by an edit")
        return self.state.version

    def _cancel_task(self, node: NodeId, reason: str) -> None:
        child = self._children.get(node)
        if child is not None:  # stop the sub-run itself, so its log ends cancelled too
            self._cancelling[node] = reason
            child.cancel()
            return
        task = self._tasks.get(node)
        if task is not None and not task.done():
            self._cancelling[node] = reason
            task.cancel()
            task.add_done_callback(lambda _: self._cancelled_before_start(node, reason))

    def _cancelled_before_start(self, node: NodeId, reason: str) -> None:
        """A task cancelled before its first step never runs its handler: record it here."""
        ns = self.state.nodes[node]
        if node in self._cancelling and ns.status is RUNNING:
            self._cancelling.pop(node)
            self._tasks.pop(node, None)
            self.emit(Event(NODE_CANCELLED, time.time(), node, ns.attempt,
                            data={"reason": reason}))

    def stop(self, reason: str) -> None:
        """Stop the run early: ``cancelled``, ``deadline`` or ``fail_fast``.

        The decision is logged first (``run_stopping``), so a resume after a crash
        in the middle of stopping finishes the stop instead of running on.
        """
        state = self.state
        if state.status.terminal or state.stop_reason is not None:
            return
        self.emit(Event(RUN_STOPPING, time.time(), data={"reason": reason}))
        self._cancel_rest()

    def _cancel_rest(self) -> None:
        """Cancel every node that has not ended, for the run's ``stop_reason``."""
        state = self.state
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        now = time.time()
        reason = state.stop_reason or "cancelled"
        message = {"deadline": f"the run's deadline of {self.options.deadline}s passed",
                   "fail_fast": "another node failed and fail_fast is on",
                   "cancelled": "the run was cancelled"}.get(reason, reason)
        for node_id, ns in list(state.nodes.items()):
            if ns.status in TERMINAL:
                continue
            if node_id in self._tasks:
                self._cancel_task(node_id, message)
            elif ns.status is not RUNNING:
                self.emit(Event(NODE_CANCELLED, now, node_id, ns.attempt,
                                data={"reason": message}))
