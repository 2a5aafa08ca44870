"""What the MCP tests share beside their fixtures (conftest.py): a module of its own name,
since ``from conftest import ...`` finds whichever conftest was imported last when several
test folders run in one session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SERVER = str(FIXTURES / "mcp_server.py")
STDIO = [sys.executable, SERVER, "stdio"]
"""The command that starts the fixture server on stdio."""


def alive(pid: int) -> bool:
    """Whether process ``pid`` still exists (and is not a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
