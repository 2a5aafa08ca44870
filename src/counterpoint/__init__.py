"""counterpoint: a runtime for parallel multi-agent orchestration.

Build a :class:`Graph`, run it with :func:`run` (or :func:`run_sync`), and every
state change is recorded in a durable event log from which a crashed run
resumes (:func:`resume`) without redoing finished work.
"""

from __future__ import annotations

from .backend import Backend, InProcessBackend
from .context import NodeContext
from .errors import (
    ControlSignal,
    CounterpointError,
    DeadlineExceeded,
    GraphError,
    NodeFailed,
    NodeTimeout,
    OutputNotSerializable,
    PatchError,
    Retry,
    RunFailure,
    RunNotFound,
    SourceError,
    StoreCorrupt,
    StoreError,
    StoreLocked,
    StoreTooNew,
    UpstreamFailed,
    UserError,
)
from .events import Event, EventKind
from .graph import Choose, Graph, InputRef, NodeKind, NodeRef, NodeSpec, ref, step
from .ids import NodeId, RunId
from .metrics import Metrics, NodeTiming
from .options import RunOptions
from .patch import Edit, Patch
from .policy import Backoff, Policy
from .results import NodeResult, RunResult
from .runtime import (
    RunHandle,
    resume,
    run,
    run_sync,
    start,
    start_resume,
)
from .state import NodeStatus, RunStatus
from .store import MemoryStore, RunRecord, RunStore, SQLiteStore, open_store

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "Backoff",
    "Choose",
    "ControlSignal",
    "CounterpointError",
    "DeadlineExceeded",
    "Edit",
    "Event",
    "EventKind",
    "Graph",
    "GraphError",
    "InProcessBackend",
    "InputRef",
    "MemoryStore",
    "Metrics",
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
    "Policy",
    "Retry",
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
    "SourceError",
    "StoreCorrupt",
    "StoreError",
    "StoreLocked",
    "StoreTooNew",
    "UpstreamFailed",
    "UserError",
    "__version__",
    "open_store",
    "ref",
    "resume",
    "run",
    "run_sync",
    "start",
    "start_resume",
    "step",
]
