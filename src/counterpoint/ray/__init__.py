"""Running on Ray (``pip install 'counterpoint[ray]'``): :class:`RayBackend` runs a run's
nodes in Ray workers; :func:`run_many` places whole runs on Ray actors (sharded mode).

Nothing here imports Ray until it is used.
"""

from __future__ import annotations

from .backend import RayBackend
from .shards import Progress, RunSummary, ShardPool, run_many

__all__ = ["Progress", "RayBackend", "RunSummary", "ShardPool", "run_many"]
