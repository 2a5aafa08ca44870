"""The response-cache role: model responses remembered by request key."""

from __future__ import annotations

import abc


class ResponseCache(abc.ABC):
    """Model responses (JSON text) by request key.

    :meth:`cache_put` never blocks; a later put of the same key replaces the entry.
    :meth:`cache_get` may block briefly and is safe to call from any thread.
    """

    @abc.abstractmethod
    def cache_get(self, key: str) -> str | None:
        """A cached model response (JSON text) for ``key``, or ``None``."""

    @abc.abstractmethod
    def cache_put(self, key: str, response: str) -> None:
        """Remember a model response under ``key``. Never blocks; visible to
        :meth:`cache_get` at once, durable with the next commit."""

    def cache_age(self, key: str) -> float | None:
        """Seconds since the entry for ``key`` was written, or ``None`` if there is none
        or the store does not know (shown when a cached answer stands in for a model
        that is down). May block briefly; safe to call from any thread."""
        return None
