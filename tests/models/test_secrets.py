"""Secrets never reach an error message or the log: ``counterpoint.secrets``.

The redaction facility itself (registered values, environment variables named like
secrets, nested data), and the model layer using it: a provider whose error body
echoes the API key raises an error, and records an event, without the key.
"""

from __future__ import annotations

import pytest
from anthropic_fake import FakeAnthropic
from anthropic_fake import Reply as AReply

import counterpoint as cp
from counterpoint import secrets
from counterpoint.events import EventKind
from counterpoint.models import Message, Model, ModelConfig, ModelRegistry, Request
from counterpoint.models.anthropic import AnthropicProvider
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.store import MemoryStore
from counterpoint.testing import OpenAIServer, Reply


def test_registered_values_are_replaced() -> None:
    redactor = secrets.Redactor(environ={})
    assert redactor.redact("nothing to hide") == "nothing to hide"
    redactor.register("sk-live-0123456789")
    redactor.register("sk-live-0123456789-long")  # overlapping: the longer one wins
    redactor.register("short")  # too short to tell from ordinary text: ignored
    text = "key sk-live-0123456789-long and sk-live-0123456789, not short"
    assert redactor.redact(text) == "key *** and ***, not short"


def test_environment_variables_named_like_secrets_are_registered() -> None:
    redactor = secrets.Redactor(environ={
        "OPENAI_API_KEY": "sk-from-the-environment", "GITHUB_TOKEN": "ghp_abcdefghij",
        "DB_PASSWORD_FILE": "hunter2hunter2", "APP_SECRET": "s3cr3t-value",
        "HOME": "/home/someone-long", "SHORT_TOKEN": "abc"})
    text = ("sk-from-the-environment ghp_abcdefghij hunter2hunter2 s3cr3t-value "
            "/home/someone-long abc")
    assert redactor.redact(text) == "*** *** *** *** /home/someone-long abc"


def test_nested_data_is_redacted_and_other_values_kept() -> None:
    redactor = secrets.Redactor(environ={})
    redactor.register("tok-9876543210")
    data = {"message": "bad tok-9876543210", "attempt": 2, "items": [
        "tok-9876543210", ("x", None, 1.5)], "tok-9876543210": True}
    assert redactor.redact_data(data) == {"message": "bad ***", "attempt": 2, "items": [
        "***", ("x", None, 1.5)], "***": True}


def test_the_process_wide_functions() -> None:
    secrets.register_secret("process-wide-secret-1")
    assert secrets.redact("a process-wide-secret-1 b") == "a *** b"
    assert secrets.redact_data(["process-wide-secret-1"]) == ["***"]
    error = ValueError("boom process-wide-secret-1")
    error.add_note("note process-wide-secret-1")
    assert secrets.redact_exception(error) is error
    assert str(error) == "boom ***" and error.__notes__ == ["note ***"]


def _echo_key(key: str) -> Reply:
    return Reply.status(401, {"error": {"message": f"Incorrect API key provided: {key}."}})


async def test_a_key_from_the_environment_echoed_in_an_error_is_redacted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-proj-echoed-from-env-4242"
    monkeypatch.setenv("ECHO_KEY_VARIABLE", key)  # not named like a secret: read by config
    with OpenAIServer([_echo_key(key)]) as server:
        registry = ModelRegistry({"echo": ModelConfig(
            name="echo", provider="openai", model="m", base_url=server.base_url,
            api_key_env="ECHO_KEY_VARIABLE")}, "echo")
        with pytest.raises(cp.ModelRejected) as caught:
            await Model("echo", registry=registry, cache=False).generate("hi")
    assert key not in str(caught.value) and "Incorrect API key provided: ***" in \
        str(caught.value)
    assert key not in str(caught.value.__cause__)


async def test_a_key_given_to_a_provider_never_reaches_the_log() -> None:
    key = "sk-given-directly-to-the-provider"
    with OpenAIServer([_echo_key(key)]) as server:
        model = Model(OpenAIProvider("direct", "m", base_url=server.base_url, api_key=key),
                      cache=False)
        graph = cp.Graph("leak")

        async def ask() -> str:
            return (await model.generate("hi")).text

        graph.add("ask", ask)
        store = MemoryStore()
        result = await cp.run(graph, store=store)
    calls = [e.data for e in store.events(result.run_id) if e.kind is EventKind.MODEL_CALL]
    assert calls and all(key not in str(c) for c in calls)
    error = result.nodes["ask"].error
    assert error is not None and key not in str(error)  # the message and the traceback


async def test_an_anthropic_error_echoing_the_key_is_redacted() -> None:
    key = "sk-ant-echoed-back-1234"
    with FakeAnthropic() as fake:
        fake.script(AReply.error(401, f"invalid x-api-key {key}"))
        provider = AnthropicProvider("claude", "claude-test", base_url=fake.base_url,
                                     api_key=key)
        with pytest.raises(cp.ModelRejected) as caught:
            await provider.complete(_request())
        await provider.aclose()
    assert key not in str(caught.value) and "***" in str(caught.value)


def _request() -> Request:
    return Request(messages=(Message.user("hi"),))


def test_a_secret_is_masked_where_json_escapes_it() -> None:
    """Output, prompts and attributes are shown and exported as JSON, where a secret with
    ``"``, ``\\`` or non-ASCII characters is written escaped, once or inside JSON text."""
    import json
    redactor = secrets.Redactor(environ={"DB_PASSWORD": 'pa"ss\\word-01é'})
    value = {"dsn": 'postgresql://app:pa"ss\\word-01é@db'}
    for encoded in (json.dumps(value), json.dumps(value, ensure_ascii=False),
                    json.dumps(json.dumps(value)), json.dumps({"args": json.dumps(value)})):
        assert "pa" not in redactor.redact(encoded).replace("postgresql", "")
        assert json.loads(redactor.redact(encoded))  # still JSON
    assert redactor.redact(json.dumps(value)) == '{"dsn": "postgresql://app:***@db"}'
