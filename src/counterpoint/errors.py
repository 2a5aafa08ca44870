"""Every exception counterpoint raises, in one hierarchy.

::

    CounterpointError                 base of everything below
    ├── UserError                     misuse found before anything runs (exit code 2)
    │   ├── GraphError                a graph is invalid: cycle, duplicate / missing id,
    │   │                             unknown input, annotated type mismatch
    │   ├── PatchError                a live edit was rejected (cycle, finished node, stale version)
    │   ├── RunNotFound               no run with that id in the store
    │   │   └── RunAmbiguous          a run id prefix matches several runs (names them)
    │   ├── RunClaimed                another live process runs the run or is resuming it
    │   ├── ApprovalError             an approval cannot be answered so
    │   │   ├── ApprovalNotFound      no pending or answered approval has that id
    │   │   └── ApprovalAnswered      it was answered already (the first answer wins)
    │   ├── SourceError               a graph file or module cannot be loaded or has no graph
    │   │   └── WorkflowError         a workflow file or its inputs are invalid (every problem,
    │   │                             with file:line; in counterpoint.workflow.errors)
    │   ├── ForkError                 a fork names a seq, node, input or replacement that the
    │   │                             parent run's log does not allow
    │   ├── ConfigError               a model name or ``counterpoint.toml`` is invalid
    │   ├── StepNotSerializable       a step cannot be sent to another process (Ray backend)
    │   └── StoreError                the store cannot be used (nothing in it was modified)
    │       ├── StoreLocked           another process holds the database lock
    │       ├── StoreCorrupt          the file is not a counterpoint database
    │       ├── StoreTooNew           written by a newer counterpoint (unknown migrations)
    │       └── StoreWriterLost       the store's writer process ended while a run wrote
    ├── RunFailure                    failures during a run (recorded as events, never lost)
    │   ├── NodeFailed                a node's own code raised (application failure)
    │   │   └── FallbackFailed        the node's fallback failed too (never retried)
    │   ├── Cancelled                 a sync step saw its attempt cancelled (ctx.check_cancelled)
    │   ├── NodeTimeout               an attempt exceeded the node's timeout (retryable)
    │   ├── OutputNotSerializable     a node returned a value that cannot be stored as JSON
    │   ├── UpstreamFailed            a node was blocked because a dependency failed
    │   ├── DeadlineExceeded          the run's deadline passed
    │   ├── ToolError                 a tool's failure, given to the model as the tool's result
    │   ├── MCPServerError            an MCP server did not start or stopped answering (retryable)
    │   ├── AgentError                an agent stopped without an answer (turns, tokens, time)
    │   ├── PlanningError             the planner produced no usable plan
    │   ├── BoardConflict             a blackboard write based on a stale read, or refused
    │   │   │                         by its key's policy (catch it, read again, retry)
    │   │   └── ClaimLost             a work-queue claim expired or was completed already
    │   ├── PermissionDenied          a call outside the agent's capabilities (refused)
    │   ├── WorkerLost                the process running an attempt died (retryable)
    │   ├── BudgetExceeded            a model call would overspend a money or token budget
    │   │                             (refused before it was sent; names run, node, budget)
    │   ├── UnpricedModel             a model without a price was called under a money budget
    │   └── ModelError                a model call failed (names the model and the cause)
    │       ├── ModelUnavailable      5xx, timeout, connection error, cut-off stream (retryable)
    │       │   └── RateLimited       429 or a provider's "overloaded" (retryable, retry_after)
    │       ├── MalformedResponse     the provider's answer could not be parsed (retryable)
    │       ├── ModelRejected         400/401/403/404: request or credentials are wrong
    │       │   └── ContextTooLong    the prompt does not fit the model's context window
    │       ├── ModelRefused          the model declined to answer
    │       ├── InvalidOutput         structured output still invalid after re-asking
    │       │                         (``raw`` holds the last answer)
    │       └── ScriptError           a scripted test model got a call it was not given,
    │                                 or kept a response that was never used
    └── ControlSignal                 steers the loop; never counted as a failure
        └── Retry                     raise inside a node to ask for another attempt

``BudgetExceeded`` and ``UnpricedModel`` refuse a model call before it is sent; they are
not ``ModelError`` on purpose: a ``ModelError`` is the model's or its provider's failure,
which the model layer answers by rerouting to a fallback model, counting it in that
model's circuit breaker and, for ``model: auto``, escalating to another model. A refusal
by the run's own budget is none of those: the model is healthy and was not called, and
choosing a cheaper model for what is left of a budget is the router's work (``model:
auto`` weighs it before each call). Catch ``(ModelError, BudgetExceeded,
UnpricedModel)`` for every way a model call can end without an answer.

Failures carry ``retryable`` (and ``retry_after`` where the cause says how long to
wait), after Temporal's ``ApplicationError``. Application failures (the node's
code failed: the node ends FAILED) are kept apart from system failures (the
process died: the node is re-run on resume).
"""

from __future__ import annotations


class CounterpointError(Exception):
    """Base class of every counterpoint error."""


class UserError(CounterpointError):
    """Misuse that is detected before a run starts. The CLI exits with code 2."""


class GraphError(UserError):
    """A graph failed validation. The message names the graph and the nodes concerned."""


class PatchError(UserError):
    """A live edit was rejected; the run is unchanged."""


class SourceError(UserError):
    """A graph's source file or module cannot be loaded."""


class RunNotFound(UserError):
    """No run with the given id exists in the store."""


class RunAmbiguous(RunNotFound):
    """A run id prefix matches more than one run; the message names some of them."""


class RunClaimed(UserError):
    """A live process owns the run: it still runs it, or it is resuming it. The message
    names the run, the process and its host, and what to do (wait, or cancel the run)."""


class ApprovalError(UserError):
    """An approval cannot be answered as asked (bad edit, not pending)."""


class ApprovalNotFound(ApprovalError):
    """No approval with that id is in the store."""


class ApprovalAnswered(ApprovalError):
    """The approval was answered already: the first answer wins, once."""


class ForkError(UserError):
    """A fork was asked for something the parent run does not have: an event number out
    of range, an unknown node, an input the graph does not declare, an unusable
    replacement. Nothing was written."""


class ConfigError(UserError):
    """A model name, model configuration or ``counterpoint.toml`` is invalid."""


class StepNotSerializable(UserError):
    """A step, its fallback or a literal input cannot be pickled for a remote worker."""


class StoreError(UserError):
    """The store cannot be opened or used. Nothing in it was modified."""


class StoreLocked(StoreError):
    """Another connection holds the database lock for longer than the busy timeout."""


class StoreCorrupt(StoreError):
    """The file exists but is not a readable counterpoint database."""


class StoreTooNew(StoreError):
    """The database carries migrations this version of counterpoint does not know."""


class StoreWriterLost(StoreError):
    """The store's writer process ended (killed, or crashed) while a run wrote to it. The
    log is whole up to its last commit, and a resume goes on from there."""


class RunFailure(CounterpointError):
    """A failure during a run. ``retryable`` tells the scheduler whether to try again."""

    retryable: bool = True

    def __init__(self, message: str, *, retryable: bool | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable
        self.retry_after = retry_after


class NodeFailed(RunFailure):
    """Raise from a node to fail it with an explicit ``retryable`` flag."""


class FallbackFailed(NodeFailed):
    """A node's fallback, called after its last attempt failed, failed too."""

    retryable = False


class Cancelled(RunFailure):
    """Raised by :meth:`NodeContext.check_cancelled` in a step whose attempt was cancelled
    or timed out: the step stops at its check (the attempt's outcome is already decided)."""

    retryable = False


class NodeTimeout(RunFailure):
    """An attempt ran longer than the node's ``timeout``."""


class OutputNotSerializable(RunFailure):
    """A node's output cannot be encoded as JSON (counterpoint never pickles)."""

    retryable = False


class UpstreamFailed(RunFailure):
    """A node did not run because a node it depends on failed."""

    retryable = False


class DeadlineExceeded(RunFailure):
    """The run's deadline passed before this node finished."""

    retryable = False


class ToolError(RunFailure):
    """Raise inside a tool to give the model an error message instead of failing the node.

    An agent sends the message back to the model as the tool's result; raised
    anywhere else, it is an ordinary (non-retryable) failure.
    """

    retryable = False


class MCPServerError(RunFailure):
    """An MCP server could not be started, did not list its tools, or its connection broke.

    Retryable: the next attempt starts the server again. (A tool's own error result is a
    :class:`ToolError` the model reads, not this.)"""


class AgentError(RunFailure):
    """An agent stopped without an answer: too many turns, over its token budget or
    deadline. Not retryable: the same loop would stop the same way."""

    retryable = False


class PlanningError(RunFailure):
    """The planner produced no usable plan within its attempts."""

    retryable = False


class BoardConflict(RunFailure):
    """A write to the run's blackboard was not applied: it was based on a stale read of a
    key whose policy is ``error``, or refused by the key's policy (``owner_only``), or a
    work-queue result failed its check. Retryable: read the key again and write anew."""

    def __init__(self, message: str, *, key: str = "", read: int | None = None,
                 version: int = 0, retryable: bool | None = None) -> None:
        super().__init__(message, retryable=retryable)
        self.key = key
        """The key (or ``queue/item``) written."""
        self.read = read
        """The version the write was based on."""
        self.version = version
        """The key's version when the write came in."""


class ClaimLost(BoardConflict):
    """A work-queue claim is no longer held: its lease expired (another agent may hold the
    item now) or the item was completed already. The result was not recorded."""

    retryable = False


class PermissionDenied(RunFailure):
    """A call outside the calling agent's capabilities (a tool, its arguments, a side
    effect or a blackboard key it may not write). Refused before it ran, and recorded."""

    retryable = False


class WorkerLost(RunFailure):
    """The worker process or actor running an attempt died (a system failure): retryable,
    the next attempt runs on a fresh worker."""

    retryable = True


class BudgetExceeded(RunFailure):
    """A model call was refused before it was sent: its bound (prompt tokens plus the
    answer's ``max_tokens``) does not fit what is left of a budget, even once the calls in
    flight settle. Not retryable: the same call would be refused again."""

    retryable = False

    def __init__(self, message: str, *, budget: str = "", spent: float = 0.0,
                 reserved: float = 0.0, needed: float = 0.0, cap: float = 0.0,
                 unit: str = "usd") -> None:
        super().__init__(message)
        self.needed = needed
        """What the refused call needed (its bound, in the budget's unit)."""
        self.cap = cap
        """The refusing budget's cap (in its unit)."""
        self.unit = unit
        """``usd`` or ``tokens``: what ran out."""
        self.budget = budget
        """The budget that refused it (``"run R: $0.50"``, ``"run R, node n: 1,000 tokens"``)."""
        self.spent = spent
        """What that budget had spent (US dollars or tokens, in the budget's unit)."""
        self.reserved = reserved
        """What calls in flight had reserved of it when the call was refused."""

    def as_data(self) -> dict[str, object]:
        """The refusal's numbers, for the log (``node_failed`` data ``budget``)."""
        return {"budget": self.budget, "unit": self.unit, "cap": self.cap,
                "spent": self.spent, "reserved": self.reserved, "needed": self.needed}


class UnpricedModel(RunFailure):
    """A model with no configured price was called under a money budget: its cost cannot
    be bounded, so the call is refused. Set ``price_input`` and ``price_output``."""

    retryable = False


class ControlSignal(CounterpointError):
    """Signals that steer the scheduler; they are never reported as failures."""


class Retry(ControlSignal):
    """Raise inside a node to request another attempt (counts against ``retries``)."""

    def __init__(self, reason: str = "retry requested", *, after: float | None = None) -> None:
        super().__init__(reason)
        self.after = after


class ModelError(RunFailure):
    """A call to a language model failed. The message names the model and the cause."""

    def __init__(self, message: str, *, model: str = "", status: int | None = None,
                 retryable: bool | None = None, retry_after: float | None = None) -> None:
        super().__init__(message, retryable=retryable, retry_after=retry_after)
        self.model = model
        """The model name the call was made to (``provider:id`` or a configured name)."""
        self.status = status
        """The HTTP status, when the provider answered with one."""


class ModelUnavailable(ModelError):
    """The provider could not be reached or failed on its side (5xx, timeout, cut stream)."""

    retryable = True


class RateLimited(ModelUnavailable):
    """The provider refused the call for now (429 / overloaded); see ``retry_after``."""


class MalformedResponse(ModelError):
    """The provider's answer could not be parsed."""

    retryable = True


class ModelRejected(ModelError):
    """The provider rejected the request itself (bad request, credentials, unknown model)."""

    retryable = False


class ContextTooLong(ModelRejected):
    """The prompt does not fit the model's context window."""


class ModelRefused(ModelError):
    """The model declined to answer (a refusal or a content filter)."""

    retryable = False


class InvalidOutput(ModelError):
    """Structured output did not validate, even after showing the model its errors."""

    retryable = False

    def __init__(self, message: str, *, model: str = "", raw: str = "",
                 errors: str = "", finish_reason: str = "") -> None:
        super().__init__(message, model=model)
        self.raw = raw
        """The model's last answer, as text."""
        self.errors = errors
        """The validation errors of that answer."""
        self.finish_reason = finish_reason
        """Why the model stopped that answer: ``"length"`` if the token limit cut it off."""


class ScriptError(ModelError):
    """A scripted model was called when it had nothing queued, or kept unused responses."""

    retryable = False
