"""A run's lifecycle as Python ``logging`` records under the ``counterpoint.*`` loggers.

=======================  =========================================================
logger                   records
=======================  =========================================================
``counterpoint.run``     started / resumed (INFO), edited, stopping (INFO), finished:
                         INFO if it succeeded, WARNING if cancelled or timed out,
                         ERROR if failed
``counterpoint.node``    started, succeeded (DEBUG); retried (WARNING); failed for
                         good (ERROR); cancelled, skipped, blocked (INFO)
``counterpoint.model``   a model call (DEBUG); a failed call or an answer that did not
                         validate (WARNING)
``counterpoint.tool``    a tool call (DEBUG); a tool error the agent was told (WARNING)
=======================  =========================================================

Every record carries ``counterpoint_run_id``, ``counterpoint_node``,
``counterpoint_attempt`` and ``counterpoint_event`` (the event kind) for structured
handlers. A run gets the observer only when a ``counterpoint`` record could go
somewhere (a handler on the way to the root, and a level that lets ERROR through);
which levels are on is read when the run starts. Messages hold what the log holds, which
never holds a configured secret.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..events import Event, EventKind
from ..observers import ObservedRun
from ..secrets import redact

__all__ = ["LogRecords", "log_records"]

RUN = logging.getLogger("counterpoint.run")
NODE = logging.getLogger("counterpoint.node")
MODEL = logging.getLogger("counterpoint.model")
TOOL = logging.getLogger("counterpoint.tool")
_LOGGERS = (RUN, NODE, MODEL, TOOL)
_FINISHED = {"succeeded": logging.INFO, "cancelled": logging.WARNING,
             "timed_out": logging.WARNING}


def _handled(logger: logging.Logger) -> bool:
    """Whether a record of ``logger`` reaches a handler (a ``NullHandler`` does not count)."""
    current: logging.Logger | None = logger
    while current is not None:
        if any(not isinstance(h, logging.NullHandler) for h in current.handlers):
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False


def log_records(run: ObservedRun) -> LogRecords | None:
    """The log observer of ``run``, or ``None`` when no record could be seen."""
    for logger in _LOGGERS:
        if logger.isEnabledFor(logging.ERROR) and _handled(logger):
            return LogRecords(run)
    return None


class LogRecords:
    """Log records for one run's events (a :class:`~counterpoint.observers.RunObserver`)."""

    def __init__(self, run: ObservedRun) -> None:
        self.run_id = str(run.run_id)
        self.debug_node = NODE.isEnabledFor(logging.DEBUG)
        self.debug_model = MODEL.isEnabledFor(logging.DEBUG)
        self.debug_tool = TOOL.isEnabledFor(logging.DEBUG)
        self.info_node = NODE.isEnabledFor(logging.INFO)

    def put_nowait(self, event: Event | None, /) -> None:
        if event is None:
            return
        handler = _HANDLERS.get(event.kind)
        if handler is not None:
            try:
                handler(self, event)
            except Exception:  # a record never breaks a run
                logging.getLogger("counterpoint.telemetry").exception(
                    "run %s: event %d (%s) could not be logged", self.run_id, event.seq,
                    event.kind.value)

    def _log(self, logger: logging.Logger, level: int, event: Event, message: str,
             *args: Any) -> None:
        if logger.isEnabledFor(level):
            # the log keeps reasons, errors and tool results as they were made: mask
            # secrets of the environment as the spans do
            args = tuple(a if a is None or isinstance(a, int | float) else redact(str(a))
                         for a in args)
            logger.log(level, message, *args, extra={
                "counterpoint_run_id": self.run_id, "counterpoint_node": event.node,
                "counterpoint_attempt": event.attempt,
                "counterpoint_event": event.kind.value})

    def run(self, event: Event) -> None:
        data = event.data or {}
        kind = event.kind
        if kind is EventKind.RUN_CREATED:
            self._log(RUN, logging.INFO, event, "run %s of graph %s started (%s nodes)",
                      self.run_id, data.get("graph"), data.get("nodes"))
        elif kind is EventKind.RUN_RESUMED:
            self._log(RUN, logging.INFO, event, "run %s resumed (pid %s)", self.run_id,
                      data.get("pid"))
        elif kind is EventKind.RUN_FINISHED:
            status = str(data.get("status"))
            self._log(RUN, _FINISHED.get(status, logging.ERROR), event, "run %s %s",
                      self.run_id, status)
        elif kind is EventKind.RUN_STOPPING:
            self._log(RUN, logging.INFO, event, "run %s stopping: %s", self.run_id,
                      data.get("reason"))
        elif kind is EventKind.PATCH_APPLIED:
            self._log(RUN, logging.INFO, event,
                      "run %s edited (version %s): %d added, %d replaced, %d cancelled%s",
                      self.run_id, data.get("version"), len(data.get("add", ())),
                      len(data.get("replace", ())), len(data.get("cancel", ())),
                      f" ({data['reason']})" if data.get("reason") else "")

    def node(self, event: Event) -> None:
        kind = event.kind
        data = event.data or {}
        if kind is EventKind.NODE_STARTED:
            if self.debug_node:
                self._log(NODE, logging.DEBUG, event, "run %s, node %r: attempt %d started",
                          self.run_id, event.node, event.attempt)
        elif kind is EventKind.NODE_SUCCEEDED:
            if self.debug_node:
                self._log(NODE, logging.DEBUG, event, "run %s, node %r: attempt %d succeeded",
                          self.run_id, event.node, event.attempt)
        elif kind is EventKind.NODE_FAILED:
            error = f"{data.get('type', 'error')}: {data.get('message', '')}"
            if "retry_in" in data:
                self._log(NODE, logging.WARNING, event,
                          "run %s, node %r: attempt %d failed (%s); retrying in %gs",
                          self.run_id, event.node, event.attempt, error, data["retry_in"])
            elif data.get("fallback"):
                self._log(NODE, logging.WARNING, event,
                          "run %s, node %r: attempt %d failed (%s); running its fallback",
                          self.run_id, event.node, event.attempt, error)
            else:
                self._log(NODE, logging.ERROR, event, "run %s, node %r failed: %s",
                          self.run_id, event.node, error)
        elif self.info_node:
            what = {EventKind.NODE_CANCELLED: "cancelled", EventKind.NODE_SKIPPED: "skipped",
                    EventKind.NODE_BLOCKED: "blocked"}[kind]
            self._log(NODE, logging.INFO, event, "run %s, node %r %s: %s", self.run_id,
                      event.node, what, data.get("reason", ""))

    def model(self, event: Event) -> None:
        data = event.data or {}
        if "error" in data:
            retry = data.get("retry_in")
            self._log(MODEL, logging.WARNING, event,
                      "run %s, node %r: model %s call %s failed (%s: %s)%s", self.run_id,
                      event.node, data.get("model"), data.get("attempt"),
                      data.get("error_type"), data.get("error"),
                      f"; retrying in {retry:g}s" if retry is not None else "")
        elif "invalid_output" in data:
            self._log(MODEL, logging.WARNING, event,
                      "run %s, node %r: model %s answer did not validate (%s); asking again",
                      self.run_id, event.node, data.get("model"), data.get("invalid_output"))
        elif self.debug_model:
            self._log(MODEL, logging.DEBUG, event,
                      "run %s, node %r: model %s answered (%s in, %s out tokens, %s)",
                      self.run_id, event.node, data.get("model"), data.get("input_tokens"),
                      data.get("output_tokens"), data.get("finish"))

    def tool(self, event: Event) -> None:
        data = event.data or {}
        if event.kind is EventKind.TOOL_CALL:
            if self.debug_tool:
                self._log(TOOL, logging.DEBUG, event, "run %s, node %r: agent %s calls %s",
                          self.run_id, event.node, data.get("scope"), data.get("tool"))
        elif not data.get("ok", True):
            self._log(TOOL, logging.WARNING, event,
                      "run %s, node %r: tool %s failed for agent %s: %s", self.run_id,
                      event.node, data.get("tool"), data.get("scope"),
                      str(data.get("content", ""))[:500])


_HANDLERS: dict[EventKind, Callable[[LogRecords, Event], None]] = {
    EventKind.RUN_CREATED: LogRecords.run, EventKind.RUN_RESUMED: LogRecords.run,
    EventKind.RUN_FINISHED: LogRecords.run, EventKind.RUN_STOPPING: LogRecords.run,
    EventKind.PATCH_APPLIED: LogRecords.run,
    EventKind.NODE_STARTED: LogRecords.node, EventKind.NODE_SUCCEEDED: LogRecords.node,
    EventKind.NODE_FAILED: LogRecords.node, EventKind.NODE_CANCELLED: LogRecords.node,
    EventKind.NODE_SKIPPED: LogRecords.node, EventKind.NODE_BLOCKED: LogRecords.node,
    EventKind.MODEL_CALL: LogRecords.model,
    EventKind.TOOL_CALL: LogRecords.tool, EventKind.TOOL_RESULT: LogRecords.tool,
}
