"""A fake Anthropic Messages API on loopback, scripted per test. Standard library only.

``FakeAnthropic`` serves ``POST /v1/messages`` (a JSON message, or Server-Sent
Events in Anthropic's format when the body asks for ``"stream": true``) and
``GET /v1/models`` on ``127.0.0.1`` at a free port, from a background thread.
Each messages request takes the next scripted :class:`Reply`: text and
``tool_use`` blocks, an HTTP error with headers (429 + ``retry-after``, 529
overloaded, 400, 401), an ``error`` event inside a stream, or a stream cut
before ``message_stop``. Every request is recorded with its parsed JSON body.

Streams are sent with chunked transfer encoding, event by event, as the real API
does: ``message_start``, ``ping``, then per block ``content_block_start``,
``content_block_delta`` (``text_delta`` / ``input_json_delta``),
``content_block_stop``, then ``message_delta`` (stop reason and usage) and
``message_stop``.
"""

from __future__ import annotations

import itertools
import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


def tool_use(name: str, arguments: dict[str, Any], *, id: str | None = None) -> dict[str, Any]:
    """A ``tool_use`` content block."""
    return {"type": "tool_use", "id": id or f"toolu_{name}", "name": name, "input": arguments}


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One scripted answer to a ``POST /v1/messages``. Build with the class methods."""

    content: tuple[dict[str, Any], ...] = ()
    stop_reason: str = "end_turn"
    usage: dict[str, int] = field(default_factory=dict)
    """Overrides of the computed usage (``input_tokens``, ``cache_read_input_tokens``, ...)."""
    status: int = 200
    error_type: str = ""
    error_message: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    cut_after: int | None = None
    """Streams only: send this many events, then end without ``message_stop``."""
    abort: bool = True
    """With ``cut_after``: drop the connection mid-body (else end the body cleanly)."""
    stream_error: bool = False
    """Streams only: after ``message_start``, send an ``error`` event of ``error_type``."""
    delay: float = 0.0
    """Seconds to wait before answering."""
    chunk: int = 4
    """Characters per streamed text or JSON delta."""
    raw: bytes | None = None
    """Send these bytes as the 200 body (JSON, or the event stream) instead of a message."""

    @classmethod
    def text(cls, text: str, *, stop_reason: str = "end_turn", **usage: int) -> Reply:
        return cls(content=({"type": "text", "text": text},), stop_reason=stop_reason,
                   usage=usage)

    @classmethod
    def tools(cls, *blocks: dict[str, Any], text: str = "", **usage: int) -> Reply:
        """An answer calling tools (blocks from :func:`tool_use`), optionally after text."""
        lead = ({"type": "text", "text": text},) if text else ()
        return cls(content=(*lead, *blocks), stop_reason="tool_use", usage=usage)

    @classmethod
    def error(cls, status: int, message: str, *, error_type: str | None = None,
              headers: dict[str, str] | None = None) -> Reply:
        return cls(status=status, error_type=error_type or _ERROR_TYPES.get(status, "api_error"),
                   error_message=message, headers=tuple((headers or {}).items()))

    @classmethod
    def rate_limited(cls, retry_after: str | None = None) -> Reply:
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        return cls.error(429, "Number of request tokens has exceeded your per-minute rate "
                         "limit", headers=headers)

    @classmethod
    def overloaded(cls) -> Reply:
        return cls.error(529, "Overloaded", error_type="overloaded_error")

    @classmethod
    def truncated(cls, text: str, *, after: int = 4, abort: bool = True) -> Reply:
        """A streamed text answer cut after ``after`` events (never reaching message_stop)."""
        return cls(content=({"type": "text", "text": text},), cut_after=after, abort=abort)

    @classmethod
    def malformed(cls, raw: bytes = b'{"type": "message", "content": [') -> Reply:
        """A 200 answer whose body does not parse."""
        return cls(raw=raw)

    @classmethod
    def error_event(cls, error_type: str = "overloaded_error",
                    message: str = "Overloaded") -> Reply:
        """A stream that starts, then reports an error event (HTTP status stays 200)."""
        return cls(stream_error=True, error_type=error_type, error_message=message)


@dataclass(frozen=True)
class Recorded:
    """A request the fake received."""

    method: str
    path: str
    headers: dict[str, str]
    """Lower-cased names."""
    body: Any
    """The parsed JSON body (``None`` for a GET or a body that is not JSON)."""


class FakeAnthropic:
    """The fake server (see the module docstring). Use as a context manager."""

    def __init__(self, replies: Iterable[Reply] = (), *,
                 models: Iterable[str] = ("claude-test",)) -> None:
        self._script: deque[Reply] = deque(replies)
        self.models = list(models)
        self.models_reply: Reply | None = None
        """When set, ``GET /v1/models`` answers with this (error) reply instead."""
        self._lock = threading.Lock()
        self._requests: list[Recorded] = []
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> FakeAnthropic:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True,
                                        name="fake-anthropic")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- what tests use ------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``, what the SDK's ``base_url`` expects (no ``/v1``)."""
        if self._server is None:
            raise RuntimeError("the fake is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of the ``POST /v1/messages`` requests, in order."""
        return [r.body for r in self.requests if r.path == "/v1/messages"]

    # -- used by the handler -------------------------------------------------------------
    def _record(self, request: Recorded) -> None:
        with self._lock:
            self._requests.append(request)

    def _next(self) -> Reply | None:
        with self._lock:
            return self._script.popleft() if self._script else None

    def _id(self, prefix: str) -> str:
        return f"{prefix}_fake{next(self._ids):06d}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet about clients that hung up (timeouts, cut streams); loud otherwise."""
        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeAnthropic
    protocol_version = "HTTP/1.1"
    timeout = 10

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- routes --------------------------------------------------------------------------
    def do_GET(self) -> None:
        self.owner._record(Recorded("GET", self.path, self._headers(), None))
        if self.path.split("?")[0] != "/v1/models":
            self._error(Reply.error(404, f"Unknown route GET {self.path}"))
            return
        if self.owner.models_reply is not None:
            self._error(self.owner.models_reply)
            return
        data = [{"type": "model", "id": m, "display_name": m, "lifecycle": "active",
                 "created_at": "2025-01-01T00:00:00Z"} for m in self.owner.models]
        self._json(200, {"data": data, "has_more": False,
                         "first_id": data[0]["id"] if data else None,
                         "last_id": data[-1]["id"] if data else None})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.owner._record(Recorded("POST", self.path, self._headers(), body))
        if self.path.split("?")[0] != "/v1/messages":
            self._error(Reply.error(404, f"Unknown route POST {self.path}"))
            return
        if not isinstance(body, dict):
            self._error(Reply.error(400, "the body is not a JSON object"))
            return
        reply = self.owner._next()
        if reply is None:
            self._error(Reply.error(500, "fake: no reply is scripted for this request"))
            return
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            self._error(reply)
        elif body.get("stream"):
            self._stream(reply, body)
        elif reply.raw is not None:
            self._send(200, reply.raw)
        else:
            self._json(200, self._message(reply, body))

    # -- answers -------------------------------------------------------------------------
    def _message(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        return {"id": self.owner._id("msg"), "type": "message", "role": "assistant",
                "model": body.get("model", "claude-test"), "content": list(reply.content),
                "stop_reason": reply.stop_reason, "stop_sequence": None,
                "usage": _usage(reply, body)}

    def _events(self, reply: Reply, body: dict[str, Any]) -> Iterator[tuple[str, Any]]:
        usage = _usage(reply, body)
        start = {**self._message(reply, body), "content": [], "stop_reason": None,
                 "usage": {**usage, "output_tokens": 1}}
        yield "message_start", {"type": "message_start", "message": start}
        yield "ping", {"type": "ping"}
        if reply.stream_error:
            yield "error", {"type": "error", "error": {"type": reply.error_type,
                                                       "message": reply.error_message}}
            return
        for index, block in enumerate(reply.content):
            if block["type"] == "text":
                opened: dict[str, Any] = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": piece}
                          for piece in _pieces(block["text"], reply.chunk)]
            else:
                opened = {**block, "input": {}}
                deltas = [{"type": "input_json_delta", "partial_json": piece}
                          for piece in _pieces(json.dumps(block["input"]), reply.chunk)]
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": opened}
            for delta in deltas:
                yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": delta}
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
        yield "message_delta", {"type": "message_delta",
                                "delta": {"stop_reason": reply.stop_reason,
                                          "stop_sequence": None},
                                "usage": {"output_tokens": usage["output_tokens"]}}
        yield "message_stop", {"type": "message_stop"}

    def _stream(self, reply: Reply, body: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", self.owner._id("req"))
        self.end_headers()
        if reply.raw is not None:
            self._chunk(reply.raw)
            self._chunk(b"")
            return
        for sent, (name, data) in enumerate(self._events(reply, body)):
            if reply.cut_after is not None and sent >= reply.cut_after:
                if reply.abort:  # no final chunk: the client sees a broken body
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                break
            self._chunk(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%b\r\n" % (len(data), data))
        self.wfile.flush()

    def _error(self, reply: Reply) -> None:
        body = {"type": "error", "error": {"type": reply.error_type or "api_error",
                                           "message": reply.error_message}}
        self._json(reply.status, body, reply.headers)

    def _json(self, status: int, value: Any, headers: Iterable[tuple[str, str]] = ()) -> None:
        self._send(status, json.dumps(value).encode(), headers)

    def _send(self, status: int, data: bytes, headers: Iterable[tuple[str, str]] = ()) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", self.owner._id("req"))
        for name, value_ in headers:
            self.send_header(name, value_)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _usage(reply: Reply, body: dict[str, Any]) -> dict[str, int]:
    chars = len(json.dumps(body.get("messages", []))) + len(json.dumps(body.get("system", "")))
    out = sum(len(b.get("text", "")) + len(json.dumps(b.get("input", ""))) * (b["type"] != "text")
              for b in reply.content)
    usage = {"input_tokens": max(1, chars // 4), "output_tokens": max(1, out // 4),
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    usage.update(reply.usage)
    return usage
