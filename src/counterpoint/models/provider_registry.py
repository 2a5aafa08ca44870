"""Which code builds the provider of a model's ``provider`` kind: one registry for all.

A kind (``openai``, ``anthropic``, ``local``, or a plugin's) maps to a
:class:`ProviderFactory`, a callable that turns a
:class:`~counterpoint.models.config.ModelConfig` into a
:class:`~counterpoint.models.provider.Provider`. Kinds are registered in one way,
:meth:`ProviderRegistry.register`, from three sources, in this order:

1. the built-in table below (so a source checkout works without being installed);
2. the ``counterpoint.providers`` entry point group, where counterpoint declares the
   same built-ins in ``pyproject.toml`` and a plugin declares its own::

       [project.entry-points."counterpoint.providers"]
       mykind = "my_package.provider:build"     # build(config) -> Provider

3. :func:`register_provider` at runtime.

Factories are named by ``module:attribute`` and imported on first use, so the
SDK behind a kind (``openai``, ``anthropic``, ``llama_cpp``) is loaded only when a
model of that kind is built, and entry points are read only when a kind is
first looked up, never on ``import counterpoint``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import threading
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from ..errors import ConfigError

if TYPE_CHECKING:
    from .config import ModelConfig
    from .provider import Provider

__all__ = ["BUILTIN_PROVIDERS", "ENTRY_POINT_GROUP", "PROVIDERS", "ProviderFactory",
           "ProviderRegistry", "build_provider", "register_provider"]

ENTRY_POINT_GROUP = "counterpoint.providers"

BUILTIN_PROVIDERS: Mapping[str, str] = {
    "openai": "counterpoint.models.openai_compat:from_config",
    "anthropic": "counterpoint.models.anthropic:from_config",
    "local": "counterpoint.models.local:from_config",
}
"""The built-in kinds, as also declared in ``pyproject.toml``'s entry points."""


class ProviderFactory(Protocol):
    """Builds a provider for one model configuration of its kind.

    Called once per distinct configuration and event loop (providers hold
    connection pools); may raise :class:`~counterpoint.errors.ConfigError` for a
    configuration it cannot serve. Must not make network calls.
    """

    def __call__(self, config: ModelConfig, /) -> Provider: ...


class ProviderRegistry:
    """Provider kinds and their factories; see the module docstring. Thread-safe."""

    def __init__(self, builtins: Mapping[str, str] = BUILTIN_PROVIDERS, *,
                 group: str | None = ENTRY_POINT_GROUP) -> None:
        self._builtins = dict(builtins)
        self._group = group
        self._lock = threading.RLock()
        self._factories: dict[str, ProviderFactory | str] = {}
        self._discovered = False

    def register(self, kind: str, factory: ProviderFactory | str) -> None:
        """Make ``kind`` build its providers with ``factory`` (or ``"module:attribute"``,
        imported on first use). Replaces an earlier registration of ``kind``."""
        if not kind or ":" in kind:
            raise ConfigError(f"provider kind {kind!r}: a kind is a non-empty name without "
                              "':' (model names are kind:id)")
        with self._lock:
            self._factories[kind] = factory

    def _discover(self) -> None:
        if self._discovered:
            return
        with self._lock:
            if self._discovered:
                return
            runtime = dict(self._factories)  # registered before discovery: they win
            for kind, target in self._builtins.items():
                self.register(kind, target)
            if self._group is not None:
                for entry in importlib.metadata.entry_points(group=self._group):
                    known = self._factories.get(entry.name)
                    if isinstance(known, str) and known != entry.value:
                        warnings.warn(f"entry point {entry.name} = {entry.value} in group "
                                      f"{self._group} is ignored: provider {entry.name!r} "
                                      f"is already {known}", stacklevel=2)
                        continue
                    self.register(entry.name, entry.value)
            self._factories.update(runtime)
            self._discovered = True

    def kinds(self) -> list[str]:
        """Every known kind, sorted."""
        self._discover()
        with self._lock:
            return sorted(self._factories)

    def check(self, kind: str, *, model: str = "", where: str = "") -> None:
        """Raise :class:`ConfigError` (listing the known kinds) if ``kind`` is unknown.

        ``model`` and ``where`` (``file:line``) say where the kind was named.
        """
        self._discover()
        if kind in self._factories:
            return
        place = f"{where}: " if where else ""
        named = f" in model {model!r}" if model else ""
        raise ConfigError(
            f"{place}unknown provider {kind!r}{named}: known providers are "
            f"{', '.join(self.kinds())}; to add one, call "
            f"counterpoint.models.register_provider({kind!r}, factory) or declare an entry "
            f"point {kind} = \"package.module:factory\" in the {ENTRY_POINT_GROUP!r} group "
            "(the factory takes a ModelConfig and returns a Provider)")

    def factory(self, kind: str) -> ProviderFactory:
        """The factory of ``kind``, imported if need be."""
        self.check(kind)
        with self._lock:
            found = self._factories[kind]
        if not isinstance(found, str):
            return found
        loaded = _load(kind, found)
        with self._lock:
            if self._factories.get(kind) == found:
                self._factories[kind] = loaded
        return loaded

    def build(self, config: ModelConfig) -> Provider:
        """A new provider for ``config``, from its kind's factory."""
        return self.factory(config.provider)(config)


def _load(kind: str, target: str) -> ProviderFactory:
    module_name, _, attribute = target.partition(":")
    try:
        found: object = importlib.import_module(module_name.strip())
        for part in attribute.strip().split(".") if attribute else ():
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"provider {kind!r} cannot be loaded from {target}: {exc}; "
                          "is the package that provides it installed?") from exc
    if not callable(found):
        raise ConfigError(f"provider {kind!r}: {target} is not callable; it must take a "
                          "ModelConfig and return a Provider")
    return found


PROVIDERS = ProviderRegistry()
"""The process-wide registry every :class:`~counterpoint.models.Model` builds through."""


def register_provider(kind: str, factory: ProviderFactory | str) -> None:
    """Make model names ``kind:id`` and configs with ``provider = kind`` use ``factory``."""
    PROVIDERS.register(kind, factory)


def build_provider(config: ModelConfig) -> Provider:
    """A new provider instance for ``config``."""
    return PROVIDERS.build(config)
