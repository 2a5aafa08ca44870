"""A scripted model: the provider test double for tests and examples.

It answers from a queue, in order, and fails loudly both ways: a call when the
queue is empty raises :class:`~counterpoint.errors.ScriptError` naming the
request, and :meth:`ScriptedModel.verify` (or leaving a ``with`` block) raises
if responses were never used. A queued exception is raised instead of answering,
which is how tests script provider failures. A queued callable receives the
request and returns the answer, for tests that check what was sent.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from pydantic import BaseModel

from ..errors import ScriptError
from .provider import Capabilities, Provider, TextSink
from .types import Request, Response, ToolCall, Usage

Scripted = Response | str | BaseModel | dict[str, Any] | list[ToolCall] | BaseException | \
    Callable[[Request], "Response | str"]
"""What can be queued: a response, text, a pydantic instance or dict (answered as JSON),
tool calls, an exception to raise, or a function of the request."""


class ScriptedModel(Provider):
    """Answers calls from a queue; see the module docstring."""

    def __init__(self, responses: Iterable[Scripted] = (), *, name: str | None = None,
                 capabilities: Capabilities | None = None, delay: float = 0.0) -> None:
        self.name = name or "scripted"
        self._named = name is not None
        self.capabilities = capabilities or Capabilities(json_schema=True,
                                                         streaming_usage=True)
        self._queue: deque[Scripted] = deque(responses)
        self.requests: list[Request] = []
        """Every request received, in order."""
        self.delay = delay
        """Seconds each call takes (lets tests observe concurrency and cancellation)."""

    @property
    def identity(self) -> str:
        """``scripted:NAME`` when given a name (scripted models of the same name share
        cached answers, as one model would), else unique to this instance."""
        return f"scripted:{self.name}" if self._named else super().identity

    def add(self, *responses: Scripted) -> ScriptedModel:
        """Queue more responses; returns ``self``."""
        self._queue.extend(responses)
        return self

    @property
    def remaining(self) -> int:
        return len(self._queue)

    async def complete(self, request: Request, *, on_text: TextSink | None = None,
                       time_limit: float | None = None) -> Response:
        self.requests.append(request)
        if not self._queue:
            last = request.messages[-1].content[:200] if request.messages else ""
            raise ScriptError(f"model {self.name}: call {len(self.requests)} was not scripted "
                              f"(last message: {last!r}); queue a response for it",
                              model=self.name)
        item = self._queue.popleft()
        if self.delay:
            await asyncio.sleep(self.delay)
        if isinstance(item, BaseException):
            raise item
        if callable(item) and not isinstance(item, BaseModel | type):
            item = item(request)
        response = _as_response(item, self.name, request)
        if on_text is not None and response.text:
            for piece in _pieces(response.text):
                on_text(piece)
        return response

    def verify(self) -> None:
        """Raise :class:`ScriptError` if any queued response was never used."""
        if self._queue:
            raise ScriptError(f"model {self.name}: {len(self._queue)} scripted response(s) "
                              f"were never used (next: {_describe(self._queue[0])})",
                              model=self.name)

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            self.verify()


def _as_response(item: Any, name: str, request: Request) -> Response:
    if isinstance(item, Response):
        response = item
    elif isinstance(item, str):
        response = Response(text=item)
    elif isinstance(item, BaseModel):
        response = Response(text=item.model_dump_json())
    elif isinstance(item, dict):
        response = Response(text=json.dumps(item))
    elif isinstance(item, list) and all(isinstance(c, ToolCall) for c in item):
        response = Response(tool_calls=tuple(item), finish_reason="tool_calls")
    else:
        raise ScriptError(f"model {name}: cannot answer with {type(item).__name__}",
                          model=name)
    if response.usage.calls == 0:  # count tokens roughly, as words, so usage is never empty
        prompt = sum(len(m.content.split()) for m in request.messages)
        out = len(response.text.split()) + sum(len(json.dumps(c.arguments).split())
                                               for c in response.tool_calls)
        response = response.model_copy(update={"usage": Usage(
            input_tokens=prompt, output_tokens=out, calls=1)})
    if not response.model:
        response = response.model_copy(update={"model": name})
    return response


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


def _describe(item: Any) -> str:
    if isinstance(item, Response):
        return repr(item.text[:80]) if item.text else f"{len(item.tool_calls)} tool call(s)"
    return repr(item)[:80]
