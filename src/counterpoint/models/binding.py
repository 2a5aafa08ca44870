"""Binding a model configuration to a provider and a rate limiter, cached.

A configured model's provider is built once per event loop (an HTTP client's connection
pool belongs to one loop) and per everything it was built from: the configuration, the
endpoint it resolves to now and (as a hash) the key it reads now, so a changed
environment gets a new provider. Its rate limits are shared process-wide per configured
name, apart for each endpoint the name points at; a provider object given directly has
limits of its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable

from ..loop_local import LoopLocal
from .config import ModelConfig
from .limits import RateLimiter, limiter_for
from .provider import Provider
from .provider_registry import build_provider


class _Binding:
    """A resolved model: its configuration, provider and rate limiter."""

    def __init__(self, config: ModelConfig, provider: Provider, limiter: RateLimiter) -> None:
        self.config = config
        self.provider = provider
        self.limiter = limiter


_PROVIDERS: LoopLocal[dict[Hashable, Provider]] = LoopLocal()
"""Providers per event loop (HTTP clients' connection pools belong to one loop), keyed
by everything they were built from (see ``_provider_key``); a closed loop's are dropped
(see :mod:`counterpoint.loop_local`)."""


def _provider_key(config: ModelConfig) -> Hashable:
    """What a provider built for ``config`` depends on: the whole configuration, the
    endpoint it resolves to now (``OPENAI_BASE_URL``...) and the key it reads now.

    The key enters as a hash only, so this cache never holds it in the clear.
    """
    key = config.api_key()
    fingerprint = hashlib.sha256(key.encode()).hexdigest() if key else None
    return (config, config.endpoint(), fingerprint)


def bind_given(config: ModelConfig, provider: Provider) -> _Binding:
    """A provider object given directly, with ``config`` (built for it), and its limiter."""
    limiter = limiter_for(config.name, max_concurrency=config.max_concurrency,
                          rpm=config.rpm, tpm=config.tpm, order=config.queue,
                          owner=provider)
    return _Binding(config, provider, limiter)


def bind_config(config: ModelConfig) -> _Binding:
    """The provider built for ``config`` (once per event loop, see ``_provider_key``) and
    its limiter. Must be called with an event loop running."""
    cached = _PROVIDERS.get(dict)
    key = _provider_key(config)
    provider = cached.get(key)
    if provider is None:
        provider = cached[key] = build_provider(config)
    # limits are shared per configured name, apart for each endpoint it points at
    limiter = limiter_for(f"{config.name}|{provider.identity}",
                          max_concurrency=config.max_concurrency, rpm=config.rpm,
                          tpm=config.tpm, order=config.queue)
    return _Binding(config, provider, limiter)
