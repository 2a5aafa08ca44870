"""Typed identities used across the runtime."""

from __future__ import annotations

import os
import time
from typing import NewType

RunId = NewType("RunId", str)
"""Identifies one run in a store, e.g. ``r-20261129-235959-3f9a1c``."""

NodeId = NewType("NodeId", str)
"""Identifies a node within a run's graph; stable across resumes."""


def new_run_id() -> RunId:
    """A fresh run id: sortable by creation time, unique across processes."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return RunId(f"r-{stamp}-{os.urandom(6).hex()}")
