"""What the CLI prints about a finished (or recorded) run: summary, run list, JSON."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..budget import Account, Budget
from ..ids import NodeId
from ..metrics import Metrics
from ..plan_text import plan_tree as plan_tree  # re-exported: the CLI prints them
from ..plan_text import round_lines as round_lines
from ..state import ModelTally, NodeState, NodeStatus, RunState, RunStatus, in_added_order
from ..store import ForkPoint, RunRecord
from ..texts import some
from .blocks import OUTPUT_CHARS as OUTPUT_CHARS  # re-exported: tests pin it
from .blocks import answer_lines, goal_lines, output_lines
from .board import board_payload, board_section
from .jsontext import dumps as dumps  # re-exported: the commands print with it

if TYPE_CHECKING:
    from ..routing.trail import NodeRouting

NODE_ROWS = 30
"""Most node rows a summary lists (failed and unfinished nodes are chosen first)."""
FAILURE_ROWS = 20
"""Most failure causes a summary lists."""
PATH_NODES = 12
"""Most critical-path nodes named in a summary."""

STYLES = {
    "succeeded": "green", "failed": "red", "blocked": "red", "cancelled": "yellow",
    "timed_out": "yellow", "skipped": "dim", "running": "cyan", "retrying": "cyan",
    "reused": "green",
    "ready": "blue", "pending": "dim", "waiting": "blue", "interrupted": "magenta",
}
_PROBLEMS = frozenset({NodeStatus.FAILED, NodeStatus.BLOCKED, NodeStatus.CANCELLED})


@dataclass(frozen=True, kw_only=True, slots=True)
class Report:
    """One run as the summary shows it."""

    run_id: str
    graph: str
    status: str
    """The run's status, or ``interrupted`` for a run whose process died."""
    state: RunState
    metrics: Metrics
    deps_known: bool = True
    """False when the log does not record dependencies (no critical path then)."""
    declared: int | None = None
    """Nodes the graph has, when more than the log mentions (a run that never got far)."""
    note: str | None = None
    """A line under the status: why the run stopped, what to do next."""
    output: Any = None
    """The graph's output (its output node's, else its sinks'), when the run produced one."""
    failed_attempts: Mapping[NodeId, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    """Each node's failed attempts (their ``node_failed`` data, with ``attempt``), when the
    log was read; a live run's summary has only each node's last error."""
    forked_from: ForkPoint | None = None
    """The run this one was forked from, if it is a fork."""
    parent_deleted: bool = False
    """Whether the run it was forked from has been deleted from the store since."""
    forks: tuple[str, ...] = ()
    """The runs forked from this one."""
    routing: Mapping[str, NodeRouting] = field(default_factory=dict)
    """What ``model="auto"`` chose for each node that made routed calls, from the log."""
    budget: Account | None = None
    """The run's budget as its log tells it (spent, reserved, left, refusals), if it had
    one (:func:`counterpoint.budget.account`)."""
    sampling: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Each node's latest sampled call (its ``model_sampled`` data), from the log."""
    goal: Mapping[str, Any] | None = None
    """A goal run's story from its log (:func:`counterpoint.goal_story.goal_story`): the
    goal, each planning round and the answer; ``None`` for other runs."""


# ------------------------------------------------------------------ small formats
def seconds(value: float | None) -> str:
    """``0.012s``, ``3.40s``, ``2m 05s``, ``1h 02m``; ``-`` for unknown."""
    if value is None:
        return "-"
    if value < 10:
        return f"{value:.3f}s" if value < 1 else f"{value:.2f}s"
    if value < 60:
        return f"{value:.1f}s"
    if value < 3600:
        return f"{int(value // 60)}m {int(value % 60):02d}s"
    return f"{int(value // 3600)}h {int(value % 3600 // 60):02d}m"


def clock(epoch: float | None) -> str:
    """Local date and time of ``epoch``."""
    if not epoch:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def styled(status: str) -> Text:
    return Text(status, style=STYLES.get(status, ""))


def cause(ns: NodeState) -> str:
    """Why a node did not succeed, in one line (empty if the log says nothing)."""
    error = ns.error or {}
    if ns.status is NodeStatus.BLOCKED or "cause" in error:
        return f"upstream {error.get('cause', '?')!r} failed: {error.get('message', '')}"
    if "type" in error:
        return f"{error['type']}: {error.get('message', '')}"
    return str(error.get("reason", ""))


def node_status(ns: NodeState, run_finished: bool) -> str:
    """A node's status; a node left unfinished by a finished run was ``interrupted``, and
    one whose output a fork copied from its parent is ``reused``."""
    if run_finished and not ns.status.terminal:
        return "interrupted"
    if ns.reused:
        return "reused"
    return ns.status.value


def lineage_lines(report: Report) -> list[Text]:
    """``forked from R at node X (seq N)`` and ``forks: R1, R2``, for runs that have them."""
    lines = []
    point = report.forked_from
    if point is not None:
        at = f"node {point.node!r} (seq {point.seq})" if point.node else f"seq {point.seq}"
        gone = " (since deleted from the store; this fork's own log is whole)" \
            if report.parent_deleted else ""
        lines.append(Text(f"forked from {point.run} at {at}{gone}"))
    if report.forks:
        lines.append(Text("forks: " + ", ".join(report.forks)))
    return lines


# ------------------------------------------------------------------ summary
def summary(report: Report, *, inspect: str | None) -> RenderableType:
    """The end-of-run summary: status, nodes, failures, metrics, how to inspect."""
    parts: list[RenderableType] = []
    head = Text.assemble(("run ", "bold"), (report.run_id, "bold"), "  graph ",
                         (report.graph, "bold"), "  ", styled(report.status))
    parts.append(head)
    state = report.state
    parts.append(Text(f"created {clock(state.created_at)}"
                      + (f", finished {clock(state.finished_at)}" if state.finished_at else ""),
                      style="dim"))
    if report.note:
        parts.append(Text(report.note, style=STYLES.get(report.status, "")))
    exhausted = report.budget.exhausted() if report.budget is not None else None
    if exhausted and exhausted != report.note:
        parts.append(Text(exhausted + "; finished nodes kept their outputs", style="yellow"))
    parts.extend(lineage_lines(report))
    if report.goal is not None:
        parts.append(Text())
        parts.extend(goal_lines(report.goal))
    parts.append(Text())
    parts.append(node_table(report))
    failures = failure_lines(report.state, report.failed_attempts)
    if failures:
        parts.append(Text())
        parts.append(Text("did not succeed", style="bold red"))
        parts.extend(failures)
    recovered = recovered_lines(report.state, report.failed_attempts)
    if recovered:
        parts.append(Text())
        parts.append(Text("succeeded after failed attempts", style="bold yellow"))
        parts.extend(recovered)
    parts.append(Text())
    parts.append(metrics_table(report.metrics, deps_known=report.deps_known))
    if state.models.calls or state.models.cache_hits or state.models.failed or \
            state.models.reused:
        parts.append(Text.assemble(("models    ", "bold"), usage_line(state.models)))
    if report.budget is not None:
        parts.append(Text.assemble(("budget    ", "bold"), report.budget.line()))
    board = board_section(state)
    if board:
        parts.extend([Text(), *board])
    parts.extend(output_lines(report.output))
    if report.goal is not None:
        parts.extend(answer_lines(report.goal))
    if inspect:
        parts.append(Text())
        parts.append(Text.assemble("inspect: ", (inspect, "bold")))
    return Group(*parts)


def node_table(report: Report, limit: int = NODE_ROWS) -> RenderableType:
    """Each node's status, attempts, queue wait and run time; problems are listed first
    when there are more nodes than rows."""
    state = report.state
    nodes = in_added_order(state)  # a loop's iterations before the nodes after the loop
    shown = nodes
    if len(nodes) > limit:
        urgent = [ns for ns in nodes if ns.status in _PROBLEMS or not ns.status.terminal]
        rest = [ns for ns in nodes if not (ns.status in _PROBLEMS or not ns.status.terminal)]
        keep = {id(ns) for ns in (urgent + rest)[:limit]}
        shown = [ns for ns in nodes if id(ns) in keep]
    finished = state.status.terminal
    timings = report.metrics.nodes
    table = Table(title_justify="left", show_edge=False, pad_edge=False, box=None)
    table.add_column("node", no_wrap=True, overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("attempts", justify="right")
    table.add_column("queue wait", justify="right")
    table.add_column("run time", justify="right")
    waited = any(t.waited for t in timings.values())
    if waited:  # only when some attempt waited inside its run time
        table.add_column("of it waiting", justify="right")
    if report.routing:  # only when some node routed its model calls
        table.add_column("routing", overflow="fold")
    if report.sampling:  # only when some node asked for parallel samples
        from ..models.sampling import sampling_line
        table.add_column("samples", overflow="fold")
    for ns in shown:
        timing = timings.get(ns.spec.id)
        row: list[RenderableType] = [
            Text(ns.spec.id), styled(node_status(ns, finished)), str(ns.attempt),
            seconds(timing.queue_wait if timing else None),
            seconds(ns.run_time) if ns.attempt else "-"]
        if waited:
            row.append(wait_text(timing.waited if timing else {}))
        if report.routing:
            routed = report.routing.get(ns.spec.id)
            row.append(Text(routed.text()) if routed else Text("-", style="dim"))
        if report.sampling:
            sampled = report.sampling.get(ns.spec.id)
            row.append(Text(sampling_line(dict(sampled))) if sampled else
                       Text("-", style="dim"))
        table.add_row(*row)
    rows: list[RenderableType] = [table]
    hidden = len(nodes) - len(shown)
    unseen = (report.declared or 0) - len(nodes)
    if hidden > 0:
        rows.append(Text(f"... and {hidden} more nodes (all of them: counterpoint show "
                         f"{report.run_id} --json)", style="dim"))
    if unseen > 0:
        rows.append(Text(f"{unseen} more nodes never became ready", style="dim"))
    return Group(*rows)


def location_text(error: Mapping[str, Any] | None) -> str | None:
    """``steps.py:42 in fetch``: where in the user's code an attempt failed, the path
    relative to the working directory when it is under it."""
    where = (error or {}).get("location")
    if not isinstance(where, Mapping) or "file" not in where:
        return None
    path = str(where["file"])
    try:
        relative = os.path.relpath(path)
        if not relative.startswith(".."):
            path = relative
    except ValueError:  # another drive
        pass
    function = f" in {where['function']}" if where.get("function") else ""
    return f"{path}:{where.get('line', '?')}{function}"


def _attempt_lines(attempts: Sequence[Mapping[str, Any]], final: bool) -> list[Text]:
    """One line per failed attempt but the last of a failed node (shown above them)."""
    shown = attempts[:-1] if final else attempts
    lines: list[Text] = []
    for data in shown[:FAILURE_ROWS]:
        where = location_text(data)
        then = "fallback called" if data.get("fallback") else (
            f"retried after {seconds(data['retry_in'])}" if data.get("retry_in") is not None
            else "retried")
        lines.append(Text.assemble(f"    attempt {data.get('attempt', '?')}: ",
                                   (f"{data.get('type', 'Error')}: ", "red"),
                                   str(data.get("message", "")), f" ({then})",
                                   (f" at {where}" if where else "", "dim")))
    if len(shown) > FAILURE_ROWS:
        lines.append(Text(f"    ... and {len(shown) - FAILURE_ROWS} more failed attempts",
                          style="dim"))
    return lines


def failure_lines(state: RunState, attempts: Mapping[NodeId, Sequence[Mapping[str, Any]]]
                  | None = None, limit: int = FAILURE_ROWS) -> list[Text]:
    """Failed nodes with their causes, where they failed and their earlier failed
    attempts; blocked and cancelled nodes grouped by cause."""
    lines: list[Text] = []
    groups: dict[tuple[str, str], list[NodeId]] = {}
    nodes = 0
    for node, ns in state.nodes.items():
        if ns.status is NodeStatus.FAILED:
            nodes += 1
            if nodes > limit:
                continue
            tries = f" after {ns.attempt} attempts" if ns.attempt > 1 else ""
            lines.append(Text.assemble("  ", (node, "bold"), (f" failed{tries}: ", "red"),
                                       cause(ns)))
            where = location_text(ns.error)
            if where:
                lines.append(Text(f"    failed at {where}", style="dim"))
            lines.extend(_attempt_lines((attempts or {}).get(node, ()), final=True))
        elif ns.status in (NodeStatus.BLOCKED, NodeStatus.CANCELLED):
            groups.setdefault((ns.status.value, cause(ns)), []).append(node)
    if nodes > limit:
        lines.append(Text(f"  ... and {nodes - limit} more failed nodes", style="dim"))
    for (status, why), names in list(groups.items())[:limit]:
        named = some([repr(n) for n in names])
        label = f"{len(names)} nodes" if len(names) > 1 else "node"
        lines.append(Text.assemble(f"  {label} ", (named, "bold"), (f" {status}", STYLES[status]),
                                   f": {why}" if why else ""))
    return lines


def recovered_lines(state: RunState, attempts: Mapping[NodeId, Sequence[Mapping[str, Any]]],
                    limit: int = FAILURE_ROWS) -> list[Text]:
    """Nodes that succeeded after failed attempts, with each failed attempt's error."""
    lines: list[Text] = []
    recovered = [(node, failed) for node, failed in attempts.items() if failed
                 and node in state.nodes and state.nodes[node].status is NodeStatus.SUCCEEDED]
    for node, failed in recovered[:limit]:
        lines.append(Text.assemble("  ", (node, "bold"),
                                   f" succeeded on attempt {state.nodes[node].attempt}"))
        lines.extend(_attempt_lines(failed, final=False))
    if len(recovered) > limit:
        lines.append(Text(f"  ... and {len(recovered) - limit} more", style="dim"))
    return lines


TINY_PATH = 0.001
"""A critical path shorter than this (seconds) makes its ratio to the makespan a measure
of the runtime's overhead, and the summary says so."""


def metrics_table(metrics: Metrics, *, deps_known: bool = True) -> RenderableType:
    """Makespan, critical path and their ratio, parallel width, run time and retries."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("makespan", seconds(metrics.makespan))
    if deps_known:
        path = list(metrics.critical_path_nodes)
        named = " -> ".join(path[:PATH_NODES]) + (
            f" -> ... ({len(path) - PATH_NODES} more)" if len(path) > PATH_NODES else "")
        grid.add_row("critical path", Text(f"{seconds(metrics.critical_path)}"
                                           + (f"  ({named})" if named else "")))
        ratio = metrics.makespan_over_critical_path
        shown = Text(f"{ratio:.2f}x" if ratio is not None else "-")
        if ratio is not None and metrics.critical_path < TINY_PATH:
            shown.append("  (a critical path under 1 ms: the ratio is mostly the run's own "
                         "start and logging)", style="dim")
        grid.add_row("makespan / critical path", shown)
    else:
        grid.add_row("critical path", "see the run summary (this log does not record the "
                                      "nodes' dependencies)")
    grid.add_row("parallel width", f"mean {metrics.mean_parallel_width:.2f} (nodes at work), "
                                   f"peak {metrics.peak_parallel_width}")
    grid.add_row("total run time", seconds(metrics.total_run_time))
    grid.add_row("waiting", Text(
        f"{seconds(metrics.queue_wait)} ready for a slot or resource"
        + (f"; inside attempts {wait_text(metrics.waited)}" if metrics.waited else "")))
    rerun = metrics.rerun
    grid.add_row("retries", str(metrics.retries) + (
        f"; {rerun} attempt{'s' if rerun != 1 else ''} cut short by "
        f"{'its' if rerun == 1 else 'their'} process's end ran again on resume"
        if rerun else ""))
    return grid


def wait_text(waited: Mapping[str, float]) -> str:
    """``thread 1.02s, model 3.1s``: what attempts waited for, longest first."""
    if not waited:
        return "-"
    return ", ".join(f"{cause} {seconds(s)}" for cause, s in
                     sorted(waited.items(), key=lambda item: -item[1]))


# ------------------------------------------------------------------ runs
def runs_table(records: Iterable[RunRecord], status: Callable[[RunRecord], str]) -> Table:
    """Runs as listed by ``counterpoint runs`` (in the order given). The id column is
    never shortened (it is what the other commands take); the graph's name folds."""
    records = list(records)
    table = Table(show_edge=False, pad_edge=False, box=None)
    table.add_column("run", no_wrap=True,
                     min_width=max((len(r.run_id) for r in records), default=3))
    table.add_column("graph", overflow="fold", ratio=1)
    table.add_column("status", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("took", no_wrap=True, justify="right")
    for record in records:
        shown = status(record)
        # only an ended run took a time: a waiting one (shown "waiting", recorded as
        # running) has not ended, and its row's update time is not when it did
        took = record.updated_at - record.created_at \
            if record.updated_at and record.status != RunStatus.RUNNING else None
        table.add_row(Text(record.run_id), Text(record.graph), styled(shown),
                      clock(record.created_at),
                      seconds(took) if took is not None else "-")
    return table


# ------------------------------------------------------------------ JSON
def payload(report: Report) -> dict[str, Any]:
    """The JSON form of a run: id, status, outputs, each node and the metrics."""
    state = report.state
    metrics = report.metrics.as_dict()
    if not report.deps_known:
        metrics.update(critical_path=None, critical_path_nodes=None,
                       makespan_over_critical_path=None)
    finished = state.status.terminal
    return {
        "run_id": report.run_id,
        "graph": report.graph,
        "status": report.status,
        "created_at": state.created_at or None,
        "finished_at": state.finished_at,
        "outputs": {k: _output(ns) for k, ns in state.nodes.items()
                    if ns.status is NodeStatus.SUCCEEDED},
        "nodes": {k: {"status": ns.status.value if ns.reused else node_status(ns, finished),
                      "attempts": ns.attempt, "run_time": ns.run_time, "error": ns.error,
                      "reused": ns.reused,
                      **({"failed_attempts": list(report.failed_attempts[k])}
                         if k in report.failed_attempts else {}),
                      **({"routing": report.routing[k].as_dict()}
                         if k in report.routing else {}),
                      **({"samples": dict(report.sampling[k])}
                         if k in report.sampling else {})}
                  for k, ns in state.nodes.items()},
        "metrics": metrics,
        "models": usage_dict(state.models),
        **({"budget": budget_dict(report.budget)} if report.budget is not None else {}),
        **({"board": board_payload(state)} if state.board is not None else {}),
        **({"goal": dict(report.goal)} if report.goal is not None else {}),
        "forked_from": None if report.forked_from is None else {
            "run": report.forked_from.run, "seq": report.forked_from.seq,
            "node": report.forked_from.node},
        "forks": list(report.forks),
    }


def usage_line(tally: ModelTally) -> str:
    """Calls, tokens and cost in one line (says so when some calls have no price)."""
    parts = [f"{tally.calls} call{'s' if tally.calls != 1 else ''}"]
    if tally.reused:
        parts.append(f"{tally.reused} reused from the parent run")
    if tally.cache_hits:
        parts.append(f"{tally.cache_hits} from cache")
    if tally.reused:
        parts.append(f"{tally.reuse_share or 0:.0%} from the log")
    if tally.failed:
        parts.append(f"{tally.failed} failed attempt{'s' if tally.failed != 1 else ''}")
    parts.append(f"{tally.input_tokens:,} in / {tally.output_tokens:,} out tokens"
                 + (f" ({tally.cached_tokens:,} cached)" if tally.cached_tokens else ""))
    if tally.calls and tally.unpriced == tally.calls:
        parts.append("cost unknown (no prices configured)")
    else:
        unpriced = f", {tally.unpriced} unpriced call(s) not included" if tally.unpriced else ""
        parts.append(f"${tally.cost:.4f}{unpriced}")
    return ", ".join(parts)


def usage_dict(tally: ModelTally) -> dict[str, Any]:
    return {"calls": tally.calls, "reused": tally.reused, "cache_hits": tally.cache_hits,
            "failed": tally.failed,
            "input_tokens": tally.input_tokens, "output_tokens": tally.output_tokens,
            "cached_tokens": tally.cached_tokens,
            "cost": None if tally.calls and tally.unpriced == tally.calls else tally.cost,
            "unpriced_calls": tally.unpriced}


def _output(ns: NodeState) -> Any:
    if ns.value is not None:
        return json.loads(ns.value)
    return ns.output


def budget_dict(account: Account) -> dict[str, Any]:
    """The JSON form of a run's budget: its caps, spent, reserved, what of
    the spent a crash left unsettled (counted at its bound), and why it ran out."""
    return {"budget": (account.budget or Budget()).as_data(),
            "spent": {"usd": account.spent.usd, "tokens": account.spent.tokens},
            "reserved": {"usd": account.reserved.usd, "tokens": account.reserved.tokens},
            "crashed": {"usd": account.crashed.usd, "tokens": account.crashed.tokens},
            "refused": len(account.refused), "exhausted": account.exhausted()}
