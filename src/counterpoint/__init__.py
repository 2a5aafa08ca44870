"""counterpoint: a runtime for parallel multi-agent orchestration.

Build a :class:`Graph`, run it with :func:`run` (or :func:`run_sync`), and every
state change is recorded in a durable event log from which a crashed run
resumes (:func:`resume`) without redoing finished work.

The names below are imported on first use (PEP 562), so ``import counterpoint`` and the
command line start fast and load only the layers they use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .answering import approvals, approve, reject
    from .api import fork, fork_sync, resume, run, run_sync, start, start_fork, start_resume
    from .approval import Answer, Approval, Escalate, use_clock
    from .backend import Backend, InProcessBackend
    from .board import Board, BoardConflict, ClaimLost, Key, Versioned, WorkQueue, board_at
    from .context import NodeContext
    from .errors import (
        AgentError,
        ApprovalAnswered,
        ApprovalError,
        ApprovalNotFound,
        BudgetExceeded,
        Cancelled,
        ConfigError,
        ContextTooLong,
        ControlSignal,
        CounterpointError,
        DeadlineExceeded,
        FallbackFailed,
        ForkError,
        GraphError,
        InvalidOutput,
        MalformedResponse,
        MCPServerError,
        ModelError,
        ModelRefused,
        ModelRejected,
        ModelUnavailable,
        NodeFailed,
        NodeTimeout,
        OutputNotSerializable,
        PatchError,
        PlanningError,
        RateLimited,
        Retry,
        RunAmbiguous,
        RunClaimed,
        RunFailure,
        RunNotFound,
        ScriptError,
        SourceError,
        StepNotSerializable,
        StoreCorrupt,
        StoreError,
        StoreLocked,
        StoreTooNew,
        StoreWriterLost,
        ToolError,
        UnpricedModel,
        UpstreamFailed,
        UserError,
        WorkerLost,
    )
    from .events import Event, EventKind
    from .garbage import tune_gc
    from .graph import Choose, Graph, InputRef, NodeKind, NodeRef, NodeSpec, ref, step
    from .ids import NodeId, RunId
    from .loop import EventLoopPolicy, new_event_loop
    from .mcp import MCPTools, mcp_tools
    from .metrics import Metrics, NodeTiming
    from .models import Generation, Message, Model, ScriptedModel, ToolCall, ToolSpec, Usage
    from .options import RunOptions
    from .patch import Edit, Patch
    from .permissions import Capabilities, PermissionDenied
    from .policy import Backoff, Policy
    from .results import NodeResult, RunResult
    from .scheduler import RunHandle
    from .state import ModelTally, NodeStatus, RunStatus
    from .store import MemoryStore, RunRecord, RunStore, SQLiteStore, open_store

_EXPORTS_BY_MODULE: dict[str, tuple[str, ...]] = {
    "answering": ("approvals", "approve", "reject"),
    "api": ("fork", "fork_sync", "resume", "run", "run_sync", "start", "start_fork",
            "start_resume"),
    "approval": ("Answer", "Approval", "Escalate", "use_clock"),
    "backend": ("Backend", "InProcessBackend"),
    "board": ("Board", "BoardConflict", "ClaimLost", "Key", "Versioned", "WorkQueue",
              "board_at"),
    "context": ("NodeContext",),
    "errors": ("AgentError", "ApprovalAnswered", "ApprovalError", "ApprovalNotFound",
        "Cancelled", "ConfigError", "ContextTooLong", "ControlSignal",
        "CounterpointError", "DeadlineExceeded", "FallbackFailed", "ForkError", "GraphError",
        "InvalidOutput",
        "MalformedResponse", "MCPServerError", "ModelError", "ModelRefused", "ModelRejected",
        "ModelUnavailable",
        "NodeFailed", "NodeTimeout", "OutputNotSerializable", "PatchError", "PlanningError",
        "RateLimited", "Retry", "RunClaimed", "RunFailure", "RunNotFound", "ScriptError",
        "SourceError", "StoreCorrupt", "StoreError", "StoreLocked", "StoreTooNew", "ToolError",
        "StoreWriterLost",
        "UpstreamFailed", "UserError", "BudgetExceeded", "RunAmbiguous", "StepNotSerializable",
        "UnpricedModel", "WorkerLost"),
    "events": ("Event", "EventKind"),
    "garbage": ("tune_gc",),
    "graph": ("Choose", "Graph", "InputRef", "NodeKind", "NodeRef", "NodeSpec", "ref", "step"),
    "ids": ("NodeId", "RunId"),
    "loop": ("EventLoopPolicy", "new_event_loop"),
    "mcp": ("MCPTools", "mcp_tools"),
    "metrics": ("Metrics", "NodeTiming"),
    "models": ("Generation", "Message", "Model", "ScriptedModel", "ToolCall", "ToolSpec", "Usage"),
    "options": ("RunOptions",),
    "patch": ("Edit", "Patch"),
    "permissions": ("Capabilities", "PermissionDenied"),
    "policy": ("Backoff", "Policy"),
    "results": ("NodeResult", "RunResult"),
    "scheduler": ("RunHandle",),
    "state": ("ModelTally", "NodeStatus", "RunStatus"),
    "store": ("MemoryStore", "RunRecord", "RunStore", "SQLiteStore", "open_store"),
}

_EXPORTS = {name: module for module, names in _EXPORTS_BY_MODULE.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'counterpoint' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # found once, then an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__version__ = "0.1.0"

__all__ = [
    "AgentError",
    "Answer",
    "Approval",
    "ApprovalAnswered",
    "ApprovalError",
    "ApprovalNotFound",
    "Backend",
    "Backoff",
    "Board",
    "BoardConflict",
    "BudgetExceeded",
    "Cancelled",
    "Capabilities",
    "Choose",
    "ClaimLost",
    "ConfigError",
    "ContextTooLong",
    "ControlSignal",
    "CounterpointError",
    "DeadlineExceeded",
    "Edit",
    "Escalate",
    "Event",
    "EventKind",
    "EventLoopPolicy",
    "FallbackFailed",
    "ForkError",
    "Generation",
    "Graph",
    "GraphError",
    "InProcessBackend",
    "InputRef",
    "InvalidOutput",
    "Key",
    "MCPServerError",
    "MCPTools",
    "MalformedResponse",
    "MemoryStore",
    "Message",
    "Metrics",
    "Model",
    "ModelError",
    "ModelRefused",
    "ModelRejected",
    "ModelTally",
    "ModelUnavailable",
    "NodeContext",
    "NodeFailed",
    "NodeId",
    "NodeKind",
    "NodeRef",
    "NodeResult",
    "NodeSpec",
    "NodeStatus",
    "NodeTimeout",
    "NodeTiming",
    "OutputNotSerializable",
    "Patch",
    "PatchError",
    "PermissionDenied",
    "PlanningError",
    "Policy",
    "RateLimited",
    "Retry",
    "RunAmbiguous",
    "RunClaimed",
    "RunFailure",
    "RunHandle",
    "RunId",
    "RunNotFound",
    "RunOptions",
    "RunRecord",
    "RunResult",
    "RunStatus",
    "RunStore",
    "SQLiteStore",
    "ScriptError",
    "ScriptedModel",
    "SourceError",
    "StepNotSerializable",
    "StoreCorrupt",
    "StoreError",
    "StoreLocked",
    "StoreTooNew",
    "StoreWriterLost",
    "ToolCall",
    "ToolError",
    "ToolSpec",
    "UnpricedModel",
    "UpstreamFailed",
    "Usage",
    "UserError",
    "Versioned",
    "WorkQueue",
    "WorkerLost",
    "__version__",
    "approvals",
    "approve",
    "board_at",
    "fork",
    "fork_sync",
    "mcp_tools",
    "new_event_loop",
    "open_store",
    "ref",
    "reject",
    "resume",
    "run",
    "run_sync",
    "start",
    "start_fork",
    "start_resume",
    "step",
    "tune_gc",
    "use_clock",
]
