"""Model preflight against a real HTTP server (counterpoint.testing.OpenAIServer, on
127.0.0.1) and a missing key: every problem of every named model, before a run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from counterpoint.errors import ConfigError
from counterpoint.models import ModelRegistry, load_registry
from counterpoint.models.preflight import ModelUse, preflight, raise_for
from counterpoint.testing import OpenAIServer, Reply


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def _registry(tmp_path: Path, server: OpenAIServer, profile: str, extra: str = "") -> ModelRegistry:
    config = tmp_path / "counterpoint.toml"
    config.write_text(f'[models.served]\nprovider = "openai"\nmodel = "m"\n'
                      f'base_url = "{server.base_url}"\nprofile = "{profile}"\n{extra}')
    return load_registry([config])


async def test_a_working_server_passes_the_structured_output_probe(
        tmp_path: Path, server: OpenAIServer) -> None:
    server.script(Reply.json({"ok": True}))
    registry = _registry(tmp_path, server, "vllm")
    [check] = await preflight([ModelUse(name="served", where="node 'a'")],
                              registry=registry)
    assert check.ok and check.reachable and check.structured, check.problem
    assert check.key == "not needed" and check.latency is not None and check.latency >= 0
    sent = server.requests[-1].body
    assert sent["response_format"]["type"] == "json_schema"  # the vllm profile's mode
    assert sent["max_tokens"] <= 32


async def test_a_profile_the_server_does_not_follow_fails_with_a_hint(
        tmp_path: Path, server: OpenAIServer) -> None:
    server.script(Reply.text("Sure! Here you go: ok"))
    registry = _registry(tmp_path, server, "llama.cpp")
    [check] = await preflight([ModelUse(name="served", where="flow.yaml:7")],
                              registry=registry)
    assert check.reachable and check.structured is False
    assert check.problem is not None
    assert "flow.yaml:7" in check.problem and "profile" in check.problem
    assert "llama.cpp" in check.problem and "counterpoint.toml" in check.problem


async def test_an_unreachable_server_is_reported(tmp_path: Path) -> None:
    config = tmp_path / "counterpoint.toml"
    config.write_text('[models.down]\nprovider = "openai"\nmodel = "m"\n'
                      'base_url = "http://127.0.0.1:9/v1"\n')
    [check] = await preflight([ModelUse(name="down", where="--model down")],
                              registry=load_registry([config]))
    assert check.reachable is False and check.problem is not None
    assert "cannot connect" in check.problem and "--no-preflight" in check.problem


async def test_missing_keys_are_one_error_naming_each_variable_model_and_place(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    checks = await preflight([
        ModelUse(name="openai:gpt-4.1-mini", where="role planner (--model openai:gpt-4.1-mini)"),
        ModelUse(name="openai:gpt-4.1-mini", where="role verifier"),  # named twice: one check
        ModelUse(name="anthropic:claude-sonnet-4-5", where="flow.yaml:3")],
        registry=load_registry([]))
    assert [c.key for c in checks] == ["missing", "missing"]
    assert all(c.reachable is None for c in checks)  # nothing was sent without a key
    with pytest.raises(ConfigError) as caught:
        raise_for(checks)
    message = str(caught.value)
    assert message.startswith("2 models cannot be used")
    assert "OPENAI_API_KEY" in message and "ANTHROPIC_API_KEY" in message
    assert "(--model openai:gpt-4.1-mini)" in message and "flow.yaml:3" in message


async def test_a_passed_check_is_kept_for_the_process(tmp_path: Path,
                                                      server: OpenAIServer) -> None:
    server.script(Reply.json({"ok": True}))
    registry = _registry(tmp_path, server, "sglang", extra="rpm = 7\n")
    use = ModelUse(name="served", where="here")
    first = await preflight([use], registry=registry)
    asked = len(server.requests)
    second = await preflight([use], registry=registry)
    assert first[0].ok and second[0].ok
    assert len(server.requests) == asked  # no second probe


async def test_an_unknown_model_name_is_reported_with_its_place() -> None:
    [check] = await preflight([ModelUse(name="nope", where="node 'x'")],
                              registry=load_registry([]))
    assert check.problem is not None and "unknown model 'nope'" in check.problem
    assert "node 'x'" in check.problem
