"""The shape of a workflow file, as pydantic models, and reading a document into them.

The file is validated piece by piece (the top level, then each input, agent and
step on its own), so one bad step does not hide the problems of the others;
pydantic's error locations are mapped back to ``file:line`` through the
document's key lines, and an unknown key comes with the closest allowed key.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeVar

import pydantic

from ..budget import Budget, parse_seconds
from ..errors import UserError
from ..health.settings import HealthSettings, parse_health
from .errors import Problem
from .yamlsource import KeyPath, YamlDocument

M = TypeVar("M", bound=pydantic.BaseModel)

InputType = Literal["string", "integer", "number", "boolean", "list", "object"]


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


def _duration(value: Any) -> Any:
    """A deadline written ``30``, ``30s``, ``2m`` or ``1h``, in seconds."""
    if value is None:
        return None
    try:
        return parse_seconds(value, where="deadline")
    except UserError as exc:
        raise ValueError(str(exc).removeprefix("deadline: ")) from None


class BudgetSpec(_Strict):
    """``budget: {usd: 0.5, tokens: 20000}``: money and/or tokens model calls may spend."""

    usd: float | None = pydantic.Field(default=None, gt=0, strict=True)
    """Strict: a quoted ``"0.5"`` is a mistake reported with its line, not a number."""
    tokens: int | None = pydantic.Field(default=None, ge=1, strict=True)

    def budget(self) -> Budget:
        return Budget(usd=self.usd, tokens=self.tokens)


class InputSpec(_Strict):
    """One declared input: ``{type, default, description}``; no ``default`` = required."""

    type: InputType = "string"
    default: Any = None
    description: str = ""

    @property
    def required(self) -> bool:
        return "default" not in self.model_fields_set


class AgentSpec(_Strict):
    """An agent: a model, instructions, tools (Python references) and an output spec."""

    model: str | None = None
    """A model name (``local:smollm2``, ``openai:gpt-4.1-mini``, a configured name)."""
    instructions: str = ""
    description: str = ""
    tools: list[str] = []
    """``module:function`` or ``file.py:function`` (relative to the workflow file)."""
    output: str | dict[str, Any] | None = None
    """A field spec (see :mod:`.schemas`) or a ``module:Class`` reference."""
    max_turns: int = pydantic.Field(default=8, ge=1)
    max_tokens: int | None = pydantic.Field(default=None, ge=1)
    turn_tokens: int | None = pydantic.Field(default=None, ge=1)
    temperature: float = pydantic.Field(default=0.0, ge=0)
    deadline: float | None = pydantic.Field(default=None, gt=0)
    budget: BudgetSpec | None = None
    """Money and tokens one run of the agent may spend, within what is left of its run's."""
    samples: int = pydantic.Field(default=1, ge=1, strict=True)
    """Parallel samples of each model turn, the majority answer kept (fewer when the
    budget or deadline left covers fewer)."""

    _deadline = pydantic.field_validator("deadline", mode="before")(_duration)


class MCPServerSpec(_Strict):
    """An MCP server whose tools agents name as ``mcp:NAME``: a command or a URL."""

    command: list[str] | None = pydantic.Field(default=None, min_length=1)
    """The program and its arguments (run in the workflow file's folder, or ``cwd``)."""
    url: str | None = None
    """A streamable HTTP endpoint, ``http://127.0.0.1:PORT/mcp``."""
    include: list[str] | None = None
    exclude: list[str] = []
    prefix: str = ""
    read_only: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    start_timeout: float = pydantic.Field(default=30.0, gt=0)
    call_timeout: float | None = pydantic.Field(default=60.0, gt=0)

    @pydantic.model_validator(mode="after")
    def _one_way(self) -> MCPServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command: [program, args...] and url: ...")
        return self


def _condition_text(value: Any) -> Any:
    """``when: false`` in YAML is a boolean; conditions are text."""
    return ("true" if value else "false") if isinstance(value, bool) else value


class LoopSpec(_Strict):
    """Re-run a step until ``until`` holds, at most ``max`` times."""

    max: int = pydantic.Field(ge=1, le=1000)
    until: str | None = None

    _until = pydantic.field_validator("until", mode="before")(_condition_text)


RoutePolicy = Literal["cheapest_that_passes", "quality_first", "latency_first"]


class RouteSpec(_Strict):
    """How ``model: auto`` chooses a model per call (see :mod:`counterpoint.routing`):
    at the workflow's top level for every routed agent step, on a step for that step (its
    keys override the workflow's one by one)."""

    policy: RoutePolicy | None = None
    """``cheapest_that_passes`` (the default), ``quality_first`` or ``latency_first``."""
    tags: list[Annotated[str, pydantic.Field(min_length=1)]] | None = None
    """Skill tags of the work: success is learned per tag, and only models offered for
    them are chosen."""
    models: list[Annotated[str, pydantic.Field(min_length=1)]] | None = \
        pydantic.Field(default=None, min_length=1)
    """The configured models to choose from (default: every one with a ``quality``)."""


class StepSpec(_Strict):
    """One step. Exactly one of ``agent``, ``tool``, ``python``, ``workflow``,
    ``first_of``."""

    agent: str | None = None
    task: str | None = None
    context: str | list[str] | None = None
    tool: str | None = None
    python: str | None = None
    args: dict[str, Any] = {}
    workflow: str | None = None
    inputs: dict[str, Any] = {}
    first_of: list[str] | None = None
    """Step ids: the output of the first of them that ran (the others were skipped)."""
    needs: list[str] = []
    map: str | None = None
    when: str | None = None
    loop: LoopSpec | None = None
    model: str | None = None
    route: RouteSpec | None = None
    """How ``model: auto`` routes this step's calls (see :class:`RouteSpec`)."""
    retries: int | None = pydantic.Field(default=None, ge=0)
    timeout: float | None = pydantic.Field(default=None, gt=0)
    deadline: float | None = pydantic.Field(default=None, gt=0)
    """Seconds the step (a sub-workflow: its whole run) may take: its timeout, written
    ``30s``/``2m`` if you like; the nearer of it and ``timeout`` counts."""
    budget: BudgetSpec | None = None
    """Money and tokens the step's model calls may spend (a sub-workflow's included),
    within what is left of the run's."""
    samples: int | None = pydantic.Field(default=None, ge=1, strict=True)
    """Parallel samples of each model turn of the step's agent (its agent's by default)."""
    description: str = ""

    _when = pydantic.field_validator("when", mode="before")(_condition_text)
    _deadline = pydantic.field_validator("deadline", mode="before")(_duration)

    @pydantic.field_validator("needs", mode="before")
    @classmethod
    def _one_need(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class _Head(_Strict):
    name: str = pydantic.Field(min_length=1)
    description: str = ""
    model: str | None = None
    """The model of agents that name none."""
    route: RouteSpec | None = None
    """How ``model: auto`` routes the calls of every agent step (see :class:`RouteSpec`)."""
    inputs: dict[str, Any] = {}
    agents: dict[str, Any] = {}
    mcp: dict[str, Any] = {}
    """MCP servers by name (see :class:`MCPServerSpec`)."""
    steps: dict[str, Any] = pydantic.Field(min_length=1)
    output: str | None = None
    """The step (``ID`` or ``${steps.ID.output...}``) whose output is the workflow's."""
    budget: BudgetSpec | None = None
    """Money and tokens the workflow's run may spend (unless the caller sets a budget)."""
    deadline: float | None = pydantic.Field(default=None, gt=0)
    """Seconds the workflow's run may take (unless the caller sets a deadline)."""
    health: dict[str, Any] | None = None
    """Circuit breaker settings (see :mod:`counterpoint.health.settings`)."""

    _deadline = pydantic.field_validator("deadline", mode="before")(_duration)


_HEALTH_HINT = ("health: takes failures, error_rate, window, min_calls, slow_call, slow_rate, "
                "open_for, probes, and models: {NAME: {...}} / tools: {NAME: {...}}")
KINDS = ("agent", "tool", "python", "workflow", "first_of")
_MODELS: dict[str, type[pydantic.BaseModel]] = {
    "workflow": _Head, "input": InputSpec, "agent": AgentSpec, "step": StepSpec,
    "loop": LoopSpec, "mcp server": MCPServerSpec, "route": RouteSpec, "budget": BudgetSpec}


@dataclass(kw_only=True, slots=True)
class WorkflowSpec:
    """A workflow file's content, validated per part. Parts that failed are left out of
    ``inputs``/``agents``/``steps`` (their problems are reported), but their names stay in
    ``step_ids`` and ``agent_names`` so references to them are not reported twice."""

    name: str
    description: str
    model: str | None
    output: str | None
    route: RouteSpec | None = None
    budget: Budget | None = None
    deadline: float | None = None
    health: HealthSettings = field(default_factory=HealthSettings)
    inputs: dict[str, InputSpec] = field(default_factory=dict)
    agents: dict[str, AgentSpec] = field(default_factory=dict)
    steps: dict[str, StepSpec] = field(default_factory=dict)
    mcp: dict[str, MCPServerSpec] = field(default_factory=dict)
    step_ids: list[str] = field(default_factory=list)
    agent_names: list[str] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)
    mcp_names: list[str] = field(default_factory=list)


def parse_spec(doc: YamlDocument) -> tuple[WorkflowSpec | None, list[Problem]]:
    """Validate ``doc`` against the models; ``None`` if the top level is unusable (then
    the problems still include those of its inputs, agents, MCP servers and steps)."""
    problems: list[Problem] = []
    head = _validate(doc, _Head, doc.data, (), "workflow", problems)
    if head is None:  # a bad name or deadline must not hide a bad step: check the parts
        raw = doc.data if isinstance(doc.data, dict) else {}
        parts = {key: value for key in ("health", "mcp", "inputs", "agents", "steps")
                 if isinstance(value := raw.get(key), dict)}
        _parse_parts(doc, WorkflowSpec(name="", description="", model=None, output=None),
                     parts, problems)
        return None, problems
    spec = WorkflowSpec(name=head.name, description=head.description, model=head.model,
                        output=head.output, route=head.route, step_ids=list(head.steps),
                        budget=head.budget.budget() if head.budget else None,
                        deadline=head.deadline,
                        agent_names=list(head.agents), input_names=list(head.inputs),
                        mcp_names=list(head.mcp))
    parts = {"mcp": head.mcp, "inputs": head.inputs, "agents": head.agents,
             "steps": head.steps}
    if head.health is not None:
        parts["health"] = head.health
    _parse_parts(doc, spec, parts, problems)
    return spec, problems


def _parse_parts(doc: YamlDocument, spec: WorkflowSpec, parts: dict[str, dict[str, Any]],
                 problems: list[Problem]) -> None:
    """Validate the health settings and each MCP server, input, agent and step of
    ``parts`` into ``spec``."""
    if "health" in parts:
        spec.health, found = parse_health(parts["health"], source=doc.where(("health",)))
        problems.extend(doc.problem(("health", *at), message, _HEALTH_HINT
                                    if message.startswith("unknown") else "")
                        for at, message in found)
    for name, raw in parts.get("mcp", {}).items():
        server = _validate(doc, MCPServerSpec, raw or {}, ("mcp", name), "mcp server",
                           problems)
        if server is not None:
            spec.mcp[name] = server
    for name, raw in parts.get("inputs", {}).items():
        if isinstance(raw, str) or raw is None:  # shorthand ``topic: string``
            raw = {"type": raw} if raw else {}
        bound = _validate(doc, InputSpec, raw, ("inputs", name), "input", problems)
        if bound is not None:
            spec.inputs[name] = bound
    for name, raw in parts.get("agents", {}).items():
        agent = _validate(doc, AgentSpec, raw or {}, ("agents", name), "agent", problems)
        if agent is not None:
            spec.agents[name] = agent
    for step_id, raw in parts.get("steps", {}).items():
        step = _validate(doc, StepSpec, raw or {}, ("steps", step_id), "step", problems)
        if step is not None:
            spec.steps[step_id] = step


def _validate(doc: YamlDocument, model: type[M], raw: Any, at: KeyPath, what: str,
              problems: list[Problem]) -> M | None:
    """``raw`` as ``model``, or ``None``; problems are appended. When unknown keys are
    the only problems, the part is still returned without them, so that the checks
    that follow can report the rest of the file."""
    try:
        return model.model_validate(raw)
    except pydantic.ValidationError as exc:
        errors = exc.errors()
    seen: set[KeyPath] = set()
    for error in errors:
        loc = (*at, *error["loc"])
        known = _known_prefix(doc, loc, at)
        if known in seen:
            continue  # one message per location (unions report once per member)
        seen.add(known)
        problems.append(_problem(doc, error, loc, known, at, what))
    if all(e["type"] == "extra_forbidden" for e in errors):
        try:
            return model.model_validate(_without(raw, [e["loc"] for e in errors]))
        except pydantic.ValidationError:
            return None
    return None


def _without(raw: Any, locs: list[tuple[str | int, ...]]) -> Any:
    """``raw`` with the keys at ``locs`` removed (copied where it changes)."""
    if not locs or not isinstance(raw, dict):
        return raw
    here = {loc[0] for loc in locs if len(loc) == 1}
    deeper: dict[Any, list[tuple[str | int, ...]]] = {}
    for loc in locs:
        if len(loc) > 1:
            deeper.setdefault(loc[0], []).append(loc[1:])
    return {k: _without(v, deeper.get(k, [])) for k, v in raw.items() if k not in here}


def _known_prefix(doc: YamlDocument, loc: KeyPath, at: KeyPath) -> KeyPath:
    for end in range(len(loc), len(at) - 1, -1):
        if loc[:end] in doc.lines:
            return loc[:end]
    return at


def _problem(doc: YamlDocument, error: Any, loc: KeyPath, known: KeyPath, at: KeyPath,
             what: str) -> Problem:
    label = _label(at, what)
    kind = error["type"]
    key = loc[-1] if loc else ""
    if kind == "extra_forbidden":
        owner = _owner(loc[:-1], at, what)
        allowed = tuple(_MODELS[owner].model_fields)
        close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.5)
        keys = f"allowed keys: {', '.join(allowed)}"
        hint = f"did you mean {close[0]!r}? ({keys})" if close and owner != what else \
            f"did you mean {close[0]!r}?" if close else keys
        inside = ".".join(str(p) for p in loc[len(at):-1])
        return doc.problem(known, f"{label}: {inside + ': ' if inside else ''}unknown key "
                                  f"{key!r}", hint)
    field_path = ".".join(str(p) for p in known[len(at):]) or "(value)"
    if kind in ("model_type", "dict_type"):
        got = type(error.get("input")).__name__
        if known == at:
            return doc.problem(known, f"{label} must be a mapping of keys, got {got}",
                               "indent its keys under it")
        return doc.problem(known, f"{label}: {field_path} must be a mapping of keys, got "
                                  f"{got}", _type_hint(field_path) or "indent its keys under it")
    if kind == "missing":  # a key of a block inside the part (loop:) names the block
        inside = ".".join(str(p) for p in loc[len(at):-1])
        return doc.problem(known, f"{label}: {inside + ': ' if inside else ''}missing "
                                  f"required key {key!r}",
                           _type_hint(inside) if inside and _type_hint(inside) else
                           f"add {key}: ...")
    given = error.get("input")
    shown = repr(given) if not isinstance(given, dict | list) else type(given).__name__
    message = error["msg"].removeprefix("Value error, ").lower()
    if not message.endswith(f"got {shown.lower()}"):  # a validator's own message says it
        message += f" (got {shown})"
    return doc.problem(known, f"{label}: {field_path}: {message}",
                       _type_hint(field_path))


def _owner(loc: KeyPath, at: KeyPath, what: str) -> str:
    inner = loc[len(at):]
    if what == "step" and inner[:1] == ("loop",):
        return "loop"
    if what in ("step", "workflow") and inner[:1] == ("route",):
        return "route"
    if inner[:1] == ("budget",):  # a workflow's, a step's or an agent's
        return "budget"
    return what


def _label(at: KeyPath, what: str) -> str:
    if what == "workflow" or not at:
        return "workflow"
    return f"{what} {at[-1]!r}"


def _type_hint(field_path: str) -> str:
    hints = {"needs": "write needs: [step_id, ...]",
             "context": "write a template string or a list of step ids",
             "loop": "write loop: {max: N, until: CONDITION}",
             "type": "types are string, integer, number, boolean, list, object",
             "tools": "write tools: [module:function, file.py:function, mcp:SERVER]",
             "command": "write command: [program, arg, ...]",
             "args": "write args: {name: value or template}",
             "inputs": "write inputs: {name: value or template}",
             "first_of": "write first_of: [step_id, step_id, ...]",
             "budget": "write budget: {usd: 0.5, tokens: 20000} (unquoted numbers; "
                       "either key may be left out)",
             "route": "write route: {policy: cheapest_that_passes | quality_first | "
                      "latency_first, tags: [...], models: [...]}"}
    return hints.get(field_path.split(".")[0], "")
