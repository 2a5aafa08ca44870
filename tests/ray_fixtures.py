"""A local Ray cluster (2 CPUs, no dashboard) and a Ray backend, once per session, for
every test that asks for one (tests/conftest.py makes them visible everywhere)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A local Ray cluster of 2 CPUs for the whole session; yields the ``ray`` module."""
    from counterpoint.ray.cluster import connect
    ray = connect(None, num_cpus=2)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def ray_backend(ray_cluster: Any) -> Iterator[Any]:
    from counterpoint.ray import RayBackend
    backend = RayBackend(actors=2)
    backend.start()
    yield backend
    backend.close()
