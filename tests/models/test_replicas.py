"""A model with several endpoints (``base_urls``): each workflow sticks to one replica.

Pure tests of the replica order (rendezvous hashing with bounded loads), then runs
against two real OpenAI-compatible servers on loopback: a workflow's calls go to one
replica (recorded as each call's ``endpoint``), round-robin spreads them, and a replica
that cannot be reached hands its calls to the other.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

import counterpoint as cp
from counterpoint.errors import ConfigError
from counterpoint.events import EventKind
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.models.config import load_registry
from counterpoint.models.replicas import ReplicaSet
from counterpoint.store import MemoryStore
from counterpoint.testing import OpenAIServer, Reply

URLS = ("http://a/v1", "http://b/v1", "http://c/v1")


def test_a_workflow_always_prefers_the_same_replica() -> None:
    replicas = ReplicaSet(URLS)
    first = {f"run-{i}": replicas.order(f"run-{i}")[0] for i in range(60)}
    assert first == {f"run-{i}": replicas.order(f"run-{i}")[0] for i in range(60)}
    spread = Counter(first.values())
    assert set(spread) == set(URLS)  # workflows spread over every replica
    assert sorted(replicas.order("run-1")) == sorted(URLS)  # the rest is the failover order


def test_a_busy_replica_spills_a_new_call_to_the_next_in_the_workflows_order() -> None:
    replicas = ReplicaSet(URLS[:2])
    preferred, other = replicas.order("wf")
    with replicas.holding(preferred), replicas.holding(preferred):
        # 2 in flight at the preferred one, 0 at the other: bound ceil(1.25 * 3 / 2) = 2
        assert replicas.order("wf") == [other, preferred]
    assert replicas.order("wf")[0] == preferred
    assert replicas.load(preferred) == 0


def test_a_replica_with_a_free_slot_keeps_its_workflows_calls() -> None:
    replicas = ReplicaSet(URLS[:2], capacity=4)
    preferred, other = replicas.order("wf")
    with replicas.holding(preferred), replicas.holding(preferred), \
            replicas.holding(preferred):
        assert replicas.order("wf")[0] == preferred  # 3 of 4 slots taken: stay
        with replicas.holding(preferred), replicas.holding(preferred):
            assert replicas.order("wf")[0] == other  # full, and above the bound: spill


def test_removing_a_replica_moves_only_the_workflows_that_preferred_it() -> None:
    before = ReplicaSet(URLS)
    after = ReplicaSet(URLS[:2])
    for i in range(100):
        choice = before.order(f"w{i}")[0]
        if choice != URLS[2]:
            assert after.order(f"w{i}")[0] == choice


def test_round_robin_hands_calls_out_in_turn() -> None:
    replicas = ReplicaSet(URLS, balance="round_robin")
    firsts = [replicas.order("same workflow")[0] for _ in range(6)]
    assert firsts == [*URLS, *URLS]


@given(st.lists(st.tuples(st.sampled_from(["w1", "w2", "w3", "w4"]), st.booleans()),
                max_size=60))
def test_the_first_choice_never_goes_above_the_load_bound(
        steps: list[tuple[str, bool]]) -> None:
    """Calls start (True) and finish (False) in any order; every call's first replica
    keeps its load within ceil(slack x (total + 1) / replicas)."""
    replicas = ReplicaSet(URLS)
    open_calls: list[object] = []
    for workflow, start in steps:
        if start or not open_calls:
            total = sum(replicas.load(u) for u in URLS)
            url = replicas.order(workflow)[0]
            assert replicas.load(url) + 1 <= math.ceil(replicas.slack * (total + 1) / 3)
            hold = replicas.holding(url)
            hold.__enter__()
            open_calls.append(hold)
        else:
            open_calls.pop(0).__exit__(None, None, None)  # type: ignore[attr-defined]
    for hold in open_calls:
        hold.__exit__(None, None, None)  # type: ignore[attr-defined]
    assert all(replicas.load(u) == 0 for u in URLS)


# --- configuration ------------------------------------------------------------------------


def test_base_urls_are_read_from_counterpoint_toml(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "counterpoint.toml"  # type: ignore[operator]
    path.write_text('[models.big]\nprovider = "openai"\nmodel = "m"\n'
                    'base_urls = ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]\n'
                    'balance = "round_robin"\n')
    config = load_registry([path]).resolve("big")
    assert config.base_urls == ("http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1")
    assert config.balance == "round_robin"


@pytest.mark.parametrize(("table", "line", "problem"), [
    ('base_url = "http://x/v1"\nbase_urls = ["http://y/v1"]', 1, "not both"),
    ('base_urls = ["http://y/v1", "http://y/v1"]', 1, "twice"),
    ('base_urls = ["http://y/v1"]\nbalance = "random"', 5, "balance"),  # the key's line
])
def test_a_bad_replica_setting_is_a_config_error_with_its_line(
        tmp_path: pytest.TempPathFactory, table: str, line: int, problem: str) -> None:
    path = tmp_path / "counterpoint.toml"  # type: ignore[operator]
    path.write_text(f'[models.big]\nprovider = "openai"\nmodel = "m"\n{table}\n')
    with pytest.raises(ConfigError, match=rf"counterpoint.toml:{line}: model 'big'.*{problem}"):
        load_registry([path])


# --- against two real servers -----------------------------------------------------------------


@pytest.fixture
def two() -> Iterator[tuple[OpenAIServer, OpenAIServer]]:
    with OpenAIServer(default=Reply.echo()) as one, OpenAIServer(default=Reply.echo()) as two:
        yield one, two


def _registry(urls: tuple[str, ...], balance: str = "sticky") -> ModelRegistry:
    config = ModelConfig(name="big", provider="openai", model="m", base_urls=urls,
                         balance=balance, retries=0, max_concurrency=4)  # type: ignore[arg-type]
    return ModelRegistry({"big": config}, "big")


def _workflow(model: Model, calls: int) -> cp.Graph:
    g = cp.Graph("chatty")

    async def ask(i: int) -> str:
        return (await model.generate(f"question {i}", cache=False)).text

    for i in range(calls):
        g.add(f"ask{i}", ask, i=i)
    return g


def _endpoints(store: MemoryStore, run_id: str) -> list[str]:
    return [e.data["endpoint"] for e in store.events(run_id)
            if e.kind is EventKind.MODEL_CALL and "error" not in e.data]


async def test_each_workflows_calls_stay_on_one_replica(
        two: tuple[OpenAIServer, OpenAIServer]) -> None:
    model = Model("big", registry=_registry((two[0].base_url, two[1].base_url)))
    store = MemoryStore()
    runs = [await cp.run(_workflow(model, 3), store=store) for _ in range(8)]
    used = [set(_endpoints(store, str(r.run_id))) for r in runs]
    assert all(len(u) == 1 for u in used)  # 3 calls at once, 4 slots: never spilled
    assert {next(iter(u)) for u in used} == {two[0].base_url, two[1].base_url}
    assert len(two[0].requests) + len(two[1].requests) == 24


async def test_round_robin_spreads_one_workflows_calls(
        two: tuple[OpenAIServer, OpenAIServer]) -> None:
    model = Model("big", registry=_registry((two[0].base_url, two[1].base_url),
                                            "round_robin"))
    store = MemoryStore()
    result = await cp.run(_workflow(model, 4), store=store)
    assert Counter(_endpoints(store, str(result.run_id))) == {
        two[0].base_url: 2, two[1].base_url: 2}


async def test_a_replica_that_cannot_be_reached_hands_its_calls_to_the_other(
        two: tuple[OpenAIServer, OpenAIServer]) -> None:
    one, other = two
    model = Model("big", registry=_registry((one.base_url, other.base_url)))
    one.stop()  # every workflow whose first choice is `one` must fail over
    store = MemoryStore()
    runs: list[cp.RunResult] = []
    errors: list[dict[str, object]] = []
    while not errors and len(runs) < 40:  # a run prefers either replica, by its random id
        runs.append(await cp.run(_workflow(model, 1), store=store))
        errors = [e.data for r in runs for e in store.events(str(r.run_id))
                  if e.kind is EventKind.MODEL_CALL and "error" in e.data]
    assert errors, f"none of {len(runs)} workflows preferred the stopped replica"
    assert all(r.status is cp.RunStatus.SUCCEEDED for r in runs)
    assert len(other.requests) == len(runs)
