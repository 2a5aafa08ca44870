"""What a run returns: its status, each node's outcome and the run's metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .errors import NodeFailed
from .graph import NodeRef
from .ids import NodeId, RunId
from .metrics import Metrics, compute
from .state import NodeStatus, RunState, RunStatus


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeResult:
    """The outcome of one node."""

    id: NodeId
    status: NodeStatus
    output: Any = None
    error: dict[str, Any] | None = None
    """For failed nodes: type, message, traceback; for blocked / skipped / cancelled: the reason."""
    attempts: int = 0
    run_time: float = 0.0


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """The end (or, for a timed-out run, the partial end) of a run."""

    run_id: RunId
    graph: str
    status: RunStatus
    state: RunState = field(repr=False)
    output_ref: NodeRef | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.status is RunStatus.SUCCEEDED

    @cached_property
    def nodes(self) -> dict[NodeId, NodeResult]:
        """Every node's outcome, by id (including nodes spawned or added while running)."""
        return {k: NodeResult(id=k, status=ns.status, output=ns.output, error=ns.error,
                              attempts=ns.attempt, run_time=ns.run_time)
                for k, ns in self.state.nodes.items()}

    @cached_property
    def outputs(self) -> dict[NodeId, Any]:
        """Outputs of the nodes that succeeded."""
        return {k: ns.output for k, ns in self.state.nodes.items()
                if ns.status is NodeStatus.SUCCEEDED}

    @property
    def output(self) -> Any:
        """The graph's output: its ``output`` node's, else a dict of the sink nodes' outputs."""
        if self.output_ref is not None:
            ns = self.state.nodes[self.output_ref.node]
            return self.output_ref.resolve(ns.output) if ns.status is NodeStatus.SUCCEEDED \
                else None
        return {k: ns.output for k, ns in self.state.nodes.items()
                if not ns.dependents and ns.status is NodeStatus.SUCCEEDED}

    @cached_property
    def metrics(self) -> Metrics:
        return compute(self.state, time.time())

    def __getitem__(self, node: str) -> Any:
        """The output of node ``node``; raises if it did not succeed."""
        ns = self.state.nodes.get(NodeId(node))
        if ns is None:
            raise KeyError(f"run {self.run_id} has no node {node!r}")
        if ns.status is not NodeStatus.SUCCEEDED:
            raise NodeFailed(f"run {self.run_id}, node {node!r} has no output: it "
                             f"{ns.status}" + _reason(ns.error), retryable=False)
        return ns.output

    def raise_for_status(self) -> RunResult:
        """Raise :class:`NodeFailed` naming the first failed node unless the run succeeded."""
        if self.ok:
            return self
        for k, ns in self.state.nodes.items():
            if ns.status in (NodeStatus.FAILED, NodeStatus.BLOCKED):
                raise NodeFailed(f"run {self.run_id} {self.status}: node {k!r} {ns.status}"
                                 + _reason(ns.error), retryable=False)
        raise NodeFailed(f"run {self.run_id} {self.status}", retryable=False)


def _reason(error: dict[str, Any] | None) -> str:
    if not error:
        return ""
    if "cause" in error:
        return f" (upstream {error['cause']!r} failed: {error.get('message', '')})"
    if "reason" in error:
        return f" ({error['reason']})"
    return f" ({error.get('type', 'Error')}: {error.get('message', '')})"
