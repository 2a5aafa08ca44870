"""The blob role: texts stored once by content (large node outputs, prompts)."""

from __future__ import annotations

import abc


class BlobStore(abc.ABC):
    """Texts stored once under their SHA-256.

    :meth:`put_blob` never blocks and is idempotent; :meth:`blob` may block briefly and
    is safe to call from any thread, and sees what :meth:`put_blob` stored at once.
    """

    @abc.abstractmethod
    def put_blob(self, text: str) -> str:
        """Store ``text`` once by content; returns its SHA-256. Never blocks.

        Durable no later than the next event appended after it (events that refer
        to a blob never reach the disk without it).
        """

    @abc.abstractmethod
    def blob(self, digest: str) -> str | None:
        """The text stored under ``digest``, or ``None``."""
