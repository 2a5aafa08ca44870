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


def test_run_many_refuses_inputs_that_do_not_fit_before_placing_any_run(
        ray_cluster: Any, tmp_path: Path) -> None:
    g = cp.Graph("double")
    g.add("d", _double, x=g.input("x"))
    with pytest.raises(cp.errors.UserError, match=r"run_many inputs\[1\]: .*needs input"):
        run_many(g, [{"x": 1}, {"y": 2}], workers=1, store_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # no shard started, no run logged


def test_run_many_of_a_target_raises_the_shards_user_error_as_it_is(
        ray_cluster: Any, tmp_path: Path) -> None:
    # the shard's UserError came back wrapped in Ray's RayTaskError and an exception group
    flow = tmp_path / "flow.py"
    flow.write_text("import counterpoint as cp\n\n\nasync def double(x: int) -> int:\n"
                    "    return 2 * x\n\ngraph = cp.Graph('double')\n"
                    "graph.output(graph.add('d', double, x=graph.input('x')))\n")
    with pytest.raises(cp.errors.UserError, match=r"has no input.*'y'"):
        run_many(str(flow), [{"x": 1, "y": 2}], workers=1, store_dir=tmp_path / "shards")


def test_a_shard_pool_of_more_shards_than_cpus_fails_as_it_starts(
        ray_cluster: Any, tmp_path: Path) -> None:
    from counterpoint.ray import ShardPool
    pool = ShardPool(3, store_dir=tmp_path / "shards")  # the session's cluster has 2 CPUs
    with pytest.raises(cp.errors.UserError, match="3 shards need a CPU each"):
        pool.start()
    assert pool.shards == [] and not (tmp_path / "shards").exists()


def test_a_shard_pool_streams_a_lazy_iterable_and_keeps_its_shards(
        ray_cluster: Any, tmp_path: Path) -> None:
    from counterpoint.ray import ShardPool
    g = cp.Graph("double")
    g.add("d", _double, x=g.input("x"))

    def inputs() -> Any:  # a generator: the pool reads it as it goes
        yield from ({"x": i} for i in range(25))

    with ShardPool(2, store_dir=tmp_path) as pool:
        shards = list(pool.shards)
        batches = list(pool.stream(g, inputs(), batch=4))
        assert pool.in_flight == 0
        again = pool.run_many(g, [{"x": 1}])
        assert pool.shards == shards  # the same actors served both calls
        assert all(rss > 0 for rss in pool.rss())
    summaries = [s for batch in batches for s in batch]
    assert sorted(s.index for s in summaries) == list(range(25))
    assert all(len(batch) <= 4 for batch in batches)
    assert {s.index: s.output for s in summaries} == {i: {"d": 2 * i} for i in range(25)}
    assert again[0].output == {"d": 2}


def test_a_bad_address_from_ray_address_says_it_came_from_there(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from support import free_port

    from counterpoint.errors import ConfigError
    from counterpoint.ray.cluster import connect
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{free_port()}")
    # the message said "leave it out", of an address the user had not given
    with pytest.raises(ConfigError, match=r"cannot reach the Ray cluster .*the address is "
                                          r"\$RAY_ADDRESS's: unset it"):
        connect(None)


def test_a_cluster_address_is_checked_before_ray_is_asked() -> None:
    from support import free_port

    from counterpoint.errors import ConfigError
    from counterpoint.ray.cluster import check_address
    check_address("auto")
    with pytest.raises(ConfigError, match="not 'auto', HOST:PORT or ray://HOST:PORT"):
        check_address("ray://no-port")
    address = f"ray://127.0.0.1:{free_port()}"
    with pytest.raises(ConfigError, match=f"cannot reach the Ray cluster at '{address}'"):
        check_address(address)


async def _kills_its_shard_once(x: int, marker: str) -> int:
    if x == 5 and not _marked(marker):
        os._exit(1)  # the shard actor's process dies mid-batch
    return x


def test_a_shard_that_dies_is_replaced_and_its_batches_run_again(
        ray_cluster: Any, tmp_path: Path) -> None:
    g = cp.Graph("dies-once")
    g.add("k", _kills_its_shard_once, x=g.input("x"), marker=str(tmp_path / "m"))
    results = run_many(g, [{"x": i} for i in range(12)], workers=2, batch=3,
                       store_dir=tmp_path / "shards")
    assert [r.output for r in results] == [{"k": i} for i in range(12)]
    assert all(r.status == "succeeded" for r in results)


def test_a_shard_logs_from_its_own_thread_and_collects_rarely(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard (here its class, in this process: the actor runs the same code) commits its
    log in a thread of its process, with no writer process, answers a batch as columns
    once the batch is durable, and raises the collector's thresholds to SHARD_GC."""
    import asyncio
    import gc

    from ray import cloudpickle

    from counterpoint.ray.shards import SHARD_GC, Shard
    monkeypatch.delenv("COUNTERPOINT_GC", raising=False)
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        shard = Shard(str(tmp_path / "shard-0.db"))
        assert gc.get_threshold() == SHARD_GC
    finally:
        gc.set_threshold(*before)
    g = cp.Graph("double")
    g.add("d", _double, x=g.input("x"))

    async def batch() -> Any:
        await shard.prepare(1, cloudpickle.dumps(g), cp.RunOptions().as_data(), 10)
        return await shard.run_batch(1, [(i, {"x": i}) for i in range(5)])

    try:
        ids, statuses, outputs = asyncio.run(batch())
        assert statuses == ["succeeded"] * 5 and outputs == [{"d": 2 * i} for i in range(5)]
        assert shard.store.writer_pid is None  # no writer process: its thread committed
        reader = cp.SQLiteStore(tmp_path / "shard-0.db")
        try:
            assert {reader.run(cp.RunId(i)).status for i in ids} == {"succeeded"}
        finally:
            reader.close()
    finally:
        shard.store.close()


def _plus_one(x: int) -> int:
    return x + 1


@pytest.mark.parametrize(("tags", "asks"), [({"gpu": 1}, "GPU 1"), ({"cpu": 64}, "CPU 64")])
def test_a_node_asking_for_resources_no_ray_node_has_fails_as_the_run_starts(
        ray_backend: Any, tags: dict[str, int], asks: str) -> None:
    # Ray queued its task as infeasible and the run waited for ever (the session's
    # cluster has 2 CPUs and no GPU)
    g = cp.Graph("greedy")
    g.add("big", _plus_one, x=1, resources=tags)
    with pytest.raises(cp.errors.UserError, match=rf"node 'big': its resources ask Ray "
                                                  rf"for {asks} on one machine"):
        cp.run_sync(g, store="memory", options=cp.RunOptions(backend=ray_backend))


def test_resources_the_cluster_has_and_counterpoint_limits_run_on_ray(
        ray_backend: Any) -> None:
    g = cp.Graph("fits")
    g.add("one", _plus_one, x=1, resources={"cpu": 1, "openai": 3})
    result = cp.run_sync(g, store="memory", options=cp.RunOptions(backend=ray_backend))
    assert result.status == "succeeded"


class ApiError(Exception):
    """An exception pickle cannot rebuild: its ``__init__`` takes other arguments than the
    ``args`` it passes on (a common shape for an HTTP client's error)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.lock = threading.Lock()  # and an attribute that does not pickle at all


def _one_node(ray_backend: Any, node: str, step: Any, policy: cp.Policy | None = None
              ) -> tuple[cp.RunResult, cp.NodeResult]:
    """Run a graph of the one node ``node`` calling ``step`` on Ray; its result and the
    node's."""
    g = cp.Graph(node)
    g.add(node, step, policy=policy)
    result = cp.run_sync(g, store="memory", options=cp.RunOptions(backend=ray_backend))
    return result, result.nodes[cp.NodeId(node)]


def _call_api() -> int:
    raise ApiError(503, "busy")


async def _call_api_async() -> int:
    raise ApiError(503, "busy")


@pytest.mark.parametrize("step", [_call_api, _call_api_async])
def test_a_step_exception_pickle_cannot_rebuild_keeps_its_class_across_ray(
        ray_backend: Any, step: Any) -> None:
    # Ray handed the controller an UnserializableException with a traceback dump as its
    # message, so retry_on=(ApiError,) did not match and the node was not retried
    result, node = _one_node(ray_backend, "call", step,
                             cp.Policy(retries=1, retry_on=(ApiError,)))
    assert (result.status, node.attempts) == ("failed", 2)
    assert node.error is not None
    assert (node.error["type"], node.error["message"]) == ("ApiError", "HTTP 503: busy")


def test_the_raylet_messages_go_to_stderr_not_stdout(
        ray_cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # Ray's driver printed "(raylet) A worker died ..." on stdout, inside the JSON of
    # `counterpoint run --workers N --inputs F --json` when a shard was killed; this is the
    # call Ray's error listener makes for such a message
    import ray._private.worker as ray_worker

    from counterpoint.ray.cluster import connect
    connect(None)
    ray_worker.print_to_stdstream({"lines": ["A worker died (test)"], "pid": "raylet",
                                   "is_err": False}, ignore_prefix=False)
    captured = capsys.readouterr()
    assert "A worker died (test)" in captured.err
    assert "A worker died" not in captured.out


def _returns_a_lock() -> Any:
    return threading.Lock()


async def _returns_a_lock_async() -> Any:
    return threading.Lock()


def _raises_a_pickling_type_error() -> int:
    raise TypeError("cannot pickle '_thread.lock' object")


@pytest.mark.parametrize("step", [_returns_a_lock, _returns_a_lock_async])
def test_an_output_ray_cannot_send_back_fails_the_node_once_naming_it(
        ray_backend: Any, step: Any) -> None:
    # Ray's own TypeError ("cannot pickle '_thread.lock' object") reached the user bare,
    # and retry_on=(Exception,) retried it: the same output would fail the same way
    result, node = _one_node(ray_backend, "make", step,
                             cp.Policy(retries=2, retry_on=(Exception,)))
    assert (result.status, node.attempts) == ("failed", 1)
    assert node.error is not None
    assert node.error["type"] == "OutputNotSerializable"
    assert node.error["retryable"] is False
    message = node.error["message"]
    assert f"run {result.run_id}, node 'make'" in message
    assert "cannot be sent back from the Ray worker" in message
    assert "_thread.lock" in message
    assert "Return JSON-compatible data" in message


def test_a_step_raising_a_pickling_error_itself_keeps_its_error(ray_backend: Any) -> None:
    # the step's own TypeError is its failure, not an output Ray failed to send back
    _, node = _one_node(ray_backend, "raise", _raises_a_pickling_type_error)
    assert node.error is not None
    assert (node.error["type"], node.error["message"]) == (
        "TypeError", "cannot pickle '_thread.lock' object")
