"""The budget ledgers of a run being executed: the run's, and each budgeted node's.

A run's ledger is the root of a tree (a top-level run) or a child of the ledger of the
node that started it (a sub-run). A node with ``Policy(budget=...)`` gets a ledger under
its run's, kept over all its attempts. On resume, each starts from what the log says
was spent (:func:`~counterpoint.budget.spent_in_log`), the sub-runs' logs included.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..budget import ZERO, Amount, Ledger, current_ledger, spent_in_log
from ..events import Event
from ..ids import NodeId, RunId
from ..nodes import NodeSpec
from ..options import RunOptions
from ..store import RunStore


class RunLedgers:
    """The ledgers of one run (see the module docstring)."""

    __slots__ = ("_node_spent", "_nodes", "run")

    def __init__(self, run: Ledger, node_spent: dict[str, Amount] | None = None) -> None:
        self.run = run
        self._nodes: dict[NodeId, Ledger] = {}
        self._node_spent = node_spent or {}

    def for_node(self, spec: NodeSpec) -> Ledger:
        """The ledger ``spec``'s model calls reserve in."""
        budget = spec.policy.budget
        if budget is None:
            return self.run
        ledger = self._nodes.get(spec.id)
        if ledger is None:
            ledger = self._nodes[spec.id] = self.run.child(
                budget, where=f"{self.run.where}, node {spec.id!r}",
                spent=self._node_spent.get(spec.id, ZERO))
        return ledger


def new_ledgers(run_id: RunId, options: RunOptions, *, sub_run: bool) -> RunLedgers:
    """The ledgers of a new run: a sub-run's ledger is under the calling node's."""
    parent = current_ledger() if sub_run else None
    where = f"run {run_id}"
    if parent is not None:
        return RunLedgers(parent.child(options.budget, where=where,
                                       deadline_at=parent.deadline_at))
    return RunLedgers(Ledger(options.budget, where=where))


def resumed_ledgers(run_id: RunId, options: RunOptions, store: RunStore,
                    events: Sequence[Event], *, sub_run: bool, budgeted: bool) -> RunLedgers:
    """The ledgers of a resumed run, starting from what its log and (when a budget of
    its own or of a node applies: ``budgeted``) its sub-runs' logs say was spent. A
    sub-run's spend is its own: its parent counted it already."""
    total, nodes = spent_in_log(events)
    if budgeted:
        prefix = f"{run_id}/"
        for record in store.sub_runs(run_id):
            spent, _ = spent_in_log(store.events(record.run_id))
            total = total + spent
            node = NodeId(record.run_id[len(prefix):].split("/", 1)[0].split("~", 1)[0])
            nodes[node] = nodes.get(node, ZERO) + spent
    parent = current_ledger() if sub_run else None
    where = f"run {run_id}"
    ledger = parent.child(options.budget, where=where, deadline_at=parent.deadline_at,
                          spent=total) if parent is not None else \
        Ledger(options.budget, where=where, spent=total)
    return RunLedgers(ledger, nodes)
