"""The provider seam: one small ABC every model adapter implements.

An adapter turns a :class:`~counterpoint.models.types.Request` into its
provider's wire format, makes exactly one attempt, and turns the answer back
into a :class:`~counterpoint.models.types.Response`, or raises a
:class:`~counterpoint.errors.ModelError` subclass that says whether trying again
can help. Retries, rate limits, caching, structured-output validation and
fallbacks live above the seam (``counterpoint.models.model``), once for all
providers. What a provider can do is declared in its :class:`Capabilities`;
code above the seam reads those flags and never checks an adapter's type.
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from .types import Request, Response

TextSink = Callable[[str], None]
"""Receives streamed text deltas, in order. Called on the event loop's thread. A sink
that also has a ``restart(note: str)`` method is told when the text it received is
abandoned: the stream was cut off or failed and the call is sent again, the answer did
not validate and is asked again, or the next model of the chain is asked; the deltas
that follow start the answer anew (``counterpoint ask --stream`` prints the note)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Capabilities:
    """What a provider supports. Unsupported features are emulated above the seam."""

    tools: bool = True
    """Native tool calling where the model chooses (``tool_choice="auto"``/``"required"``)."""
    forced_tool: bool = True
    """Native tool calling where the request names the one tool to call."""
    parallel_tool_calls: bool = True
    """Several tool calls in one turn."""
    json_schema: bool = False
    """OpenAI-style ``response_format={"type": "json_schema", ...}``."""
    json_object_schema: bool = False
    """llama.cpp-style ``response_format={"type": "json_object", "schema": ...}``."""
    tool_output: bool = False
    """Structured output is enforced by the adapter through a forced tool (Anthropic)."""
    string_bounds: bool = True
    """Send ``maxLength`` to the constrained decoder (else it is left out of the schema
    sent; the answer is still read against the whole schema). llama.cpp's grammar spells
    ``maxLength: N`` as N nested optional characters, which slows decoding (a plan several
    times over, benchmarks/grammar_bounds.py), but without it the embedded model runs
    past its token limit on the README's digest workflow: every built-in profile keeps
    it on."""
    streaming: bool = True
    streaming_usage: bool = False
    """Token usage is reported at the end of a stream."""
    system_messages: bool = True
    """System messages are accepted (otherwise they are folded into the first user turn)."""
    session_header: str | None = None
    """HTTP header that carries the per-run session id, if the provider routes by one."""
    session_field: str | None = None
    """Request body field that carries the per-run session id (OpenAI: ``prompt_cache_key``,
    which routes a run's calls to the same prompt-cache shard)."""


_INSTANCES = itertools.count(1)


class Provider(abc.ABC):
    """One model endpoint. Instances are safe to use from many concurrent tasks."""

    name: str
    """The model name calls are made under (``provider:id`` or a configured name)."""
    capabilities: Capabilities

    @property
    def identity(self) -> str:
        """What determines this provider's answers, as a stable string: the response
        cache is keyed by it (with the request), never by ``name``.

        Adapters return their kind, endpoint and model id (``openai:URL:MODEL``), so
        that every process calling the same model shares cached answers. The default
        is unique to this instance (and process): two providers whose answers cannot
        be told apart by the library never share a cached answer. Must be cheap.
        """
        found: str | None = self.__dict__.get("_identity")
        if found is None:
            found = self.__dict__.setdefault(
                "_identity", f"{type(self).__qualname__}:{self.name}#{next(_INSTANCES)}")
        return found

    @abc.abstractmethod
    async def complete(self, request: Request, *, on_text: TextSink | None = None,
                       time_limit: float | None = None) -> Response:
        """Make one attempt. Streams text to ``on_text`` when given and supported.

        Raises :class:`~counterpoint.errors.ModelError` (with ``retryable`` and
        ``retry_after`` set from the provider's answer) and nothing else, except
        cancellation. Never retries by itself.
        """

    async def check(self) -> str | None:
        """Whether the endpoint can be reached: ``None`` if so, else what is wrong.

        The default makes no call and reports reachable; adapters that can check
        cheaply (listing models, loading a file) override it.
        """
        return None

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections or memory. Idempotent."""
