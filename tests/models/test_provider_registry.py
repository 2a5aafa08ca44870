"""Providers are found through one registry: built-ins, entry points and runtime registration.

A third-party provider kind plugs in exactly like ``openai``, ``anthropic`` and
``local``: named in a model (``kind:id``) or a config file, built by its factory,
called through the same facade. An unknown kind is a ``ConfigError`` that lists the
known kinds and says how to add one. Adapters' SDKs are imported only when used.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from counterpoint.errors import ConfigError
from counterpoint.models import (
    Model,
    ModelConfig,
    Provider,
    ProviderFactory,
    Request,
    Response,
    load_registry,
    register_provider,
)
from counterpoint.models.provider import TextSink
from counterpoint.models.provider_registry import ENTRY_POINT_GROUP, ProviderRegistry


class ShoutProvider(Provider):
    """A third-party provider: answers with the last message in capitals."""

    def __init__(self, config: ModelConfig) -> None:
        from counterpoint.models import Capabilities
        self.name = config.name
        self.model = config.model
        self.capabilities = Capabilities()

    @property
    def identity(self) -> str:
        return f"shout:{self.model}"

    async def complete(self, request: Request, *, on_text: TextSink | None = None,
                       time_limit: float | None = None) -> Response:
        return Response(text=f"{self.model}: {request.messages[-1].content.upper()}")


def shout(config: ModelConfig) -> Provider:
    return ShoutProvider(config)


async def test_a_provider_registered_at_runtime_works_like_a_built_in(tmp_path: Path) -> None:
    factory: ProviderFactory = shout
    register_provider("shout", factory)
    answer = await Model("shout:loud", cache=False).generate("hello")
    assert (answer.text, answer.model) == ("loud: HELLO", "shout:loud")
    (tmp_path / "counterpoint.toml").write_text(
        '[models.yell]\nprovider = "shout"\nmodel = "louder"\n')
    registry = load_registry([tmp_path / "counterpoint.toml"])
    answer = await Model("yell", registry=registry, cache=False).generate("hi")
    assert answer.text == "louder: HI"


def test_an_unknown_provider_lists_the_known_ones_and_how_to_add_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        Model("azure:gpt").registry.resolve("azure:gpt")
    message = str(caught.value)
    assert "unknown provider 'azure'" in message
    assert "anthropic, local, openai" in message
    assert "register_provider" in message and ENTRY_POINT_GROUP in message
    (tmp_path / "counterpoint.toml").write_text('[models.x]\nprovider = "azure"\n')
    with pytest.raises(ConfigError, match=r"counterpoint.toml:1: .*unknown provider 'azure'"):
        load_registry([tmp_path / "counterpoint.toml"])


def _fake_distribution(root: Path, entry_points: str) -> None:
    """A distribution on ``sys.path``, as ``pip install`` would leave it."""
    (root / "thirdparty_provider.py").write_text(textwrap.dedent('''
        from counterpoint.models import ScriptedModel

        def build(config):
            return ScriptedModel([f"third party says hi from {config.model}"],
                                 name=config.name)
    '''))
    info = root / "thirdparty_provider-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-provider\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


async def test_an_entry_point_is_found_through_the_same_lookup_as_the_built_ins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_distribution(tmp_path, f"[{ENTRY_POINT_GROUP}]\n"
                                 "thirdparty = thirdparty_provider:build\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = ProviderRegistry()
    assert {"openai", "anthropic", "local", "thirdparty"} <= set(registry.kinds())
    provider = registry.build(ModelConfig(name="tp", provider="thirdparty", model="m1"))
    answer = await Model(provider, cache=False).generate("hi")
    assert answer.text == "third party says hi from m1"


def test_a_broken_entry_point_is_a_config_error_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_distribution(tmp_path, f"[{ENTRY_POINT_GROUP}]\nbroken = no_such_module:build\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"provider 'broken'.*no_such_module:build"):
        ProviderRegistry().build(ModelConfig(name="b", provider="broken"))


def test_importing_counterpoint_loads_no_provider_sdk() -> None:
    code = ("import sys, counterpoint, counterpoint.models\n"
            "from counterpoint.models import Model\n"
            "Model('openai:gpt-4.1-mini').registry.resolve('anthropic:claude')\n"
            "print(sorted(m for m in ('openai', 'anthropic', 'llama_cpp') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
