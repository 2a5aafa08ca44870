"""What a running step can see and do: its identity, live edits, the flush barrier."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .ids import NodeId, RunId
from .patch import Edit
from .state import NodeStatus

if TYPE_CHECKING:
    from .runtime import Execution


class NodeContext:
    """Given to a step that declares a ``ctx`` (or ``NodeContext``-annotated) parameter."""

    def __init__(self, execution: Execution, node: NodeId, attempt: int) -> None:
        self._execution = execution
        self.node = node
        """This node's id."""
        self.attempt = attempt
        """This attempt's number, from 1."""

    @property
    def run_id(self) -> RunId:
        return self._execution.run_id

    @property
    def graph_version(self) -> int:
        """Number of edits applied so far; pass it as ``Edit(expected_version=...)``."""
        return self._execution.state.version

    def apply(self, edit: Edit) -> int:
        """Validate and apply ``edit`` atomically; returns the new graph version."""
        return self._execution.apply(edit)

    def nodes(self) -> dict[NodeId, NodeStatus]:
        """Every node of the run now (including spawned and added ones) and its status."""
        return {k: v.status for k, v in self._execution.state.nodes.items()}

    async def flush(self) -> None:
        """Wait until everything this run has recorded so far is durable.

        Call it before an effect outside the run that cannot be repeated.
        """
        await self._execution.store.flush()
