"""Connecting to one MCP server, over stdio or streamable HTTP, through the official SDK.

:class:`ServerConfig` says how to reach a server (a command to start, or a URL);
:func:`connect` is the async context manager that starts it (for a command), opens the
session, lists its tools, and on exit closes the session and stops the process (the
SDK closes its stdin, waits, then kills its process tree). Everything that goes wrong
while starting is a :class:`~counterpoint.errors.MCPServerError` naming the server
and the cause, with the tail of the server's stderr when it wrote any.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from typing import TextIO

import anyio

from ..errors import MCPServerError, UserError

STDERR_TAIL = 1500
"""Characters of a server's stderr an error message quotes (its end)."""


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """How to reach one MCP server: exactly one of ``command`` and ``url``."""

    name: str
    """What errors and events call the server."""
    command: tuple[str, ...] = ()
    """The program and its arguments, started as a child process speaking MCP on stdio."""
    url: str | None = None
    """A streamable HTTP endpoint (``http://127.0.0.1:8000/mcp``)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables for the command (over a minimal inherited set)."""
    cwd: str | None = None
    """The command's working directory (default: the current one)."""
    start_timeout: float = 30.0
    """Seconds for the server to start and list its tools."""
    call_timeout: float | None = 60.0
    """Seconds one tool call may take (``None``: no bound)."""

    def __post_init__(self) -> None:
        if bool(self.command) == (self.url is not None):
            raise UserError(f"MCP server {self.name!r}: give exactly one of command=[...] "
                            "(a server to start) and url='http://.../mcp' (one running)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise UserError(f"MCP server {self.name!r}: url {self.url!r} is not an http(s) "
                            "URL; give the server's streamable HTTP endpoint")
        for option, value in (("start_timeout", self.start_timeout),
                              ("call_timeout", self.call_timeout)):
            if value is not None and not value > 0:
                raise UserError(f"MCP server {self.name!r}: {option} must be > 0, "
                                f"got {value!r}")

    def describe(self) -> str:
        """The server as errors show it: its name and how it is reached."""
        how = self.url if self.url is not None else " ".join(self.command)
        return f"MCP server {self.name!r} ({how})"


@dataclass(frozen=True, kw_only=True)
class Connection:
    """An open session with a server and the tools it listed when it was opened."""

    config: ServerConfig
    client: Any = field(repr=False)
    """The SDK's ``mcp.Client``, entered."""
    tools: tuple[Any, ...]
    """The server's tools (``mcp.types.Tool``), in the order it listed them."""
    stderr: IO[str] | None = field(repr=False, default=None)

    def stderr_tail(self) -> str:
        """The end of what the server wrote to stderr so far (stdio servers only)."""
        return _tail(self.stderr)


@asynccontextmanager
async def connect(config: ServerConfig) -> AsyncIterator[Connection]:
    """Start (for a command) and open ``config``'s server; stop it on exit.

    Raises :class:`MCPServerError` if the command cannot be found, the server exits
    or fails before it answers, or it does not list its tools within
    ``config.start_timeout`` seconds.
    """
    from mcp import Client  # the SDK is an optional extra, loaded when a server is used
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as stderr:
        client = Client(_transport(config, stderr), mode="auto",
                        read_timeout_seconds=config.call_timeout)
        started = False
        # one anyio scope around the whole session, its deadline lifted once the server
        # listed its tools: the SDK's scopes nest inside it, and the SDK shields its
        # shutdown of the process from anyio cancellation (a task.cancel() could break it)
        with anyio.CancelScope(deadline=anyio.current_time() + config.start_timeout) as scope:
            try:
                async with client:
                    tools = await _list_tools(client)
                    started = True
                    scope.deadline = math.inf
                    yield Connection(config=config, client=client, tools=tuple(tools),
                                     stderr=stderr if config.command else None)
            except Exception as exc:
                if started:
                    raise
                hint = "" if config.command else (f"; check that the server runs and "
                                                  f"serves MCP at {config.url}")
                raise MCPServerError(f"{config.describe()} failed to start: {_cause(exc)}"
                                     f"{_said(config, stderr)}{hint}") from exc
        if scope.cancelled_caught and not started:
            raise MCPServerError(f"{config.describe()} did not answer within "
                                 f"{config.start_timeout:g}s{_said(config, stderr)}; check "
                                 "that it speaks MCP, or raise start_timeout")


def _transport(config: ServerConfig, stderr: IO[str]) -> Any:
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    if config.url is not None:
        return streamable_http_client(config.url)
    program, *args = config.command
    found = shutil.which(program, path=os.environ.get("PATH"))
    if found is None and os.sep not in program:
        raise MCPServerError(f"{config.describe()}: command {program!r} not found on PATH; "
                             "install it or give its full path")
    command, args = _dies_with_us(found or program, args)
    return stdio_client(StdioServerParameters(command=command, args=args,
                                              env=dict(config.env) or None, cwd=config.cwd),
                        errlog=cast("TextIO", stderr))


_ORPHAN_GUARD = ("import ctypes, os, signal, sys; "
                 "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL); "
                 "os.getppid() == int(sys.argv[1]) or os._exit(70); "
                 "os.execvp(sys.argv[2], sys.argv[2:])")
"""Run as ``python -c``: ask Linux to kill this process when its parent dies
(``PR_SET_PDEATHSIG``, kept across ``exec``), unless it died already, then become the
server."""


def _dies_with_us(program: str, args: list[str]) -> tuple[str, list[str]]:
    """The command that starts ``program`` so that it is killed if this process is (a
    SIGKILLed run cannot stop its servers, and one busy in a call would not notice its
    stdin close). Linux only; elsewhere the server is started as it is."""
    import sys
    if not sys.platform.startswith("linux"):
        return program, args
    return sys.executable, ["-c", _ORPHAN_GUARD, str(os.getpid()), program, *args]


async def _list_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # a server whose pages never end cannot hang the run
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _cause(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    if isinstance(exc, FileNotFoundError | PermissionError):
        return f"cannot run it ({exc.strerror}: {exc.filename})"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _tail(stderr: IO[str] | None) -> str:
    if stderr is None:
        return ""
    try:
        stderr.flush()
        end = stderr.seek(0, os.SEEK_END)
        stderr.seek(max(0, end - STDERR_TAIL * 4))
        text = stderr.read()
        stderr.seek(0, os.SEEK_END)
    except (OSError, ValueError):
        return ""
    return text.strip()[-STDERR_TAIL:]


def _said(config: ServerConfig, stderr: IO[str]) -> str:
    if not config.command:
        return ""
    tail = _tail(stderr)
    return f"; its stderr ends with:\n{tail}" if tail else " (it wrote nothing to stderr)"
