"""``counterpoint ui``: serve the web view over the run store on this machine.

The server (Starlette under uvicorn) is imported when the command runs, never by
``counterpoint --help``.
"""

from __future__ import annotations

import secrets
import signal
import webbrowser
from typing import Annotated

import typer

from ..errors import ConfigError
from ..exits import TERMINATED
from .args import Db
from .console import make_console, reported
from .stores import missing_file

UI_HELP = ("Serve a live web view of the runs in the store: runs list, each run's DAG, "
           "timeline and metrics, node details, cancel and resume.")


def ui_command(
    db: Db = None,
    host: Annotated[str, typer.Option(
        "--host", metavar="ADDRESS",
        help="Address to listen on; anything but loopback needs a token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(
        "--port", metavar="N", min=0, max=65535,
        help="Port to listen on (0: any free port; the URL printed says which).")] = 8321,
    token: Annotated[str | None, typer.Option(
        "--token", metavar="TEXT", envvar="COUNTERPOINT_UI_TOKEN",
        help="Token the page must present (generated when --host is not loopback and none "
             "is given; also read from $COUNTERPOINT_UI_TOKEN).")] = None,
    open_browser: Annotated[bool, typer.Option(
        "--open", help="Open the page in the default browser.")] = False,
) -> None:
    """Serve the web view; runs written by other processes show up as they happen."""
    from ..store import default_location, open_store
    from ..ui.app import is_loopback
    from ..ui.server import Server
    out = make_console()
    with reported():
        if token is None and not is_loopback(host):
            token = secrets.token_urlsafe(24)
        location = db or default_location()
        if location in ("memory", ":memory:"):
            raise ConfigError("counterpoint ui needs a store that other processes write (--db "
                              "PATH or a postgresql:// URL): an in-memory store holds no "
                              "runs of other processes")
        missing = missing_file(location)
        store = open_store(location)  # first: a path no run could create is refused here
        if missing:
            out.print(f"no store at {location} yet: the page fills in once a run writes it",
                      soft_wrap=True)
        try:
            server = Server(store, host=host, port=port, token=token)
        except BaseException:
            store.close()
            raise
    out.print(f"counterpoint ui: {server.url}  (store {store.location}; Ctrl-C stops)",
              soft_wrap=True)
    if host.strip("[]") in ("0.0.0.0", "::"):  # every address: say the one to use elsewhere
        import socket
        from urllib.parse import urlsplit
        there = urlsplit(server.url)._replace(netloc=f"{socket.gethostname()}:{server.port}")
        out.print(f"  from other machines: {there.geturl()}", soft_wrap=True)
    if open_browser:
        webbrowser.open(server.url)
    signal.signal(signal.SIGTERM, _terminated)  # uvicorn raises it again once it stopped
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    except _Terminated:
        raise typer.Exit(TERMINATED) from None
    finally:
        store.close()


class _Terminated(Exception):
    """SIGTERM (``kill``, ``docker stop``) ended the server: the store is closed, then the
    command exits 143. Without a handler the process died of the signal uvicorn raised
    again after its shutdown, the store left open (SQLite's -wal and -shm files stayed)."""


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated
