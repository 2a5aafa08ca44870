"""What a run returns: its status, each node's outcome and the run's metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .board.projection import BoardState
from .errors import DeadlineExceeded, NodeFailed, RunFailure, UpstreamFailed
from .graph import NodeRef
from .ids import NodeId, RunId
from .metrics import Metrics, compute
from .state import ModelTally, NodeStatus, RunState, RunStatus


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
    usage: ModelTally = field(default_factory=ModelTally)
    """This node's model calls, tokens and cost."""
    reused: bool = False
    """Whether its output was reused from the run this one was forked from."""


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
                              attempts=ns.attempt, run_time=ns.run_time,
                              usage=self.state.node_models.get(k) or ModelTally(),
                              reused=ns.reused)
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

    @property
    def board(self) -> BoardState:
        """The run's blackboard as it ended: keys, histories, conflicts, queues."""
        return self.state.board or BoardState()

    @property
    def usage(self) -> ModelTally:
        """The run's model calls, tokens and cost."""
        return self.state.models

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
        """Return ``self`` if the run succeeded, else raise what stopped it.

        :class:`NodeFailed` names the first node whose own code failed;
        :class:`UpstreamFailed` a node blocked by a failure upstream (when no
        failed node is left to name); :class:`DeadlineExceeded` a run whose
        deadline passed; any other end (cancelled) is a :class:`RunFailure`.
        """
        if self.ok:
            return self
        where = f"run {self.run_id} {self.status}"
        if self.status is RunStatus.TIMED_OUT:
            left = [k for k, ns in self.state.nodes.items() if ns.status is NodeStatus.CANCELLED]
            raise DeadlineExceeded(f"{where}: the deadline passed with {len(left)} node(s) "
                                   f"unfinished ({', '.join(left[:5])}); finished nodes kept "
                                   "their outputs")
        nodes = self.state.nodes.items()
        for k, ns in nodes:
            if ns.status is NodeStatus.FAILED:
                raise NodeFailed(f"{where}: node {k!r} failed" + _reason(ns.error),
                                 retryable=False)
        for k, ns in nodes:
            if ns.status is NodeStatus.BLOCKED:
                raise UpstreamFailed(f"{where}: node {k!r} blocked" + _reason(ns.error))
        raise RunFailure(f"{where}", retryable=False)


def _reason(error: dict[str, Any] | None) -> str:
    if not error:
        return ""
    if "cause" in error:
        return f" (upstream {error['cause']!r} failed: {error.get('message', '')})"
    if "reason" in error:
        return f" ({error['reason']})"
    return f" ({error.get('type', 'Error')}: {error.get('message', '')})"
