"""Providers (and their HTTP clients) are reused only for the same configuration.

Re-pointing a configured name at another ``base_url``, or ``OPENAI_BASE_URL`` at
another server, or changing the key, in the same event loop reaches the new
endpoint with the new key; the same configuration keeps its connection pool.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.testing import OpenAIServer, Reply


@pytest.fixture
def servers() -> Iterator[tuple[OpenAIServer, OpenAIServer]]:
    with OpenAIServer(default=Reply.text("from one")) as one, \
            OpenAIServer(default=Reply.text("from two")) as two:
        yield one, two


def _registry(base_url: str, **extra: object) -> ModelRegistry:
    config = ModelConfig(name="fast", provider="openai", model="m", base_url=base_url,
                         **extra)  # type: ignore[arg-type]
    return ModelRegistry({"fast": config}, "fast")


async def test_a_name_re_pointed_at_another_base_url_reaches_the_new_server(
        servers: tuple[OpenAIServer, OpenAIServer]) -> None:
    one, two = servers
    first = await Model("fast", registry=_registry(one.base_url), cache=False).generate("hi")
    one.stop()  # the old endpoint is gone: a reused client would fail to connect
    second = await Model("fast", registry=_registry(two.base_url), cache=False,
                         retries=0).generate("hi")
    assert (first.text, second.text) == ("from one", "from two")
    assert len(two.requests) == 1


async def test_openai_base_url_from_the_environment_is_part_of_the_key(
        servers: tuple[OpenAIServer, OpenAIServer], monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = servers
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-0000")
    monkeypatch.setenv("OPENAI_BASE_URL", one.base_url)
    model = Model("openai:gpt-test", registry=ModelRegistry(), cache=False, retries=0)
    assert (await model.generate("hi")).text == "from one"
    monkeypatch.setenv("OPENAI_BASE_URL", two.base_url)
    assert (await model.generate("hi")).text == "from two"


async def test_a_new_key_gets_a_new_client_and_the_same_config_reuses_one(
        servers: tuple[OpenAIServer, OpenAIServer], monkeypatch: pytest.MonkeyPatch) -> None:
    one, _ = servers
    registry = _registry(one.base_url, api_key_env="FAST_API_KEY")
    monkeypatch.setenv("FAST_API_KEY", "key-number-one")
    model = Model("fast", registry=registry, cache=False, retries=0)
    await model.generate("hi")
    await model.generate("hi")
    monkeypatch.setenv("FAST_API_KEY", "key-number-two")
    await model.generate("hi")
    keys = [r.headers["authorization"] for r in one.requests]
    assert keys == ["Bearer key-number-one"] * 2 + ["Bearer key-number-two"]
    first, second = model._bind("fast").provider, model._bind("fast").provider
    assert first is second


def test_a_closed_loops_clients_and_queues_are_let_go(
        servers: tuple[OpenAIServer, OpenAIServer], caplog: pytest.LogCaptureFixture) -> None:
    """``asyncio.run`` once per request (or per script step) must not keep every loop it
    ran, with its HTTP connections: a loop's providers and slot queues are dropped once it
    is closed, and no client closes itself on another loop ("Event loop is closed")."""
    import asyncio
    import gc
    import weakref

    model = Model("fast", registry=_registry(servers[0].base_url, max_concurrency=2),
                  cache=False)
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def call() -> str:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        text = (await model.generate("hi")).text
        gc.collect()  # what an earlier loop left is collected while this loop runs
        return text

    for _ in range(6):
        assert asyncio.run(call()) == "from one"
    gc.collect()
    alive = [ref for ref in loops if ref() is not None]
    assert len(alive) <= 1, f"{len(alive)} of 6 closed loops are still alive"
    assert not [r for r in caplog.records if "Event loop is closed" in r.getMessage()
                or "never retrieved" in r.getMessage()]
