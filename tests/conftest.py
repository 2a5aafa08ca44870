"""Shared fixtures: every store implementation, a clean working directory, a local model
server, and a local Ray cluster (tests/ray_fixtures.py, started once when a test asks)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray_fixtures import ray_backend, ray_cluster
from support import free_port, smollm2_gguf

from counterpoint.store import MemoryStore, RunStore, SQLiteStore
from counterpoint.testing.postgres import PostgresServer

__all__ = ["ray_backend", "ray_cluster"]  # fixtures found by name, for every test folder

LLAMA_SERVER_START_TIMEOUT = 60.0


@pytest.fixture(autouse=True)
def _fresh_health() -> Iterator[None]:
    """Each test starts with every model and tool healthy: the process-wide breakers
    (counterpoint.health) would otherwise carry one test's failures into the next."""
    from counterpoint.health import health
    health().reset()
    yield
    health().reset()


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    """Each store implementation in turn (the conformance suite runs on all of them)."""
    the_store: RunStore = MemoryStore() if request.param == "memory" \
        else SQLiteStore(tmp_path / "runs.db")
    yield the_store
    the_store.close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteStore]:
    the_store = SQLiteStore(tmp_path / "runs.db")
    yield the_store
    the_store.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the session (fails, never skips, without the
    binaries), with its password in ``PGPASSWORD``."""
    with PostgresServer(settings={"fsync": "off"}) as server, \
            pytest.MonkeyPatch.context() as env:
        for key, value in server.env.items():
            env.setenv(key, value)
        yield server


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server on SmolLM2-135M; yields its base URL.

    The URL is ``http://127.0.0.1:PORT/v1`` and the model is served as ``smollm2``. A
    missing ``llama_cpp`` or model package fails the test loudly (never a skip: CI must
    run these tests), and so does a server that dies or is not up within 60 s; the
    failure shows the server's log.
    """
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama-cpp-python is not installed; the llama_server fixture needs "
                    "`pip install 'llama-cpp-python[server]==0.3.36'`", pytrace=False)
    model = smollm2_gguf()
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
             "--model_alias", "smollm2", "--host", "127.0.0.1", "--port", str(port),
             "--n_ctx", "2048", "--n_threads", "2"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_serving(process, f"{base_url}/models", log_path)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_serving(process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    deadline = time.monotonic() + LLAMA_SERVER_START_TIMEOUT
    while True:
        if process.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with code {process.returncode} before "
                        f"serving:\n{_tail(log_path)}", pytrace=False)
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"llama_cpp.server did not answer {url} within "
                        f"{LLAMA_SERVER_START_TIMEOUT:.0f} s:\n{_tail(log_path)}",
                        pytrace=False)
        time.sleep(0.2)


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
