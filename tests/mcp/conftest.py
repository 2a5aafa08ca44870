"""Real MCP server processes for the tests: the fixture server over stdio and over
streamable HTTP on 127.0.0.1 (tests/fixtures/mcp_server.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from mcp_support import SERVER
from support import free_port

START_SECONDS = 60.0


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="session")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The fixture server on streamable HTTP; yields its ``/mcp`` URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("mcp-http") / "server.log"
    with log.open("w") as out:
        process = subprocess.Popen([sys.executable, SERVER, "http", str(port)],
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_SECONDS
        while not _accepts(port):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the HTTP MCP fixture server did not start:\n{log.read_text()}",
                            pytrace=False)
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
