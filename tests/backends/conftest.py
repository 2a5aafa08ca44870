"""Every execution backend in turn: the in-process one and Ray on a local cluster.

The Ray cluster (tests/ray_fixtures.py, through tests/conftest.py) is started once per
session (2 CPUs, no dashboard) and shut down at the end. The ``backend`` fixture also
becomes the default backend of the runs a test starts
(``counterpoint.scheduler.execution.DEFAULT_BACKEND``), so the behaviour tests of
tests/backends/test_conformance.py run unchanged on each backend.
"""

from __future__ import annotations

from typing import Any

import pytest

from counterpoint.backend import InProcessBackend


@pytest.fixture(params=["inprocess", "ray"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Each backend in turn, installed as the default backend of new runs and resumes."""
    chosen = InProcessBackend() if request.param == "inprocess" \
        else request.getfixturevalue("ray_backend")
    from counterpoint.scheduler import execution, fork
    monkeypatch.setattr(execution, "DEFAULT_BACKEND", chosen)
    monkeypatch.setattr(fork, "DEFAULT_BACKEND", chosen)
    return chosen
