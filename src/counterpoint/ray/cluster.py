"""Connecting to a Ray cluster, or starting a local one, once per process.

Ray is imported here and in the modules next to this one only: the core never imports
this package, and ``counterpoint[ray]`` is an optional extra.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from ..errors import ConfigError

_LOCK = threading.Lock()


def ray_module() -> Any:
    """The ``ray`` package, or a :class:`ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("the Ray backend needs Ray: pip install 'counterpoint[ray]'") from exc
    return ray


def connect(address: str | None = None, *, num_cpus: int | None = None) -> Any:
    """Connect this process to Ray (``address``: ``None`` starts a local cluster, ``auto``
    joins the one ``ray start`` runs on this machine, ``ray://host:10001`` a remote one) and
    return the ``ray`` module. Idempotent: a process already connected keeps its cluster.

    A local cluster's workers get this process's ``sys.path`` (as ``PYTHONPATH``), so a step
    defined in a module this process can import is importable in the workers too.
    """
    ray = ray_module()
    with _LOCK:
        if ray.is_initialized():
            return ray
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                   "ignore_reinit_error": True}
        if address is None:
            options["num_cpus"] = num_cpus
            paths = [p for p in sys.path if p and os.path.isdir(p)]
            options["runtime_env"] = {"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}}
        try:
            ray.init(address=address, **options)
        except ConnectionError as exc:
            raise ConfigError(f"cannot connect to the Ray cluster at {address!r}: {exc}; start "
                              "one with `ray start --head`, or leave the address out to start "
                              "a local cluster") from exc
    return ray
