"""Following a run while it executes: a live view on a terminal, a line per node otherwise.

:func:`follow` feeds a :class:`Display` from :meth:`RunHandle.events` until the
run's result is in. The live view never renders from another thread (rich's
auto-refresh is off): a ticker task on the run's own event loop redraws it, so
the state it reads is never changing underneath it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from ..events import APPROVALS, Event, EventKind
from ..ids import NodeId
from ..results import RunResult
from ..scheduler import RunHandle
from ..state import NodeState, NodeStatus, RunState
from .approvals_view import approval_line
from .render import cause, round_lines, seconds, styled

REFRESH_SECONDS = 0.1
"""How often the live view is redrawn."""
RUNNING_ROWS = 10
RECENT_ROWS = 6
FAILED_ROWS = 5
CAUSE_CHARS = 70

_ACTIVE = frozenset({NodeStatus.RUNNING, NodeStatus.RETRYING})
_ENDINGS = frozenset({EventKind.NODE_SUCCEEDED, EventKind.NODE_FAILED, EventKind.NODE_BLOCKED,
                      EventKind.NODE_CANCELLED, EventKind.NODE_SKIPPED})


@dataclass(slots=True)
class Tally:
    """What the displays remember from the events: which nodes ended, recently and badly."""

    done: set[NodeId] = field(default_factory=set)
    recent: deque[NodeId] = field(default_factory=lambda: deque(maxlen=RECENT_ROWS))
    failed: list[NodeId] = field(default_factory=list)
    started: dict[NodeId, None] = field(default_factory=dict)
    """Nodes that started, in that order, and may still be running or retrying: what the
    live view looks at for its running rows instead of every node of the run."""

    def reused(self, state: RunState) -> None:
        """Count as done the nodes that ended before this execution: a fork's reused ones
        and a resumed run's finished ones end in no event of it (a resume counted "[1/3]"
        for the run's second node); and take in the nodes running already (a resumed
        run's)."""
        self.done.update(n for n, ns in state.nodes.items() if ns.reused or ns.status.terminal)
        self.started.update((n, None) for n, ns in state.nodes.items() if ns.status in _ACTIVE)

    def active(self, state: RunState) -> list[NodeState]:
        """The nodes running or retrying now, in the order they started."""
        nodes = state.nodes
        out: list[NodeState] = []
        for node in list(self.started):
            ns = nodes.get(node)
            if ns is not None and ns.status in _ACTIVE:
                out.append(ns)
            else:
                del self.started[node]
        return out

    def note(self, event: Event, state: RunState) -> NodeState | None:
        """The node ``event`` ended (or whose attempt failed), else ``None``."""
        if event.kind is EventKind.NODE_STARTED and event.node is not None:
            self.started[event.node] = None
            return None
        if event.kind not in _ENDINGS or event.node is None:
            return None
        ns = state.nodes.get(event.node)
        if ns is None:
            return None
        if ns.status.terminal and event.node not in self.done:
            self.done.add(event.node)
            self.recent.append(event.node)
            if ns.status is NodeStatus.FAILED:
                self.failed.append(event.node)
        return ns


class Display:
    """Shows a run's progress; this base shows nothing (``--quiet``)."""

    refresh: bool = False
    """Whether :meth:`tick` should be called every :data:`REFRESH_SECONDS`."""
    listens: bool = False
    """Whether :meth:`event` shows anything: if not, the run is not subscribed to (a
    ``run -q`` of 100,000 nodes spent ~0.05 s of 2.5 s handing events to a display that
    dropped them)."""

    def begin(self, state: RunState) -> None:
        """The run started; :meth:`event` then gets every event from its first."""

    def event(self, event: Event, state: RunState) -> None:
        """``event`` was applied to ``state``."""

    def tick(self, state: RunState) -> None:
        """Time passed."""

    def end(self, state: RunState) -> None:
        """The run finished, or following it stopped."""


class LineDisplay(Display):
    """One plain line per node that ends (and per failed attempt), for logs and pipes."""

    listens = True

    def __init__(self, console: Console) -> None:
        self.console = console
        self.tally = Tally()

    def begin(self, state: RunState) -> None:
        self.tally.reused(state)
        self.console.print(f"run {state.run_id}: graph {state.graph!r}, {len(state.nodes)} "
                           "nodes", soft_wrap=True)

    def event(self, event: Event, state: RunState) -> None:
        if event.kind is EventKind.PLAN_ROUND:
            for line in round_lines(event.data or {}):
                self.console.print(line, soft_wrap=True, markup=False)
            return
        if event.kind in APPROVALS:
            self.console.print(approval_line(event), soft_wrap=True, markup=False)
            return
        ns = self.tally.note(event, state)
        if ns is None:
            return
        node = ns.spec.id
        count = f"[{len(self.tally.done)}/{len(state.nodes)}]"
        if event.kind is EventKind.NODE_FAILED and not ns.status.terminal:
            data = event.data or {}
            retry = f"; retrying in {seconds(data['retry_in'])}" if "retry_in" in data else ""
            line = f"{count} {node} attempt {event.attempt} failed: {cause(ns)}{retry}"
        else:
            took = f" in {seconds(ns.run_time)}" if ns.attempt else ""
            tries = f" after {ns.attempt} attempts" if ns.attempt > 1 else ""
            why = cause(ns) if ns.status is not NodeStatus.SUCCEEDED else ""
            line = f"{count} {node} {ns.status.value}{took}{tries}" + (f": {why}" if why else "")
        # plain text, written as it is: rich's print took ~60 µs a line (a 100,000-node
        # run printed for 6 s longer than it ran), and there is nothing to style here
        self.console.file.write(line + "\n")


class LiveView(Display):
    """A progress bar and a table of running, recently finished and failed nodes."""

    refresh = True
    listens = True

    def __init__(self, console: Console) -> None:
        self.tally = Tally()
        self.started = time.time()
        self.live = Live(console=console, auto_refresh=False, transient=True)

    def begin(self, state: RunState) -> None:
        self.tally.reused(state)
        self.live.start()
        self.tick(state)

    def event(self, event: Event, state: RunState) -> None:
        if event.kind is EventKind.PLAN_ROUND:  # printed above the live view, kept
            for line in round_lines(event.data or {}):
                self.live.console.print(line, soft_wrap=True, markup=False)
            return
        if event.kind in APPROVALS:
            self.live.console.print(approval_line(event), soft_wrap=True, markup=False)
            return
        self.tally.note(event, state)

    def tick(self, state: RunState) -> None:
        self.live.update(render_live(state, self.tally, self.started, time.time()),
                         refresh=True)

    def end(self, state: RunState) -> None:
        self.live.stop()


def render_live(state: RunState, tally: Tally, started: float, now: float) -> RenderableType:
    """The live view of ``state`` at time ``now``."""
    nodes = state.nodes
    total = len(nodes)
    done = len(tally.done)
    head = Text.assemble(("run ", "bold"), state.run_id, "  graph ", (state.graph, "bold"),
                         f"  {seconds(now - started)}")
    if state.models.calls:
        head.append(f"  {state.models.calls} model calls, {state.models.tokens:,} tokens",
                    style="dim")
    bar = Table.grid(padding=(0, 1))
    bar.add_row(ProgressBar(total=max(total, 1), completed=done, width=40),
                Text(f"{done}/{total} nodes"),
                Text(f"{len(tally.failed)} failed", style="red") if tally.failed else Text())
    table = Table(box=None, show_edge=False, pad_edge=False)
    table.add_column("node", no_wrap=True, overflow="ellipsis", max_width=40)
    table.add_column("status", no_wrap=True)
    table.add_column("attempt", justify="right")
    table.add_column("time", justify="right")
    table.add_column("detail", no_wrap=True, overflow="ellipsis")
    active = tally.active(state)
    for ns in active[:RUNNING_ROWS]:
        elapsed = now - ns.started_at if ns.started_at is not None else None
        detail = cause(ns)[:CAUSE_CHARS] if ns.status is NodeStatus.RETRYING else ""
        table.add_row(Text(ns.spec.id), styled(ns.status.value), str(ns.attempt),
                      seconds(elapsed), Text(detail))
    if len(active) > RUNNING_ROWS:
        table.add_row(Text(f"... {len(active) - RUNNING_ROWS} more running", style="dim"))
    for node in reversed(tally.recent):
        ns = nodes[node]
        if ns.status is not NodeStatus.FAILED:
            table.add_row(Text(node), styled(ns.status.value), str(ns.attempt),
                          seconds(ns.run_time),
                          Text(cause(ns)[:CAUSE_CHARS] if ns.status is not NodeStatus.SUCCEEDED
                               else ""))
    for node in tally.failed[-FAILED_ROWS:]:
        ns = nodes[node]
        table.add_row(Text(node), styled(ns.status.value), str(ns.attempt),
                      seconds(ns.run_time), Text(cause(ns)[:CAUSE_CHARS]))
    if len(tally.failed) > FAILED_ROWS:
        table.add_row(Text(f"... {len(tally.failed) - FAILED_ROWS} more failed", style="dim"))
    return Group(head, bar, table)


async def follow(handle: RunHandle, display: Display) -> RunResult:
    """Show the run behind ``handle`` on ``display`` until it finishes; return its result."""
    display.begin(handle.state)
    consumer = asyncio.create_task(_consume(handle, display)) if display.listens else None
    ticker = asyncio.create_task(_tick(handle, display)) if display.refresh else None
    try:
        result = await handle.result()
        if consumer is not None:  # the last events are already queued
            await asyncio.wait({consumer}, timeout=1.0)
    finally:
        helpers = [t for t in (consumer, ticker) if t is not None]
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        display.end(handle.state)
    return result


async def _consume(handle: RunHandle, display: Display) -> None:
    state = handle.state
    async for event in handle.events():  # from the first, even if the run is over already
        display.event(event, state)


async def _tick(handle: RunHandle, display: Display) -> None:
    while True:
        await asyncio.sleep(REFRESH_SECONDS)
        display.tick(handle.state)
