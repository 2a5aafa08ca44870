"""An MCP server's tools as counterpoint tools: :func:`mcp_tools` and :class:`MCPTools`.

An :class:`MCPTools` is a :class:`~counterpoint.agents.tools.Toolset`: an agent given
one asks it for its tools when its loop starts, and calls them through the same path
as every other tool, so each call is a ``tool_call`` event (durable before a side
effect), its answer a ``tool_result`` event, and a resumed node gets recorded results
back instead of calling the server again.

Where the server runs:

- inside a run, it is started at the first use and kept for the whole run, shared
  by every node and agent that uses the same :class:`MCPTools`; the run stops it when
  it ends, however it ends (:mod:`counterpoint.resources`);
- outside a run, inside ``async with tools:``, it runs for the block;
- otherwise (an agent run directly, outside both), each listing and each call starts
  the server for itself and stops it after.

A tool's arguments schema is the server's ``inputSchema``; the server validates the
arguments. An error result (``isError``), a timed-out call and a refused call reach the
model as the tool's error text (a :class:`~counterpoint.ToolError`), which it can read
and act on. A tool is taken as side-effecting unless the server marks it read-only
(``readOnlyHint``) or it is named in ``read_only=``; for a side-effecting tool, the
idempotency key of the call is sent in the request's ``_meta``
(``counterpoint/idempotency_key``) so a server can drop a repeated effect.
"""

from __future__ import annotations

import contextlib
import re
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..agents.tools import Tool
from ..context import current_context
from ..errors import MCPServerError, ToolError, UserError
from ..resources import Resources, ResourcesClosed
from .client import Connection, ServerConfig, connect

if TYPE_CHECKING:
    from types import TracebackType

    from ..context import NodeContext

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
"""What providers do not accept in a tool name (MCP allows dots and slashes)."""

KEY_META = "counterpoint/idempotency_key"
"""Where a side-effecting call's idempotency key goes in the request's ``_meta``."""

RESULT_CHARS = 100_000
"""Most characters of a tool result given to the model (the rest is cut, and said so)."""


def mcp_tools(*, command: Sequence[str] | None = None, url: str | None = None,
              name: str | None = None, include: Iterable[str] | None = None,
              exclude: Iterable[str] = (), prefix: str = "",
              read_only: Iterable[str] = (), env: Mapping[str, str] | None = None,
              cwd: str | None = None, start_timeout: float = 30.0,
              call_timeout: float | None = 60.0,
              approval: bool | Iterable[str] = False) -> MCPTools:
    """The tools of one MCP server, for ``Agent(tools=[...])``.

    Give ``command=[program, *args]`` (a server started as a child process, spoken to
    over stdio) or ``url=`` (a streamable HTTP endpoint). ``include`` keeps only the
    named tools (each must exist), ``exclude`` drops some, ``prefix`` goes before every
    name (two servers with a ``search`` tool). ``read_only`` names tools without side
    effects the server does not mark so. ``start_timeout`` bounds the start and the
    listing, ``call_timeout`` each call. ``approval`` makes an agent ask a person before
    a call (see ``@tool(approval=...)``): ``True`` for every tool with side effects, or
    the (remote) names of the tools that need it.
    """
    if command is not None and (isinstance(command, str) or not all(
            isinstance(part, str) and part for part in command)):
        raise UserError(f"mcp_tools: command must be a list of non-empty strings "
                        f"(program and arguments), got {command!r}")
    label = name or (command[0].rsplit("/", 1)[-1] if command else None) or url or "mcp"
    config = ServerConfig(name=label, command=tuple(command or ()), url=url,
                          env=dict(env or {}), cwd=cwd, start_timeout=start_timeout,
                          call_timeout=call_timeout)
    return MCPTools(config=config, include=tuple(include) if include is not None else None,
                    exclude=frozenset(exclude), prefix=prefix, read_only=frozenset(read_only),
                    approval=approval if isinstance(approval, bool) else frozenset(approval))


@dataclass(eq=False, kw_only=True)
class MCPTools:
    """One MCP server's tools (see the module docstring); make one with :func:`mcp_tools`.

    Hashable by identity: one object is one server per run, however many agents use it.
    """

    config: ServerConfig
    include: tuple[str, ...] | None = None
    exclude: frozenset[str] = frozenset()
    prefix: str = ""
    read_only: frozenset[str] = frozenset()
    approval: bool | frozenset[str] = False
    """Tools an agent asks a person about before calling: all side-effecting ones
    (``True``) or these remote names."""
    _own: Resources | None = field(default=None, init=False, repr=False)
    _broken: weakref.WeakKeyDictionary[Resources, int] = field(
        default_factory=weakref.WeakKeyDictionary, init=False, repr=False)
    """Per holder (a run's resources, or the block's): how many of its connections broke;
    the next use opens a new one under the next key (the dead one closes with the rest)."""

    @property
    def name(self) -> str:
        """The server's name (``name=``, else its program or URL)."""
        return self.config.name

    # ------------------------------------------------------------- lifetime
    async def __aenter__(self) -> MCPTools:
        """Keep the server running until the block ends (outside a run)."""
        if self._own is not None:
            raise UserError(f"{self.config.describe()}: already entered; use one "
                            "`async with` block at a time")
        self._own = Resources()
        try:
            await self._own.get((self, 0), self._opener)  # as connection() keys it
        except BaseException:
            await self._own.close()
            self._own = None
            raise
        return self

    async def __aexit__(self, kind: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        own, self._own = self._own, None
        if own is not None:
            await own.close()

    def _opener(self) -> contextlib.AbstractAsyncContextManager[Connection]:
        return connect(self.config)

    @contextlib.asynccontextmanager
    async def connection(self, ctx: NodeContext | None = None) -> AsyncIterator[Connection]:
        """The open connection to use now: the run's, the ``async with`` block's, or one
        started for this use alone (and stopped after it)."""
        ctx = ctx if ctx is not None else current_context()
        held = ctx.resources if ctx is not None else None
        held = held if held is not None else self._own
        if held is not None:
            broken = self._broken.get(held, 0)
            try:
                conn = await held.get((self, broken), self._opener)
            except ResourcesClosed:
                conn = None  # the run is ending; a use after that gets a server of its own
            if conn is not None:
                try:
                    yield conn
                except MCPServerError:  # it stopped answering: the next use starts anew
                    if self._broken.get(held, 0) == broken:
                        self._broken[held] = broken + 1
                    raise
                return
        async with connect(self.config) as conn:
            yield conn

    # ---------------------------------------------------------------- tools
    async def resolve_tools(self, ctx: NodeContext | None) -> Sequence[Tool]:
        """The server's tools as :class:`Tool` objects, filtered and prefixed."""
        async with self.connection(ctx) as conn:
            listed = {t.name: t for t in conn.tools}
        if self.include is not None:
            missing = [n for n in self.include if n not in listed]
            if missing:
                raise MCPServerError(f"{self.config.describe()} has no tool(s) {missing}; "
                                     f"it has {sorted(listed)}; fix include=",
                                     retryable=False)
            chosen = [listed[n] for n in self.include]
        else:
            chosen = list(listed.values())
        tools = [self._tool(t) for t in chosen if t.name not in self.exclude]
        remote: dict[str, str] = {}
        for listed_tool, tool in zip((t for t in chosen if t.name not in self.exclude), tools,
                                     strict=True):
            other = remote.setdefault(tool.name, str(listed_tool.name))
            if other != listed_tool.name:
                raise MCPServerError(
                    f"{self.config.describe()}: its tools {other!r} and "
                    f"{listed_tool.name!r} both become {tool.name!r} (a tool's name may hold "
                    "only letters, digits, _ and -); exclude= one of them",
                    retryable=False)
        return tools

    def _tool(self, listed: Any) -> Tool:
        remote = str(listed.name)
        annotations = getattr(listed, "annotations", None)
        read_only = remote in self.read_only or bool(
            getattr(annotations, "read_only_hint", False))
        schema = _schema(listed.input_schema)
        config = self.config

        async def call(idempotency_key: str | None = None, **arguments: Any) -> str:
            meta = {KEY_META: idempotency_key} if idempotency_key is not None else None
            async with self.connection() as conn:
                try:
                    result = await conn.client.call_tool(remote, arguments, meta=meta)
                except TimeoutError:
                    raise ToolError(f"{config.describe()}: tool {remote} did not answer "
                                    f"within {config.call_timeout:g}s") from None
                except Exception as exc:
                    raise _call_failed(config, remote, exc, conn) from exc
            text = _text(result)
            if result.is_error:
                raise ToolError(f"{config.describe()}: tool {remote} failed: {text}")
            return text

        takes_key = not read_only and "idempotency_key" not in schema.get("properties", {})
        description = str(listed.description or getattr(listed, "title", None) or remote)
        return Tool(name=_UNSAFE.sub("_", f"{self.prefix}{remote}")[:64],
                    description=description,
                    parameters=schema, fn=call, side_effects=not read_only,
                    takes_key=takes_key,
                    approval=self._asks(remote, read_only))

    def _asks(self, remote: str, read_only: bool) -> bool:
        if isinstance(self.approval, bool):
            return self.approval and not read_only
        return remote in self.approval


def _schema(input_schema: Any) -> dict[str, Any]:
    schema = dict(input_schema or {})
    schema.pop("title", None)
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    props = schema.get("properties")
    if isinstance(props, dict):
        schema["properties"] = {k: {a: b for a, b in v.items() if a != "title"}
                                if isinstance(v, dict) else v for k, v in props.items()}
    return schema


def _call_failed(config: ServerConfig, tool: str, exc: Exception,
                 conn: Connection) -> Exception:
    """A call the protocol refused (an MCP error) is the model's to read; a broken
    connection is the node's failure, retried with a fresh server."""
    from mcp import MCPError
    from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT
    tail = conn.stderr_tail()
    said = f"; its stderr ends with:\n{tail}" if tail else ""
    code = exc.code if isinstance(exc, MCPError) else None
    if code == REQUEST_TIMEOUT:
        return ToolError(f"{config.describe()}: tool {tool} did not answer within "
                         f"{config.call_timeout:g}s (call_timeout); raise call_timeout if "
                         "it needs longer")
    if code == CONNECTION_CLOSED:  # the server exited or crashed in the middle of the call
        return MCPServerError(f"{config.describe()} closed the connection while tool {tool} "
                              f"ran (did it crash or exit?){said}")
    if isinstance(exc, MCPError):
        return ToolError(f"{config.describe()}: tool {tool} was refused: {exc}")
    return MCPServerError(f"{config.describe()}: calling tool {tool} failed: "
                          f"{type(exc).__name__}: {exc}{said}")


def _text(result: Any) -> str:
    """A tool result as the text a model reads: its text blocks, and a word for others."""
    parts: list[str] = []
    for block in result.content or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(block.text))
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {getattr(block, 'mime_type', '')}]")
        elif kind == "resource":
            inner = block.resource
            parts.append(str(getattr(inner, "text", None) or f"[resource: {inner.uri}]"))
        elif kind == "resource_link":
            parts.append(f"[resource: {block.uri}]")
        else:
            parts.append(f"[{kind or type(block).__name__}]")
    if not parts and result.structured_content is not None:
        from .. import codec
        parts.append(codec.encode(result.structured_content))
    text = "\n".join(parts)
    if len(text) > RESULT_CHARS:
        text = f"{text[:RESULT_CHARS]}\n[cut: {len(text) - RESULT_CHARS} more characters]"
    return text
