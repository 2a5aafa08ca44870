"""counterpoint as an MCP server: start workflows and goals, follow, show, list and
cancel runs, list and answer approvals, from any MCP client (``counterpoint mcp``).

Runs started through the server run in the server's process, recorded in its store like
any other (``counterpoint show`` and ``counterpoint resume`` work on them); when the
server stops, the runs it still runs stop where they are and stay resumable. A user's
mistake (an unknown run, a target that does not load, a bad input) is the tool's error
result, in one line, never a traceback.

An answer to an approval is recorded in the store first (the first answer wins); a run
this server or another live process runs takes it at its next command poll, and a run
whose process ended is resumed here, as ``counterpoint approve`` resumes it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ..errors import CounterpointError, UserError
from ..ids import RunId

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from ..graph import Graph
    from ..scheduler import RunHandle
    from ..store import RunStore

FOLLOW_LIMIT = 500
"""Most events one ``follow_run`` answer carries (ask again from ``next_seq``)."""
FOLLOW_WAIT = 30.0
"""Longest ``wait_seconds`` a ``follow_run`` may wait for new events."""
_POLL = 0.05


class Runs:
    """The server's store and the runs it started (they run in this process)."""

    def __init__(self, store: RunStore, model: str | None) -> None:
        self.store = store
        self.model = model
        self.handles: dict[RunId, RunHandle] = {}

    async def start(self, graph: Graph, inputs: dict[str, Any],
                    attr: str | None = None) -> dict[str, Any]:
        from ..api import start
        handle = await start(graph, inputs=inputs, store=self.store, source_attr=attr)
        self.handles[handle.run_id] = handle
        return {"run_id": handle.run_id, "graph": graph.name,
                "status": handle.state.status.value}

    async def stop(self) -> None:
        """Stop executing every run still going; each stays resumable from its log."""
        waiters = [asyncio.ensure_future(h.result()) for h in self.handles.values()]
        if not waiters:
            return
        await asyncio.sleep(0)  # each waiter now awaits its run's task
        for waiter in waiters:
            waiter.cancel()
        await asyncio.wait(waiters)

    async def resume(self, run_id: RunId) -> None:
        """Continue, in this process, a run whose process ended (an answer came for it)."""
        from ..api import start_resume
        handle = await start_resume(run_id, store=self.store)
        self.handles[handle.run_id] = handle

    def _known(self, run_id: str) -> RunId:
        """The run ``run_id`` names: its id, a unique start of it, or ``last`` (as on the
        command line); raises RunNotFound / RunAmbiguous with what to do."""
        from ..cli.recorded import resolve_run
        return resolve_run(self.store, run_id)


def build_server(store: RunStore, *, model: str | None = None) -> MCPServer:
    """The MCP server over ``store``; ``model`` is the default model of workflows and
    goals it starts (``None``: the configured default)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    runs = Runs(store, model)

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await runs.stop()

    server: MCPServer[Any] = MCPServer(
        "counterpoint", lifespan=lifespan, log_level="WARNING",
        instructions="Start counterpoint workflows and goals, follow their events, show "
                     "and cancel runs. Runs are recorded in counterpoint's store.")

    def user_errors(fn: Any) -> Any:
        """The tool, with counterpoint's errors as one-line tool errors."""
        import functools

        @functools.wraps(fn)
        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            from ..secrets import redact
            try:
                return await fn(*args, **kwargs)
            except CounterpointError as exc:  # a user's code may put a secret in its error
                raise ToolError(redact(str(exc).splitlines()[0]) if str(exc) else
                                type(exc).__name__) from None
        return wrapped

    @server.tool()
    @user_errors
    async def start_workflow(target: str, inputs: dict[str, Any] | None = None
                             ) -> dict[str, Any]:
        """Start a workflow file (FILE.yaml) or a Python graph (FILE.py[:GRAPH]) in the
        background and answer its run id; `inputs` are the graph's inputs by name."""
        from ..cli.goals import target_kind, workflow_graph
        from ..loader import load_target, split_target
        if not target.strip():
            raise UserError("start_workflow: target is empty; give a workflow file "
                            "(FILE.yaml) or a Python graph (FILE.py[:GRAPH])")
        given = dict(inputs or {})
        if target_kind(target) == "workflow":
            # a workflow converts text to its inputs' declared types, as on the command line
            texts = [f"{k}={v if isinstance(v, str) else json.dumps(v)}"
                     for k, v in given.items()]
            graph, bound = workflow_graph(target, texts, runs.model)
            return await runs.start(graph, bound)
        return await runs.start(load_target(target), given, split_target(target)[1])

    @server.tool()
    @user_errors
    async def start_goal(goal: str, rounds: int = 2) -> dict[str, Any]:
        """Plan a goal into subtasks that run in parallel, verify and re-plan (up to
        `rounds` rounds), in the background; answers the run id."""
        from ..cli.goals import goal_run_graph, team
        if not goal.strip():
            raise UserError("start_goal: goal is empty; give the goal as a sentence")
        if rounds < 0:
            raise UserError(f"start_goal: rounds must be >= 0 (0: no verification), got "
                            f"{rounds}")
        graph = goal_run_graph(goal, team(runs.model, None, None, None, None),
                               rounds=rounds, budget_tokens=None, budget_usd=None,
                               deadline=None, max_subtasks=6)
        return await runs.start(graph, {})

    @server.tool()
    @user_errors
    async def list_runs(limit: int = 20) -> list[dict[str, Any]]:
        """The newest runs: id, graph, status, when created."""
        from ..cli.recorded import shown_status
        return [{"run_id": r.run_id, "graph": r.graph, "status": shown_status(r),
                 "created_at": r.created_at} for r in store.runs(max(1, min(limit, 200)))]

    @server.tool()
    @user_errors
    async def show_run(run_id: str) -> dict[str, Any]:
        """A run's status, outputs, nodes (status, attempts, errors), metrics and usage."""
        from ..cli.recorded import log_report
        from ..cli.render import payload
        rid = runs._known(run_id)
        return payload(log_report(store.run(rid), store.events(rid)))

    @server.tool()
    @user_errors
    async def follow_run(run_id: str, after_seq: int = 0, limit: int = FOLLOW_LIMIT,
                         wait_seconds: float = 0.0) -> dict[str, Any]:
        """A run's events after `after_seq` (at most `limit`), waiting up to
        `wait_seconds` for one if there is none yet. Ask again from `next_seq`;
        `finished` says the run has ended and its log is complete."""
        limit = max(1, min(limit, FOLLOW_LIMIT))
        deadline = time.monotonic() + max(0.0, min(wait_seconds, FOLLOW_WAIT))
        rid = runs._known(run_id)
        while True:
            events = store.events(rid)
            new = [e for e in events if e.seq > after_seq][:limit]
            finished = store.run(rid).status != "running"
            if new or finished or time.monotonic() >= deadline:
                break
            await asyncio.sleep(_POLL)  # the store has no wake-up for other processes' runs
        return {"events": [{"seq": e.seq, "at": e.at, "kind": e.kind.value, "node": e.node,
                            "attempt": e.attempt, "data": e.data} for e in new],
                "next_seq": new[-1].seq if new else after_seq,
                "finished": finished and (not new or new[-1].seq == events[-1].seq)}

    @server.tool()
    @user_errors
    async def list_approvals(run_id: str | None = None,
                             pending_only: bool = True) -> list[dict[str, Any]]:
        """Approvals waiting for a person (of `run_id`, or of every unfinished run): id,
        run, node, question, payload, status; `pending_only=false` lists answered ones."""
        from ..answering import approvals
        from ..cli.approvals_view import approval_dict
        rid = None if run_id is None else runs._known(run_id)
        found = await asyncio.to_thread(approvals, store, rid)
        return [approval_dict(a) for a in found if not pending_only or a.status == "pending"]

    @server.tool()
    @user_errors
    async def answer_approval(approval_id: str, approved: bool, reason: str | None = None,
                              by: str | None = None,
                              edit: dict[str, Any] | None = None) -> dict[str, Any]:
        """Approve or reject an approval (`edit`: the arguments to call an approved tool
        with instead). The first answer wins; a run whose process ended is resumed."""
        from ..answering import answer
        from ..approval import Answer
        from ..cli.approvals_view import approval_dict
        from ..store.owners import run_owner_alive
        given = Answer(approved=approved, by=by, reason=reason,
                       edit=edit if approved else None)
        answered = await asyncio.to_thread(answer, store, approval_id, given)
        record = store.run(RunId(answered.run_id.split("/", 1)[0]))
        resumed = False
        if record.status == "running" and record.run_id not in runs.handles \
                and not run_owner_alive(record):
            await runs.resume(record.run_id)
            resumed = True
        return {**approval_dict(answered), "resumed": resumed}

    @server.tool()
    @user_errors
    async def cancel_run(run_id: str) -> dict[str, Any]:
        """Cancel a run: stop it if this server runs it, else ask its process to stop
        it, or end it for good if that process died."""
        from ..cli.recorded import mark_cancelled
        from ..state import RunStatus
        from ..store.owners import run_owner_alive
        rid = runs._known(run_id)
        handle = runs.handles.get(rid)
        if handle is not None:
            handle.cancel()
            result = await handle.result()
            return {"run_id": rid, "status": result.status.value}
        record = store.run(rid)
        if record.status != RunStatus.RUNNING:
            return {"run_id": rid, "status": record.status, "note": "already finished"}
        if run_owner_alive(record):
            store.request_cancel(rid)
            return {"run_id": rid, "status": record.status,
                    "note": f"cancel requested from process {record.owner_pid}"}
        mark_cancelled(store, rid)
        return {"run_id": rid, "status": "cancelled"}

    return server
