"""Whether the process that owns a run is still alive."""

from __future__ import annotations

import os
import socket

from ..store import RunRecord


def owner_alive(record: RunRecord) -> bool:
    """Whether the process that last ran ``record`` still runs.

    A run owned by another host is assumed alive: its process cannot be checked from here.
    """
    if record.owner_host and record.owner_host != socket.gethostname():
        return True
    return process_alive(record.owner_pid)


def process_alive(pid: int | None) -> bool:
    """Whether a process with this id exists on this host."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
