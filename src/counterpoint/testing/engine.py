"""`SimulatedEngine`: the timing of a serving engine, for `OpenAIServer` (a simulation).

No model runs: an answer's text comes from the server's scripted replies. What this
simulates is *when* it comes, the way a vLLM / SGLang style engine would send it:

- ``slots`` requests are served at once; later ones wait at the server, in arrival
  order (an engine's batch is full);
- a request takes ``prefill`` seconds per prompt token that is not in the prefix cache,
  plus ``decode`` seconds per answer token;
- the prefix cache remembers prompts in blocks of ``block`` tokens (about four
  characters a token, as `estimate_tokens` counts), like paged attention's block
  reuse: a prompt that starts with the same blocks as an earlier one pays prefill only
  for the rest. It keeps at most ``cache_blocks`` blocks, least recently used first out.

Benchmarks use it to compare schedulers on the same simulated endpoint; nothing about
real model quality or speed follows from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SimulatedEngine:
    """Timing of a simulated serving engine (see the module docstring)."""

    slots: int = 8
    prefill: float = 0.0
    """Seconds per uncached prompt token."""
    decode: float = 0.0
    """Seconds per answer token."""
    block: int = 16
    """Prefix-cache block size, in tokens."""
    cache_blocks: int = 100_000
    _cache: OrderedDict[bytes, None] = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _gates: dict[int, asyncio.Semaphore] = field(default_factory=dict, repr=False)
    prompt_tokens: int = 0
    """Prompt tokens seen so far."""
    cached_tokens: int = 0
    """Prompt tokens served from the prefix cache so far."""
    in_service: int = 0
    """Requests holding a slot now."""
    peak: int = 0
    """The most requests that held a slot at once."""

    def __post_init__(self) -> None:
        if self.slots < 1 or self.block < 1 or self.prefill < 0 or self.decode < 0:
            raise ValueError(f"SimulatedEngine: slots and block must be >= 1 and prefill, "
                             f"decode >= 0; got {self!r}")

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Hold one of the engine's slots (waiting in arrival order for a free one)."""
        loop = id(asyncio.get_running_loop())
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = asyncio.Semaphore(self.slots)
        async with gate:
            self.in_service += 1
            self.peak = max(self.peak, self.in_service)
            try:
                yield
            finally:
                self.in_service -= 1

    def cached_prefix(self, prompt: str) -> tuple[int, int]:
        """(prompt tokens, of which cached) for ``prompt``; remembers its blocks."""
        chars = self.block * 4
        total = (len(prompt) + 3) // 4
        digest = hashlib.sha256()
        cached = 0
        missing = False
        with self._lock:
            for start in range(0, len(prompt) - chars + 1, chars):  # whole blocks only
                digest.update(prompt[start:start + chars].encode())
                key = digest.copy().digest()
                if not missing and key in self._cache:
                    self._cache.move_to_end(key)
                    cached += self.block
                    continue
                missing = True
                self._cache[key] = None
                if len(self._cache) > self.cache_blocks:
                    self._cache.popitem(last=False)
            self.prompt_tokens += total
            self.cached_tokens += cached
        return total, cached

    def seconds(self, body: dict[str, Any], answer_tokens: int) -> tuple[float, int, int]:
        """How long answering ``body`` with ``answer_tokens`` takes once it has a slot, and
        its (prompt tokens, cached tokens)."""
        total, cached = self.cached_prefix(prompt_text(body))
        return (total - cached) * self.prefill + answer_tokens * self.decode, total, cached


def prompt_text(body: dict[str, Any]) -> str:
    """A request's messages as one text, in order (what a prefix cache would key on)."""
    parts: list[str] = []
    for message in body.get("messages") or ():
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(f"<{message.get('role')}>{content or ''}")
    return "".join(parts)
