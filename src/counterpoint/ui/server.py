"""Serving the web view: a listening socket and uvicorn, in the foreground (the command)
or in a background thread (tests, benchmarks, a notebook)."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import threading
import time
from pathlib import Path

import uvicorn

from ..errors import ConfigError
from ..store import RunStore, is_file_location
from .app import create_app, is_loopback

START_SECONDS = 10.0
"""How long :meth:`Server.start` waits for the server to listen."""


class Server:
    """The web view over ``store``, listening on ``host:port`` once constructed (port 0
    picks a free one; :attr:`url` names the one taken, with the token if there is one).

    The store stays the caller's to close.
    """

    def __init__(self, store: RunStore, *, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, cwd: Path | None = None) -> None:
        if token is None and not is_loopback(host):
            raise ConfigError(f"serving the web view on {host} (not loopback) needs a token: "
                              "pass --token, or let `counterpoint ui` generate one")
        bare = host.strip("[]")
        family = socket.AF_INET6 if ":" in bare else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.socket.bind((bare, port))
        except OSError as exc:
            self.socket.close()
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}; "
                              f"{_bind_hint(exc, host, port, store.location)}") from None
        self.socket.listen(128)  # connections made before uvicorn runs wait in the backlog
        self.port: int = self.socket.getsockname()[1]
        shown = f"[{bare}]" if family == socket.AF_INET6 else bare
        self.url = f"http://{shown}:{self.port}/" + (f"?token={token}" if token else "")
        """The page's address, with ``?token=`` when the server has one."""
        self.base = f"http://{shown}:{self.port}"
        """The server's address, without a path or a token."""
        closing = asyncio.Event()
        self.app = create_app(store, token=token, cwd=cwd, closing=closing)
        self._server = _Uvicorn(uvicorn.Config(self.app, log_level="warning",
                                               lifespan="off"), closing)
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        """Serve until interrupted (Ctrl-C) or :meth:`stop`."""
        # uvicorn's own run() made the coroutine before it picked its event loop: a Ctrl-C
        # in between left it never awaited, and Python said so on stderr at exit
        loop_factory = self._server.config.get_loop_factory()
        serving = self._server.serve(sockets=[self.socket])
        try:
            with asyncio.Runner(loop_factory=loop_factory) as runner:
                runner.run(serving)
        finally:
            serving.close()  # nothing when it ran; quiet when an interrupt came first

    def start(self) -> Server:
        """Serve in a daemon thread; returns once the server accepts connections."""
        self._thread = threading.Thread(target=self.run, name="counterpoint-ui", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_SECONDS
        while not self._server.started:  # uvicorn says so only through this flag
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(f"the web view on {self.base} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving (open event streams are closed) and wait for the thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.socket.close()


class _Uvicorn(uvicorn.Server):
    """uvicorn, ending the web view's event streams as it shuts down (Ctrl-C,
    :meth:`Server.stop`): it waits for every response to end, and a stream that follows
    runs never does, so one Ctrl-C left it waiting for ever."""

    def __init__(self, config: uvicorn.Config, closing: asyncio.Event) -> None:
        super().__init__(config)
        self.closing = closing

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.closing.set()
        await super().shutdown(sockets)


def _bind_hint(exc: OSError, host: str, port: int, location: str) -> str:
    """What to do when the listening socket cannot be bound: the port is taken (by
    another web view, perhaps of this very store), the host is not this machine's, or the
    port is a privileged one."""
    if exc.errno == errno.EADDRINUSE:
        other = "pick another --port (0 picks a free one)"
        serving = _web_view_at(host, port)
        if serving is None:
            return other
        url = f"http://{host}:{port}/"
        if serving and _same_store(serving, location):
            return (f"`counterpoint ui` already serves this store there: open {url}, or "
                    f"{other} to serve it twice")
        if serving == "":
            return f"another `counterpoint ui` (with a token) listens there; {other}"
        return f"another `counterpoint ui` serves store {serving} there ({url}); {other}"
    if exc.errno == errno.EACCES and 0 < port < 1024:
        return f"port {port} needs privileges; pick one above 1023 (0 picks a free one)"
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return (f"--host {host} is not an address of this machine; give one of its "
                "addresses, 127.0.0.1 (the default) or 0.0.0.0 for all of them")
    return "check --host and --port"


def _same_store(a: str, b: str) -> bool:
    return a == b or (is_file_location(a) and is_file_location(b) and
                      os.path.realpath(a) == os.path.realpath(b))


PROBE_SECONDS = 1.0
"""How long asking a taken port whether a web view listens there may take."""


def _web_view_at(host: str, port: int) -> str | None:
    """The store the web view listening on loopback ``host:port`` serves (``""``: one
    that needs a token, which does not say), or ``None`` when what listens there is not
    a web view (or it is not on loopback: nothing beyond this machine is asked)."""
    import json
    import urllib.error
    import urllib.request
    bare = host.strip("[]")
    if bare in ("0.0.0.0", "::"):
        bare = "127.0.0.1" if bare == "0.0.0.0" else "::1"
    if not is_loopback(bare):
        return None
    shown = f"[{bare}]" if ":" in bare else bare
    try:
        with urllib.request.urlopen(f"http://{shown}:{port}/api/runs?limit=1",
                                    timeout=PROBE_SECONDS) as answer:
            store = json.loads(answer.read()).get("store")
            return store if isinstance(store, str) else None
    except urllib.error.HTTPError as refused:
        try:
            said = json.loads(refused.read()).get("error", "")
        except ValueError:
            return None
        return "" if refused.code == 401 and "counterpoint ui" in said else None
    except (OSError, ValueError):
        return None
