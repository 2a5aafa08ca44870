"""Tools: typed Python functions a model can call.

``@tool`` turns a function (sync or async) into a :class:`Tool` whose JSON schema
comes from its type hints and whose descriptions come from its docstring (the
first paragraph describes the tool; ``Args:`` or ``:param x:`` lines describe
the parameters). Arguments a model sends are validated against the hints
before the function runs (unknown arguments are rejected); a sync function runs
in a worker thread. A parameter called ``ctx`` (or annotated ``NodeContext``)
receives the running node's context and is not part of the schema.

A tool that changes the world declares ``side_effects=True``. If its function
takes an ``idempotency_key`` parameter, counterpoint passes a key that is the
same for the same call in the same run, also after a crash and resume, so the
system it talks to can drop a repeated effect; and a side-effecting call whose
result is already in the run log is never made again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, get_type_hints, overload, runtime_checkable

import pydantic

from ..checks import number
from ..context import current_context
from ..errors import ToolError, UserError
from ..models.types import ToolSpec

if TYPE_CHECKING:
    from ..context import NodeContext

IDEMPOTENCY_PARAM = "idempotency_key"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What every provider accepts as a tool name."""



@dataclass(frozen=True, kw_only=True)
class Tool:
    """A callable the model can use: a name, a description, an argument schema, a function.

    Calling it is safe from many tasks at once; whether the function itself is
    safe to run concurrently is the function's business.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments (an object)."""
    fn: Callable[..., Any] | None = field(repr=False, default=None)
    side_effects: bool = False
    """Whether calling it changes something outside the run (sent mail, wrote a row)."""
    takes_key: bool = False
    """Whether ``fn`` takes an ``idempotency_key`` argument."""
    context_param: str | None = None
    """The parameter of ``fn`` that receives the running node's context, if any."""
    validator: pydantic.TypeAdapter[Any] | None = field(repr=False, default=None)
    """Checks and converts the model's arguments (a model of the parameters)."""
    runner: Callable[[dict[str, Any]], Awaitable[Any]] | None = field(repr=False, default=None)
    """For tools that are not plain functions (agents, graphs): runs validated arguments."""
    approval: bool | Callable[[dict[str, Any]], bool] = False
    """Whether a person must approve a call before it runs: ``True`` for every call, or a
    function of the (validated) arguments saying whether this call needs it."""
    alternatives: tuple[Tool, ...] = ()
    """Tools taking the same arguments that a failing call is rerouted to, cheapest
    healthy first (:mod:`counterpoint.health.tools`)."""
    cost: float = 1.0
    """What a call costs, relative to its alternatives (for rerouting)."""

    def needs_approval(self, arguments: Mapping[str, Any]) -> bool:
        """Whether a call with ``arguments`` must be approved first."""
        if callable(self.approval):
            return bool(self.approval(self.validate(arguments)))
        return self.approval

    def __post_init__(self) -> None:
        _check_name(self.name, "pass name=... to choose a valid one")
        if (self.fn is None) == (self.runner is None):
            raise UserError(f"tool {self.name}: give exactly one of fn and runner")
        number(self.cost, f"tool {self.name}: cost")

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description,
                        parameters=self.parameters)

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments checked and converted by the type hints; raises ``ToolError``."""
        if self.validator is None:
            return dict(arguments)
        try:
            model = self.validator.validate_python(dict(arguments))
        except pydantic.ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: "
                                 f"{e['msg']}" for e in exc.errors()[:8])
            raise ToolError(f"invalid arguments for tool {self.name}: {problems}") from None
        return {info.alias or name: getattr(model, name)
                for name, info in type(model).model_fields.items()}

    async def call(self, arguments: Mapping[str, Any], *, key: str | None = None) -> Any:
        """Validate ``arguments`` and run the tool. ``key`` is the idempotency key.

        Raises :class:`ToolError` for invalid arguments, and whatever the tool raises.
        """
        args = self.validate(arguments)
        if self.runner is not None:
            return await self.runner(args)
        fn = self.fn
        assert fn is not None
        if self.takes_key:
            args[IDEMPOTENCY_PARAM] = key
        if self.context_param is not None:
            args[self.context_param] = current_context()
        if _is_async(fn):
            return await fn(**args)
        result = await asyncio.to_thread(fn, **args)  # copies contextvars: ctx still works
        return await result if inspect.isawaitable(result) else result

    async def __call__(self, **arguments: Any) -> Any:
        return await self.call(arguments)


@runtime_checkable
class Toolset(Protocol):
    """Tools that are known only once a run uses them (an MCP server's, say).

    An agent given a toolset asks it for its tools when each run of its loop starts,
    and calls them like any other :class:`Tool` (recorded, journaled, flushed around
    side effects the same way). ``resolve_tools`` may start things (a server process); what it
    starts inside a run belongs to the run (``ctx.resources``) and ends with it. The
    agent asks again in each run of its loop, so the answer may be cached per run.
    """

    @property
    def name(self) -> str:
        """What errors call the toolset."""
        ...

    async def resolve_tools(self, ctx: NodeContext | None) -> Sequence[Tool]:
        """The tools, in a stable order; raises a :class:`~counterpoint.RunFailure` if
        they cannot be had (the node fails, or retries if the failure is retryable)."""
        ...


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(*, name: str | None = None, description: str | None = None,
         side_effects: bool = False, approval: bool | Callable[[dict[str, Any]], bool] = False,
         alternatives: Sequence[Tool] = (), cost: float = 1.0,
         ) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None,
         description: str | None = None, side_effects: bool = False,
         approval: bool | Callable[[dict[str, Any]], bool] = False,
         alternatives: Sequence[Tool] = (), cost: float = 1.0,
         ) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` of a typed function: ``@tool`` or ``@tool(side_effects=True)``;
    ``approval=True`` (or a function of the arguments) makes each call wait for a person;
    ``alternatives`` are tried, cheapest ``cost`` first, when a call fails."""
    def make(function: Callable[..., Any]) -> Tool:
        made = from_function(function, name=name, description=description,
                             side_effects=side_effects, approval=approval)
        return dataclasses.replace(made, alternatives=tuple(alternatives), cost=cost)
    return make(fn) if fn is not None else make


def from_function(fn: Callable[..., Any], *, name: str | None = None,
                  description: str | None = None, side_effects: bool = False,
                  approval: bool | Callable[[dict[str, Any]], bool] = False) -> Tool:
    """The :class:`Tool` for ``fn`` (see the module docstring)."""
    where = _where(fn)
    tool_name = name if name is not None else getattr(fn, "__name__", None)
    if tool_name is None:
        raise UserError(f"{where}: {fn!r} has no __name__; pass tool(name=...)")
    _check_name(tool_name, f"{where}: pass tool(name=...)")
    summary, param_docs = _docstring(inspect.getdoc(fn) or "")
    target = fn if inspect.isroutine(fn) else getattr(fn, "__call__", fn)  # noqa: B004
    try:
        hints = get_type_hints(target)
    except (NameError, TypeError) as exc:
        raise UserError(f"{where}: tool {tool_name}: cannot resolve its type hints: {exc}"
                        ) from exc
    params: dict[str, tuple[Any, Any, str | None]] = {}
    takes_key = False
    context_param: str | None = None
    for pname, param in inspect.signature(fn).parameters.items():
        if pname == IDEMPOTENCY_PARAM:
            takes_key = True
            continue
        if pname == "ctx" or getattr(hints.get(pname), "__name__", None) == "NodeContext":
            context_param = pname
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.kind is param.POSITIONAL_ONLY:
            raise UserError(f"{where}: tool {tool_name}: parameter {pname!r} is positional-only; "
                            "tools receive arguments by name")
        if pname not in hints:
            raise UserError(f"{where}: tool {tool_name}: parameter {pname!r} has no type "
                            "hint; annotate it so the model knows what to send")
        default = ... if param.default is param.empty else param.default
        params[pname] = (hints[pname], default, param_docs.get(pname))
    if takes_key and not side_effects:
        raise UserError(f"{where}: tool {tool_name} takes an idempotency_key but is not "
                        "declared with side_effects=True; use @tool(side_effects=True)")
    validator, schema = arguments_schema(tool_name, params, where=where)
    return Tool(name=tool_name, description=description or summary or tool_name,
                parameters=schema, fn=fn, side_effects=side_effects, takes_key=takes_key,
                context_param=context_param, validator=validator, approval=approval)


def arguments_schema(tool_name: str, params: Mapping[str, tuple[Any, Any, str | None]], *,
                     where: str = "") -> tuple[pydantic.TypeAdapter[Any], dict[str, Any]]:
    """A validator and JSON schema for ``params`` (name -> (type, default or ``...``, doc))."""
    fields: dict[str, Any] = {}
    for index, (pname, (annotation, default, doc)) in enumerate(params.items()):
        # fields are named by position and aliased: a parameter may be called `json`,
        # `schema` or `_x`, which pydantic does not allow as field names
        fields[f"p{index}"] = (annotation, pydantic.Field(default, alias=pname,
                                                          description=doc))
    try:
        model = pydantic.create_model(f"{tool_name}_arguments",
                                      __config__=pydantic.ConfigDict(extra="forbid"),
                                      **fields)
        schema = model.model_json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError,
            TypeError) as exc:
        raise UserError(f"{where or 'tool'}: tool {tool_name}: its parameters have no JSON "
                        f"schema ({exc}); use JSON-compatible types or pydantic models"
                        ) from exc
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return pydantic.TypeAdapter(model), schema


def _check_name(name: str, hint: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UserError(f"tool name {name!r} must be 1-64 letters, digits, _ or -; {hint}")


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))  # noqa: B004


def _where(fn: Callable[..., Any]) -> str:
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        return getattr(fn, "__qualname__", None) or repr(fn)
    return f"{code.co_filename}:{code.co_firstlineno}"


_GOOGLE = re.compile(r"(?:Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments):")
_GOOGLE_PARAM = re.compile(r"\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)")
_SECTION = re.compile(r"(?:(?:Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments"
                      r"|Returns?|Yields?|Raises|Examples?|Notes?|Attributes|See Also"
                      r"|Warnings?|Todo):|:\w+[^:]*:.*)$")
"""A line that opens a Google section (``Returns:``) or a Sphinx field (``:param x:``)."""
_SPHINX_PARAM = re.compile(r":param\s+(?:[^:]*\s)?\*{0,2}(\w+)\s*:(.*)")


def _docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary paragraph and per-parameter descriptions (Google or Sphinx style)."""
    lines = doc.expandtabs().strip().splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()):
            break
        summary.append(line.strip())
    params: dict[str, str] = {}
    mode: str | None = None  # "google" inside an Args: section, "sphinx" after :param
    opened = 0  # indentation of the Args: header or of the :param line
    item: int | None = None  # indentation of a Google section's parameter lines
    current: str | None = None
    for line in lines:
        text = line.strip()
        indent = len(line) - len(line.lstrip())
        sphinx = _SPHINX_PARAM.match(text)
        if sphinx:
            mode, opened, current = "sphinx", indent, sphinx.group(1)
            params[current] = sphinx.group(2).strip()
        elif _GOOGLE.fullmatch(text):
            mode, opened, item, current = "google", indent, None, None
        elif not text:
            if mode == "sphinx":
                mode = current = None
        elif indent <= opened or text.startswith(":"):
            mode = current = None  # the next section or field
        elif mode == "google":
            if item is None:
                item = indent
            found = _GOOGLE_PARAM.fullmatch(text) if indent == item else None
            if found:
                current = found.group(1)
                params[current] = found.group(2).strip()
            elif indent > item and current is not None:
                params[current] = f"{params[current]} {text}".strip()
        elif mode == "sphinx" and current is not None:
            params[current] = f"{params[current]} {text}".strip()
    return " ".join(summary), params
