"""Every execution backend in turn: the in-process one and Ray on a local cluster.

The Ray cluster is started once per session (2 CPUs, no dashboard) and shut down at the
end. The ``backend`` fixture also becomes the default backend of the runs a test starts
(``counterpoint.scheduler.execution.DEFAULT_BACKEND``), so the runtime's behaviour tests
imported into tests/backends/test_conformance.py run unchanged on each backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from counterpoint.backend import InProcessBackend


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


@pytest.fixture(params=["inprocess", "ray"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Each backend in turn, installed as the default backend of new runs and resumes."""
    chosen = InProcessBackend() if request.param == "inprocess" \
        else request.getfixturevalue("ray_backend")
    from counterpoint.scheduler import execution, fork
    monkeypatch.setattr(execution, "DEFAULT_BACKEND", chosen)
    monkeypatch.setattr(fork, "DEFAULT_BACKEND", chosen)
    return chosen
