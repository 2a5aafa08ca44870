"""What only the Ray backend does: refuse steps that cannot be pickled, naming the node,
before the run starts; retry an attempt whose worker died; place runs on shard actors."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

import counterpoint as cp
from counterpoint.errors import StepNotSerializable
from counterpoint.ray import run_many
from counterpoint.ray.shipping import ray_options


def test_a_step_closing_over_a_lock_is_refused_at_start_naming_the_node(
        ray_backend: Any) -> None:
    lock = threading.Lock()

    def locked(x: int) -> int:
        with lock:
            return x

    g = cp.Graph("bad")
    g.add("holds_lock", locked, x=1)
    with pytest.raises(StepNotSerializable, match=r"node 'holds_lock'.*lock"):
        cp.run_sync(g, store="memory", options=cp.RunOptions(backend=ray_backend))


def _marked(marker: str) -> bool:
    """Whether ``marker`` existed; it does from now on (one attempt tells the next)."""
    path = Path(marker)
    seen = path.exists()
    path.touch()
    return seen


async def _dies_once(marker: str) -> int:
    if not _marked(marker):
        os._exit(1)  # the actor's process dies mid-attempt
    return 5


def test_an_actor_that_dies_mid_attempt_is_a_retried_attempt_failure(
        ray_backend: Any, tmp_path: Path) -> None:
    g = cp.Graph("dies")
    g.add("a", _dies_once, marker=str(tmp_path / "m"), retries=1)
    result = cp.run_sync(g, store="memory", options=cp.RunOptions(backend=ray_backend))
    assert result["a"] == 5
    assert result.state.nodes["a"].attempt == 2


def test_resource_tags_map_to_ray_resources() -> None:
    cluster = {"CPU": 2.0, "embedder": 1.0}
    assert ray_options({"cpu": 2, "gpu": 1, "embedder": 1, "openai": 4}, cluster) == {
        "num_cpus": 2, "num_gpus": 1, "resources": {"embedder": 1.0}}
    assert ray_options({"openai": 4}, cluster) == {}


async def _double(x: int) -> int:
    return 2 * x


def test_run_many_places_runs_on_shards_and_returns_them_in_order(
        ray_cluster: Any, tmp_path: Path) -> None:
    g = cp.Graph("double")
    g.add("d", _double, x=g.input("x"))
    seen: list[int] = []
    results = run_many(g, [{"x": i} for i in range(30)], workers=2, batch=7,
                       store_dir=tmp_path, progress=lambda p: seen.append(p.done))
    assert [r.output for r in results] == [{"d": 2 * i} for i in range(30)]
    assert all(r.status == "succeeded" for r in results)
    assert seen[-1] == 30
    assert {Path(r.store).name for r in results} <= {"shard-0.db", "shard-1.db"}
    store = cp.open_store(results[0].store)
    try:
        assert store.run(cp.RunId(results[0].run_id)).status == "succeeded"
    finally:
        store.close()
