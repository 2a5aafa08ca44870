"""The backend conformance suite: the runtime's behaviour tests, run on every backend
(the ``backend`` fixture of tests/backends/conftest.py makes each one the default)."""

from __future__ import annotations

from typing import Any

import pytest
import test_runtime as runtime

import counterpoint as cp

BEHAVIOUR = [runtime.test_outputs_flow_along_data_edges,
             runtime.test_failure_blocks_dependents_and_independent_branches_finish,
             runtime.test_timeout_then_fallback,
             runtime.test_timeout_failure_names_node_and_limit,
             runtime.test_deadline_returns_partial_result,
             runtime.test_dynamic_fan_out_and_join, runtime.test_subgraph_as_a_node,
             runtime.test_handle_cancel_and_event_stream]


@pytest.mark.parametrize("behaviour", BEHAVIOUR, ids=lambda t: str(t.__name__[5:]))
def test_behaviour(behaviour: Any, backend: Any, tmp_path: Any) -> None:
    args = [tmp_path] if behaviour.__code__.co_argcount else []
    behaviour(*args)


def _fails_once(marker: str) -> int:
    from pathlib import Path
    path = Path(marker)
    if not path.exists():
        path.touch()
        raise RuntimeError("first attempt fails")
    return 7


def test_a_retried_step_succeeds_on_its_second_attempt(backend: Any, tmp_path: Any) -> None:
    g = cp.Graph("retry")
    g.add("a", _fails_once, marker=str(tmp_path / "m"), retries=1)
    result = cp.run_sync(g, store="memory")
    assert result["a"] == 7
    assert result.state.nodes["a"].attempt == 2
