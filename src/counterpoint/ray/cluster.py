"""Connecting to a Ray cluster, or starting a local one, once per process.

Ray is imported here and in the modules next to this one only: the core never imports
this package, and ``counterpoint[ray]`` is an optional extra.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from typing import Any

from ..errors import ConfigError

_LOCK = threading.Lock()
PROBE_SECONDS = 3.0
"""How long :func:`connect` waits for a cluster address to accept a TCP connection (Ray
itself retries an unreachable address for minutes before it gives up)."""


def ray_module() -> Any:
    """The ``ray`` package, or a :class:`ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("the Ray backend needs Ray: pip install 'counterpoint[ray]'") from exc
    return ray


def connect(address: str | None = None, *, num_cpus: int | None = None) -> Any:
    """Connect this process to Ray (``address``: ``None`` starts a local cluster, ``auto``
    joins the one ``ray start`` runs on this machine, ``ray://host:10001`` a remote one;
    ``$RAY_ADDRESS``, when set, stands for a missing address, as it does for Ray) and
    return the ``ray`` module. Idempotent: a process already connected keeps its cluster.

    A local cluster's workers get this process's ``sys.path`` (as ``PYTHONPATH``), so a step
    defined in a module this process can import is importable in the workers too.
    """
    ray = ray_module()
    from_env = not address and bool(os.environ.get("RAY_ADDRESS"))
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is not None:
        try:
            check_address(address)
        except ConfigError as exc:
            if not from_env:
                raise
            raise ConfigError(f"{exc} (the address is $RAY_ADDRESS's: unset it to start a "
                              "local cluster)") from None
    with _LOCK:
        raylet_messages_to_stderr(ray)
        if ray.is_initialized():
            return ray
        # Ray's own start-up lines (INFO "Started a local Ray instance", the token
        # authentication WARNING) would mix with the command's output; its errors still show
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                   "ignore_reinit_error": True, "logging_level": logging.ERROR}
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


def raylet_messages_to_stderr(ray: Any) -> None:
    """Have the driver print the raylet's messages (``(raylet) A worker died ...``) on stderr.
    Ray prints them on stdout, where ``counterpoint run --json`` writes its JSON, which they
    broke; counterpoint reports a dead worker itself (``WorkerLost``). Idempotent; a Ray
    without the hook (``ray._private.worker.print_to_stdstream``) is left as it is."""
    module = getattr(getattr(ray, "_private", None), "worker", None)
    original = getattr(module, "print_to_stdstream", None)
    if original is None or getattr(original, "counterpoint_stderr", False):
        return

    def print_to_stdstream(data: dict[str, Any], ignore_prefix: bool) -> None:
        if data.get("pid") == "raylet":
            data = {**data, "is_err": True}
        original(data, ignore_prefix)

    print_to_stdstream.counterpoint_stderr = True  # type: ignore[attr-defined]
    module.print_to_stdstream = print_to_stdstream  # type: ignore[union-attr]


def check_address(address: str) -> None:
    """Raise :class:`ConfigError` unless ``address`` is ``auto`` or a ``HOST:PORT`` /
    ``ray://HOST:PORT`` that accepts a TCP connection within :data:`PROBE_SECONDS`."""
    if address == "auto":
        return
    where = address.removeprefix("ray://")
    host, _, port = where.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"Ray address {address!r} is not 'auto', HOST:PORT or "
                          "ray://HOST:PORT (e.g. 127.0.0.1:6379 or ray://head:10001)")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_SECONDS):
            pass
    except OSError as exc:
        raise ConfigError(f"cannot reach the Ray cluster at {address!r} "
                          f"({exc.strerror or type(exc).__name__}); start one with `ray start "
                          "--head`, check the address, or leave it out to start a local "
                          "cluster") from None
