"""``counterpoint mcp``: serve counterpoint over MCP (stdio, or streamable HTTP).

The tools are :mod:`counterpoint.mcp.server`'s. Over stdio (the default) an MCP client
starts the command itself; ``--http PORT`` serves ``http://127.0.0.1:PORT/mcp`` for
clients on this machine only.
"""

from __future__ import annotations

import importlib.util
from typing import Annotated

import typer

from ..errors import UserError
from .args import Db
from .console import reported

MCP_HELP = "Serve counterpoint as an MCP server: start, follow, show, list and cancel runs."


def mcp_command(
    db: Db = None,
    http: Annotated[int | None, typer.Option(
        "--http", metavar="PORT", min=1, max=65535,
        help="Serve streamable HTTP on 127.0.0.1:PORT (at /mcp) instead of stdio.")] = None,
    model: Annotated[str | None, typer.Option(
        "--model", metavar="MODEL",
        help="The default model of the workflows and goals it starts.")] = None,
) -> None:
    """Serve counterpoint over MCP until the client disconnects (stdio) or Ctrl-C."""
    with reported():
        if importlib.util.find_spec("mcp") is None:
            raise UserError("counterpoint mcp needs the MCP SDK: pip install "
                            "'counterpoint[mcp]'")
        import anyio

        from ..mcp.server import build_server
        from ..store import default_location, open_store
        from .stores import check_writable
        if http is not None:
            _check_port(http)
        check_writable(db)  # it starts, cancels and answers runs: refused before serving
        store = open_store(db or default_location())
        try:
            server = build_server(store, model=model)
            if http is None:
                anyio.run(server.run_stdio_async)
            else:
                anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1",
                                                                   port=http))
        except KeyboardInterrupt:
            pass  # runs it still ran stopped where they were: resumable
        finally:
            store.close()


def _check_port(port: int) -> None:
    """Refuse a port something already listens on (the HTTP server would log an error
    and exit with code 3, which is the CLI's "waiting for approvals")."""
    import errno
    import socket
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            why = "something else listens on it" if exc.errno == errno.EADDRINUSE \
                else exc.strerror or str(exc)
            raise UserError(f"counterpoint mcp --http {port}: cannot serve on "
                            f"127.0.0.1:{port} ({why}); pick another port") from None
