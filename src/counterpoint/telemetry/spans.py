"""A run's events as OpenTelemetry spans, built as the events are logged.

One :class:`RunSpans` observes one run (:mod:`counterpoint.observers`). Each span gets
its start and end from the events' own timestamps, so the trace shows what the log
says, whatever the exporter's latency:

* the run: ``run {graph}`` (GenAI operation ``invoke_workflow``), a child of the
  caller's current span or a root; for a sub-run (a graph node) a child of the parent
  node's attempt, and for a run started by an agent's tool (a graph tool) a child of
  that tool call;
* each node attempt: ``node {id}`` (run id, node, attempt, status, error), with span
  events for a retry and a fallback; edits (``patch_applied``), stops and map
  expansions are events of the run span;
* each agent loop: ``invoke_agent {name}``, under its attempt, or under the tool call
  that runs it when an agent is another agent's tool;
* each model call: ``chat {model}``, with the GenAI attributes (provider, request and
  response model, token usage, finish reasons; messages only with content capture);
* each tool call: ``execute_tool {name}`` (tool name, call id; arguments and result
  only with content capture).

Spans that are open when a node attempt ends (an agent loop, a tool cut short) end
with it; what is open when the run ends, ends with the run.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ..events import Event, EventKind
from ..ids import NodeId
from ..secrets import redact
from . import attributes as a

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Tracer

    from ..observers import ObservedRun

_log = logging.getLogger("counterpoint.telemetry")
_PURPOSE = re.compile(r"agent (?P<scope>.+) turn (?P<turn>\d+)")
_OK = Status(StatusCode.OK)

starting_run: ContextVar[str | None] = ContextVar("counterpoint_starting_run", default=None)
"""The run whose span is being started (read by :mod:`.trace_ids`: a run that starts a
trace takes a trace id derived from its run id, the same in every process that runs it)."""

Attempt = tuple[NodeId | None, int]
ToolKey = tuple[NodeId | None, int, str, int, int]
"""(node, attempt, agent scope, turn, index): one tool call."""


def _ns(at: float) -> int:
    return int(at * 1e9)


class OpenSpans:
    """The spans open in this process that another run may be parented under: node
    attempts by (run, node, attempt), agent tool calls by their idempotency key.

    Touched only on the runs' event loop threads; a dict operation at a time is safe
    across threads.
    """

    def __init__(self) -> None:
        self.attempts: dict[tuple[str, str, int], Span] = {}
        self.tools: dict[str, Span] = {}


class RunSpans:
    """The spans of one run (a :class:`~counterpoint.observers.RunObserver`)."""

    def __init__(self, tracer: Tracer, run: ObservedRun, open_spans: OpenSpans,
                 parent: Context | None, *, content: bool) -> None:
        self.tracer = tracer
        self.run = run
        self.run_id = str(run.run_id)
        self.open = open_spans
        self.parent = parent
        self.content = content
        self.span: Span | None = None
        self.last = 0.0
        self.attempts: dict[Attempt, Span] = {}
        self.agents: dict[tuple[NodeId | None, int, str], list[Any]] = {}
        """(node, attempt, scope) -> [span, last time, input tokens, output tokens]."""
        self.tools: dict[ToolKey, Span] = {}
        self.tool_keys: dict[ToolKey, str] = {}
        self.call_ids: dict[tuple[NodeId | None, int, str, int], list[str]] = {}

    # ----------------------------------------------------------------- the stream
    def put_nowait(self, event: Event | None, /) -> None:
        if event is None:  # the run ended, or was torn down before it could
            if self.span is not None:
                self.span.set_attribute(a.STATUS, "interrupted")
            self._close(max(self.last, time.time()))
            return
        self.last = event.at
        handler = _HANDLERS.get(event.kind)
        if handler is not None:
            try:
                handler(self, event)
            except Exception:  # tracing never breaks a run: the event goes untraced
                _log.exception("run %s: event %d (%s) could not be traced", self.run_id,
                               event.seq, event.kind.value)

    def _context(self, span: Span | None) -> Context | None:
        return trace.set_span_in_context(span) if span is not None else self.parent

    def _start(self, name: str, parent: Span | None, at: float, attributes: dict[str, Any],
               kind: SpanKind = SpanKind.INTERNAL) -> Span:
        return self.tracer.start_span(name, context=self._context(parent), kind=kind,
                                      attributes=attributes, start_time=_ns(at))

    # ----------------------------------------------------------------------- run
    def run_started(self, event: Event) -> None:
        if self.span is not None:
            return
        data = event.data or {}
        graph = data.get("graph") or self.run.state.graph
        attributes: dict[str, Any] = {a.OPERATION: a.INVOKE_WORKFLOW, a.WORKFLOW_NAME: graph,
                                      a.RUN_ID: self.run_id, a.GRAPH: graph}
        if self.run.parent is not None:
            attributes[a.PARENT_RUN_ID] = str(self.run.parent)
        if event.kind is EventKind.RUN_RESUMED:
            attributes["counterpoint.resumed"] = True
        token = starting_run.set(self.run_id)
        try:
            self.span = self.tracer.start_span(f"run {graph}", context=self.parent,
                                               attributes=attributes, start_time=_ns(event.at))
        finally:
            starting_run.reset(token)

    def run_finished(self, event: Event) -> None:
        status = str((event.data or {}).get("status", ""))
        if self.span is not None:
            self.span.set_attribute(a.STATUS, status)
            if status in ("failed", "timed_out"):
                self.span.set_status(Status(StatusCode.ERROR, f"run {self.run_id} {status}"))
        self._close(event.at)

    def run_event(self, event: Event) -> None:
        if self.span is None:
            return
        data = event.data or {}
        if event.kind is EventKind.PATCH_APPLIED:
            self.span.add_event("counterpoint.edit", {
                "counterpoint.version": int(data.get("version", 0)),
                "counterpoint.edit.reason": redact(str(data.get("reason") or "")),
                "counterpoint.edit.added": [str(s.get("id")) for s in data.get("add", ())],
                "counterpoint.edit.replaced": [str(s.get("id"))
                                               for s in data.get("replace", ())],
                "counterpoint.edit.cancelled": [str(n) for n in data.get("cancel", ())],
                "counterpoint.edit.edges": len(data.get("edges", ()))},
                timestamp=_ns(event.at))
        elif event.kind is EventKind.RUN_STOPPING:
            self.span.add_event("counterpoint.stopping", {
                "counterpoint.reason": str(data.get("reason", ""))}, timestamp=_ns(event.at))
        elif event.kind is EventKind.MAP_EXPANDED:
            self.span.add_event("counterpoint.map_expanded", {
                a.NODE: str(event.node), "counterpoint.count": int(data.get("count", 0))},
                timestamp=_ns(event.at))

    def _close(self, at: float) -> None:
        """End every span still open, then the run's."""
        for key in list(self.attempts):
            self._end_attempt(key, at, "interrupted")
        if self.span is not None:
            self.span.end(end_time=_ns(at))
            self.span = None

    # ------------------------------------------------------------------ attempts
    def node_started(self, event: Event) -> None:
        key = (event.node, event.attempt)
        if key in self.attempts:
            return
        self._attempt(event.node, event.attempt, event.at,
                      fallback=bool((event.data or {}).get("fallback")))

    def _attempt(self, node: NodeId | None, attempt: int, at: float, *,
                 fallback: bool = False) -> Span:
        span = self.attempts.get((node, attempt))
        if span is None:
            attributes: dict[str, Any] = {a.RUN_ID: self.run_id, a.NODE: str(node),
                                          a.ATTEMPT: attempt}
            if fallback:
                attributes["counterpoint.fallback"] = True
            span = self.attempts[node, attempt] = self._start(f"node {node}", self.span, at,
                                                              attributes)
            self.open.attempts[self.run_id, str(node), attempt] = span
        return span

    def node_ended(self, event: Event) -> None:
        key = (event.node, event.attempt)
        span = self.attempts.get(key)
        if span is None:
            return  # skipped, blocked or cancelled before it started: no attempt ran
        data = event.data or {}
        kind = event.kind
        if kind is EventKind.NODE_SUCCEEDED:
            status = "succeeded"
            if data.get("via") == "fallback":
                span.set_attribute("counterpoint.via", "fallback")
            span.set_status(_OK)
        elif kind is EventKind.NODE_FAILED:
            status = "failed" if data.get("final") else "retrying"
            message = redact(str(data.get("message", "")))
            span.set_attribute(a.ERROR_TYPE, str(data.get("type", "Exception")))
            span.set_attribute(a.ERROR, message)
            span.set_status(Status(StatusCode.ERROR, message))
            span.add_event("exception", {"exception.type": str(data.get("type", "")),
                                         "exception.message": message},
                           timestamp=_ns(event.at))
            if "retry_in" in data:
                span.add_event("counterpoint.retry", {
                    "counterpoint.retry_in": float(data["retry_in"]),
                    "counterpoint.next_attempt": event.attempt + 1},
                    timestamp=_ns(event.at))
            elif data.get("fallback"):
                status = "fallback"
                span.add_event("counterpoint.fallback", {
                    "counterpoint.next_attempt": event.attempt + 1}, timestamp=_ns(event.at))
        else:
            status = "cancelled"
            span.set_attribute("counterpoint.reason", redact(str(data.get("reason", ""))))
        self._end_attempt(key, event.at, status)

    def _end_attempt(self, key: Attempt, at: float, status: str) -> None:
        node, attempt = key
        for tool_key in [k for k in self.tools if k[:2] == key]:
            self._end_tool(tool_key, at, ok=False, cut=True)
        for agent_key in [k for k in self.agents if k[:2] == key]:
            span, last, tokens_in, tokens_out = self.agents.pop(agent_key)
            span.set_attribute(a.INPUT_TOKENS, tokens_in)
            span.set_attribute(a.OUTPUT_TOKENS, tokens_out)
            span.end(end_time=_ns(last))
        span = self.attempts.pop(key)
        self.open.attempts.pop((self.run_id, str(node), attempt), None)
        span.set_attribute(a.STATUS, status)
        span.end(end_time=_ns(at))

    def plan_round(self, event: Event) -> None:
        data = event.data or {}
        span = self._attempt(event.node, event.attempt, event.at)
        attributes = {"counterpoint.phase": str(data.get("phase", ""))}
        if "attempt" in data:  # a number, or "repaired"
            attributes["counterpoint.plan.attempt"] = str(data["attempt"])
        span.add_event("counterpoint.plan_round", attributes, timestamp=_ns(event.at))

    # ---------------------------------------------------------------- agents
    def _agent(self, node: NodeId | None, attempt: int, scope: str, at: float) -> list[Any]:
        key = (node, attempt, scope)
        agent = self.agents.get(key)
        if agent is None:
            parent: Span | None = None
            parts = scope.split("/")
            if len(parts) >= 3:  # outer/turn.index/inner: run as a tool of another agent
                turn, _, index = parts[-2].partition(".")
                if turn.isdigit() and index.isdigit():
                    parent = self.tools.get((node, attempt, "/".join(parts[:-2]), int(turn),
                                             int(index)))
            if parent is None:
                parent = self._attempt(node, attempt, at)
            name = parts[-1].split("#")[0]
            span = self._start(f"{a.INVOKE_AGENT} {name}", parent, at, {
                a.OPERATION: a.INVOKE_AGENT, a.AGENT_NAME: name, a.SCOPE: scope,
                a.RUN_ID: self.run_id, a.NODE: str(node), a.ATTEMPT: attempt})
            agent = self.agents[key] = [span, at, 0, 0]
        agent[1] = max(agent[1], at)
        return agent

    def agent_turn(self, event: Event) -> None:
        data = event.data or {}
        scope = str(data.get("scope", ""))
        turn = int(data.get("turn", 0))
        agent = self._agent(event.node, event.attempt, scope, event.at)
        usage = data.get("usage") or {}
        agent[2] += int(usage.get("input_tokens", 0) or 0)
        agent[3] += int(usage.get("output_tokens", 0) or 0)
        response = data.get("response") or {}
        self.call_ids[event.node, event.attempt, scope, turn] = [
            str(c.get("id", "")) for c in response.get("tool_calls") or ()]
        if data.get("replayed"):
            agent[0].add_event("counterpoint.replayed_turn", {"counterpoint.turn": turn},
                               timestamp=_ns(event.at))

    # ----------------------------------------------------------------- models
    def model_call(self, event: Event) -> None:
        data = event.data or {}
        if "invalid_output" in data:  # the answer did not validate: re-asked, or given up
            span = self._model_parent(event, data, event.at)
            outcome = {"counterpoint.gave_up": True} if data.get("gave_up") else \
                {"counterpoint.re_ask": int(data.get("re_ask", 0))}
            span.add_event("counterpoint.invalid_output", {
                "counterpoint.problems": redact(str(data["invalid_output"]))[:2000],
                **outcome}, timestamp=_ns(event.at))
            return
        latency = float(data.get("latency") or 0.0)
        requested = str(data.get("requested") or data.get("model") or "")
        attributes: dict[str, Any] = {
            a.OPERATION: a.CHAT, a.PROVIDER: a.provider_name(data.get("provider")),
            a.REQUEST_MODEL: requested, "counterpoint.model": str(data.get("model", "")),
            "counterpoint.model_attempt": int(data.get("attempt", 1) or 1)}
        if "error" in data:
            message = redact(str(data["error"]))
            attributes[a.ERROR_TYPE] = str(data.get("error_type", "ModelError"))
            if data.get("status") is not None:
                attributes["http.response.status_code"] = int(data["status"])
            if data.get("retry_in") is not None:
                attributes["counterpoint.retry_in"] = float(data["retry_in"])
        else:
            message = None
            attributes.update({
                a.RESPONSE_MODEL: str(data.get("served_by") or requested),
                a.INPUT_TOKENS: int(data.get("input_tokens") or 0),
                a.OUTPUT_TOKENS: int(data.get("output_tokens") or 0),
                a.FINISH_REASONS: [str(data.get("finish", ""))],
                "counterpoint.cache_hit": bool(data.get("cache_hit"))})
            if data.get("cached_tokens"):
                attributes[a.CACHE_READ_TOKENS] = int(data["cached_tokens"])
            if data.get("cost") is not None:
                attributes["counterpoint.cost_usd"] = float(data["cost"])
            if data.get("ttft") is not None:
                attributes[a.TIME_TO_FIRST_CHUNK] = float(data["ttft"])
        if data.get("purpose"):
            attributes["counterpoint.purpose"] = str(data["purpose"])
        if self.content:
            attributes.update(self._messages(data))
        started = event.at - latency
        parent = self._model_parent(event, data, started)
        span = self._start(f"{a.CHAT} {requested}", parent, started, attributes,
                           SpanKind.CLIENT)
        if message is not None:
            span.set_status(Status(StatusCode.ERROR, message))
        span.end(end_time=_ns(event.at))

    def _model_parent(self, event: Event, data: dict[str, Any], started: float) -> Span:
        """The agent loop a model call belongs to (started by it, if it is the loop's
        first), else the attempt that made it."""
        match = _PURPOSE.fullmatch(str(data.get("purpose") or ""))
        if match is not None:
            agent = self._agent(event.node, event.attempt, match["scope"], started)
            agent[1] = max(agent[1], event.at)
            span: Span = agent[0]
            return span
        return self._attempt(event.node, event.attempt, started)

    def _messages(self, data: dict[str, Any]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        store = self.run.store
        request = store.blob(data["request"]) if data.get("request") else None
        if request is not None:
            system, messages = a.input_messages(json.loads(request))
            found[a.INPUT_MESSAGES] = messages
            if system is not None:
                found[a.SYSTEM_INSTRUCTIONS] = system
        response = store.blob(data["response"]) if data.get("response") else None
        if response is not None:
            found[a.OUTPUT_MESSAGES] = a.output_messages(json.loads(response))
        return found

    # ------------------------------------------------------------------ tools
    def _tool_key(self, event: Event, data: dict[str, Any]) -> ToolKey:
        return (event.node, event.attempt, str(data.get("scope", "")),
                int(data.get("turn", 0)), int(data.get("index", 0)))

    def tool_call(self, event: Event) -> None:
        data = event.data or {}
        key = self._tool_key(event, data)
        span = self._tool(key, data, event.at)
        if self.content and "arguments" in data:
            span.set_attribute(a.TOOL_ARGUMENTS, a.text(data["arguments"]))

    def _tool(self, key: ToolKey, data: dict[str, Any], at: float) -> Span:
        span = self.tools.get(key)
        if span is None:
            node, attempt, scope, turn, index = key
            parent = self._agent(node, attempt, scope, at)[0]
            name = str(data.get("tool", ""))
            attributes: dict[str, Any] = {
                a.OPERATION: a.EXECUTE_TOOL, a.TOOL_NAME: name, a.TOOL_TYPE: "function",
                "counterpoint.side_effects": bool(data.get("side_effects"))}
            ids = self.call_ids.get((node, attempt, scope, turn)) or []
            if index < len(ids) and ids[index]:
                attributes[a.TOOL_CALL_ID] = ids[index]
            span = self.tools[key] = self._start(f"{a.EXECUTE_TOOL} {name}", parent, at,
                                                 attributes)
            idempotency = data.get("key")
            if idempotency:
                self.tool_keys[key] = str(idempotency)
                self.open.tools[str(idempotency)] = span
        return span

    def tool_result(self, event: Event) -> None:
        data = event.data or {}
        key = self._tool_key(event, data)
        span = self._tool(key, data, event.at)
        if data.get("replayed"):
            span.set_attribute("counterpoint.replayed", True)
        if self.content and "content" in data:
            span.set_attribute(a.TOOL_RESULT, a.text(data["content"]))
        self._end_tool(key, event.at, ok=bool(data.get("ok", True)),
                       message=str(data.get("content", "")))

    def _end_tool(self, key: ToolKey, at: float, *, ok: bool, cut: bool = False,
                  message: str = "") -> None:
        span = self.tools.pop(key)
        idempotency = self.tool_keys.pop(key, None)
        if idempotency is not None:
            self.open.tools.pop(idempotency, None)
        if cut:
            span.set_attribute(a.ERROR_TYPE, "interrupted")
            span.set_status(Status(StatusCode.ERROR, "the attempt ended during the call"))
        elif not ok:
            span.set_attribute(a.ERROR_TYPE, "ToolError")
            span.set_status(Status(StatusCode.ERROR, redact(message)[:500]))
        agent = self.agents.get((key[0], key[1], key[2]))
        if agent is not None:
            agent[1] = max(agent[1], at)
        span.end(end_time=_ns(at))


_HANDLERS: dict[EventKind, Callable[[RunSpans, Event], None]] = {
    EventKind.RUN_CREATED: RunSpans.run_started,
    EventKind.RUN_RESUMED: RunSpans.run_started,
    EventKind.RUN_FINISHED: RunSpans.run_finished,
    EventKind.RUN_STOPPING: RunSpans.run_event,
    EventKind.PATCH_APPLIED: RunSpans.run_event,
    EventKind.MAP_EXPANDED: RunSpans.run_event,
    EventKind.NODE_STARTED: RunSpans.node_started,
    EventKind.NODE_SUCCEEDED: RunSpans.node_ended,
    EventKind.NODE_FAILED: RunSpans.node_ended,
    EventKind.NODE_CANCELLED: RunSpans.node_ended,
    EventKind.MODEL_CALL: RunSpans.model_call,
    EventKind.AGENT_TURN: RunSpans.agent_turn,
    EventKind.TOOL_CALL: RunSpans.tool_call,
    EventKind.TOOL_RESULT: RunSpans.tool_result,
    EventKind.PLAN_ROUND: RunSpans.plan_round,
}
