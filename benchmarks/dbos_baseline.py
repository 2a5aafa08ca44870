"""DBOS Transact on the PostgreSQL benchmark's shapes (W1 chain, W3 diamonds), as an
optional baseline: each node is a durable DBOS step of a DBOS workflow, checkpointed in
DBOS's system database (SQLite or PostgreSQL).

``dbos`` is not a dependency of counterpoint: install it into the environment to compare
(``pip install dbos``); without it :func:`unavailable` says why and nothing runs.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import time
from typing import Any

__all__ = ["run_dbos", "unavailable"]


def unavailable() -> str | None:
    """Why DBOS cannot be compared here, or ``None`` if it can."""
    if importlib.util.find_spec("dbos") is None:
        return "dbos is not importable (pip install dbos to compare)"
    return None


_registered: dict[str, Any] = {}


def _workflows() -> dict[str, Any]:
    """The W1 and W3 workflows, registered with DBOS once per process (DBOS keeps a
    process-wide registry, which outlives ``DBOS.destroy``)."""
    if _registered:
        return _registered
    from dbos import DBOS

    @DBOS.step()
    async def node(*inputs: int) -> int:
        return len(inputs) + 1  # the output of the benchmark's trivial node

    @DBOS.workflow()
    async def chain(n: int) -> int:
        value = await node()
        for _ in range(n - 1):
            value = await node(value)
        return value

    @DBOS.workflow()
    async def diamond() -> int:
        a = await node()
        b, c, d = await asyncio.gather(node(a), node(a), node(a))
        return await node(b, c, d)

    _registered.update(chain=chain, diamond=diamond)
    return _registered


def run_dbos(database_url: str, *, chain: int | None = None,
             diamonds: int | None = None) -> float:
    """Wall seconds of one W1 chain of ``chain`` steps, or of ``diamonds`` concurrent W3
    workflows, on a DBOS whose system database is ``database_url`` (``sqlite:///FILE``
    or ``postgresql://...``); DBOS is launched before the clock starts and destroyed
    after. Raises ``AssertionError`` if a workflow returns a wrong result."""
    from dbos import DBOS

    logging.getLogger("dbos").setLevel(logging.WARNING)
    flows = _workflows()
    DBOS(config={"name": "counterpoint-bench", "system_database_url": database_url,
                 "log_level": "WARNING"})
    DBOS.launch()
    try:
        return asyncio.run(_timed(flows, chain, diamonds))
    finally:
        DBOS.destroy(destroy_registry=False)


async def _timed(flows: dict[str, Any], chain: int | None, diamonds: int | None) -> float:
    from dbos import DBOS

    began = time.perf_counter()
    if chain is not None:
        result = await flows["chain"](chain)
        if result != 2:
            raise AssertionError(f"DBOS W1: chain returned {result}, not 2")
    else:
        assert diamonds is not None
        handles = [await DBOS.start_workflow_async(flows["diamond"]) for _ in range(diamonds)]
        results = await asyncio.gather(*(h.get_result() for h in handles))
        if set(results) != {4}:
            raise AssertionError(f"DBOS W3: diamonds returned {set(results)}, not {{4}}")
    return time.perf_counter() - began
