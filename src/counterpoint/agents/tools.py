"""Tools: typed Python functions a model can call.

``@tool`` turns a function (sync or async) into a :class:`Tool` whose JSON schema
comes from its type hints and whose descriptions come from its docstring (the
first paragraph describes the tool; ``Args:`` or ``:param x:`` lines describe
the parameters). Arguments a model sends are validated against the hints
before the function runs; a sync function runs in a worker thread.

A tool that changes the world declares ``side_effects=True``. If its function
takes an ``idempotency_key`` parameter, counterpoint passes a key that is the
same for the same call in the same run, also after a crash and resume, so the
system it talks to can drop a repeated effect; and a side-effecting call whose
result is already in the run log is never made again.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, get_type_hints, overload

import pydantic

from ..errors import UserError
from ..models.types import ToolSpec

IDEMPOTENCY_PARAM = "idempotency_key"
_CONTEXT_PARAMS = frozenset({"ctx"})


class ToolError(Exception):
    """Raise inside a tool to give the model an error message instead of failing the node."""


@dataclass(frozen=True, kw_only=True)
class Tool:
    """A callable the model can use: a name, a description, an argument schema, a function."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments (an object)."""
    fn: Callable[..., Any] | None = field(repr=False, default=None)
    side_effects: bool = False
    """Whether calling it changes something outside the run (sent mail, wrote a row)."""
    takes_key: bool = False
    """Whether ``fn`` takes an ``idempotency_key`` argument."""
    validator: pydantic.TypeAdapter[Any] | None = field(repr=False, default=None)
    runner: Callable[[dict[str, Any]], Awaitable[Any]] | None = field(repr=False, default=None)
    """For tools that are not plain functions (agents, graphs): runs validated arguments."""

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description,
                        parameters=self.parameters)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments checked and converted by the type hints; raises ``ToolError``."""
        if self.validator is None:
            return dict(arguments)
        try:
            model = self.validator.validate_python(arguments)
        except pydantic.ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: "
                                 f"{e['msg']}" for e in exc.errors()[:8])
            raise ToolError(f"invalid arguments for {self.name}: {problems}") from None
        return {k: getattr(model, k) for k in type(model).model_fields}

    async def call(self, arguments: dict[str, Any], *, key: str | None = None) -> Any:
        """Validate ``arguments`` and run the tool. ``key`` is the idempotency key."""
        args = self.validate(arguments)
        if self.runner is not None:
            return await self.runner(args)
        assert self.fn is not None
        if self.takes_key:
            args[IDEMPOTENCY_PARAM] = key
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(**args)
        return await asyncio.to_thread(self.fn, **args)

    async def __call__(self, **arguments: Any) -> Any:
        return await self.call(arguments)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(*, name: str | None = None, description: str | None = None,
         side_effects: bool = False) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None,
         description: str | None = None,
         side_effects: bool = False) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` of a typed function: ``@tool`` or ``@tool(side_effects=True)``."""
    def make(function: Callable[..., Any]) -> Tool:
        return from_function(function, name=name, description=description,
                             side_effects=side_effects)
    return make(fn) if fn is not None else make


def from_function(fn: Callable[..., Any], *, name: str | None = None,
                  description: str | None = None, side_effects: bool = False) -> Tool:
    """The :class:`Tool` for ``fn`` (see the module docstring)."""
    tool_name = name or fn.__name__
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", tool_name):
        raise UserError(f"tool name {tool_name!r} must be 1-64 letters, digits, _ or -")
    where = _where(fn)
    summary, param_docs = _docstring(inspect.getdoc(fn) or "")
    try:
        hints = get_type_hints(fn)
    except (NameError, TypeError) as exc:
        raise UserError(f"{where}: tool {tool_name}: cannot resolve its type hints: {exc}"
                        ) from exc
    fields: dict[str, Any] = {}
    takes_key = False
    for pname, param in inspect.signature(fn).parameters.items():
        if pname == IDEMPOTENCY_PARAM:
            takes_key = True
            continue
        if pname in _CONTEXT_PARAMS or param.kind in (param.VAR_POSITIONAL,
                                                       param.VAR_KEYWORD):
            continue
        if pname not in hints:
            raise UserError(f"{where}: tool {tool_name}: parameter {pname!r} has no type "
                            "hint; annotate it so the model knows what to send")
        default = ... if param.default is param.empty else param.default
        fields[pname] = (hints[pname], pydantic.Field(default,
                                                      description=param_docs.get(pname)))
    if takes_key and not side_effects:
        raise UserError(f"{where}: tool {tool_name} takes an idempotency_key but is not "
                        "declared with side_effects=True")
    model = pydantic.create_model(f"{tool_name}_arguments", **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return Tool(name=tool_name, description=description or summary or tool_name,
                parameters=schema, fn=fn, side_effects=side_effects, takes_key=takes_key,
                validator=pydantic.TypeAdapter(model))


def _where(fn: Callable[..., Any]) -> str:
    code = getattr(fn, "__code__", None)
    if code is None:
        return getattr(fn, "__qualname__", repr(fn))
    return f"{code.co_filename}:{code.co_firstlineno}"


def _docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary paragraph and per-parameter descriptions (Google or Sphinx style)."""
    paragraphs = doc.strip().split("\n\n")
    summary = " ".join(paragraphs[0].split()) if paragraphs and paragraphs[0] else ""
    if summary.lower().startswith(("args:", "arguments:", "parameters:", ":param")):
        summary = ""
    params: dict[str, str] = {}
    for match in re.finditer(r":param\s+(\w+):\s*(.+)", doc):
        params[match.group(1)] = match.group(2).strip()
    section = re.search(r"(?:Args|Arguments|Parameters):\n((?:[ \t]+.+\n?)+)", doc)
    if section:
        for line in section.group(1).splitlines():
            found = re.match(r"\s+(\w+)(?:\s*\([^)]*\))?:\s*(.+)", line)
            if found:
                params[found.group(1)] = found.group(2).strip()
    return summary, params
