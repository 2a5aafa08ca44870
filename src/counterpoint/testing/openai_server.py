"""`OpenAIServer`: a scripted, fault-injecting OpenAI Chat Completions server on loopback.

A deliberate test double for code that talks to the OpenAI API over HTTP (the
official SDK, httpx, anything OpenAI-compatible). It answers
``POST /v1/chat/completions`` with scripted `Reply` objects, in order, one per
request (normal text, JSON, tool calls, refusals, HTTP errors, hangs, cut-off
streams, malformed bodies), records every request it receives, and can act as a
rate-limited backend for benchmarks. It also answers ``GET /v1/models``.

It runs an asyncio event loop on a background thread and uses only the standard
library, so sync and async tests can both use it, and it serves many concurrent
keep-alive connections: delays and hangs never block other connections.

::

    with OpenAIServer([Reply.text("hi"), Reply.status(429)]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        ...
        assert server.requests[0].body["model"] == "gpt-4o-mini"
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from ._http import BadRequest, Request, Responder, read_request
from .engine import SimulatedEngine
from .replies import (
    DynamicReply,
    HangReply,
    MalformedReply,
    MessageReply,
    RecordedRequest,
    RefusalReply,
    Reply,
    StatusReply,
    TextReply,
    ToolCallsReply,
    TruncatedReply,
    completion,
    error_body,
    estimate_tokens,
    stream_chunks,
)

__all__ = ["OpenAIServer", "TokenBucket"]

_JSON = ("content-type", "application/json")
_SSE = ("content-type", "text/event-stream; charset=utf-8")


class TokenBucket:
    """A request rate limit: ``per_minute`` requests a minute, bursts of up to ``burst``.

    Pure bookkeeping on times the caller passes in; not thread-safe.
    """

    def __init__(self, *, per_minute: float, burst: int) -> None:
        if per_minute <= 0 or burst < 1:
            raise ValueError("a rate limit needs per_minute > 0 and burst >= 1")
        self.per_minute = per_minute
        self.burst = burst
        self._rate = per_minute / 60.0
        self._tokens = float(burst)
        self._last: float | None = None

    def take(self, now: float) -> float:
        """Spend one request at time ``now``: ``0.0`` if allowed, else seconds until it would be."""
        if self._last is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self._rate

    @property
    def remaining(self) -> int:
        """Whole requests left in the bucket at the last `take`."""
        return int(self._tokens)

    @property
    def until_full(self) -> float:
        """Seconds from the last `take` until the bucket is full again."""
        return (self.burst - self._tokens) / self._rate


class _Close(Exception):
    """Ends the connection without (the rest of) a response."""


class OpenAIServer:
    """A scripted OpenAI Chat Completions server on ``127.0.0.1`` (see the module docstring).

    Each ``POST .../chat/completions`` takes the next scripted reply; when none is left
    it gets ``default`` (e.g. ``Reply.echo()``), and if there is no default it is answered
    500 ``unscripted request`` and kept in `unscripted`. With ``rate_limit_rpm`` set, a
    token bucket (``rate_limit_burst`` requests, default one second's worth, refilled at
    ``rate_limit_rpm`` a minute) answers excess requests 429 at once, with ``retry-after``
    (seconds, fractional, unlike RFC 9110's integers) and ``retry-after-ms`` saying when
    the next request would pass; those never consume a scripted reply and are counted in
    `rejected`, and ``default`` becomes ``Reply.echo()`` unless given. Every chat answer
    is sent ``latency`` seconds (plus the reply's own delay) after its request. With an
    ``engine`` (a `SimulatedEngine`, or one per requested model name, as simulated models
    of different speeds on one endpoint have), the answer also waits for a slot of the
    engine and its simulated prefill and decode time.

    `start` and `stop` (or ``with``) may be called from any thread, once each; the
    other methods and properties are safe to use from any thread while it runs.
    Requests ask for one choice: ``n`` and sampling parameters are recorded, not honoured.
    """

    def __init__(self, replies: Iterable[Reply] = (), *, default: Reply | None = None,
                 latency: float = 0.0, rate_limit_rpm: float | None = None,
                 rate_limit_burst: int | None = None,
                 models: Sequence[str] = ("gpt-4o-mini",),
                 engine: SimulatedEngine | Mapping[str, SimulatedEngine] | None = None
                 ) -> None:
        self._script: deque[Reply] = deque(replies)
        self._bucket = None if rate_limit_rpm is None else TokenBucket(
            per_minute=rate_limit_rpm,
            burst=rate_limit_burst or max(1, round(rate_limit_rpm / 60)))
        self._default = default if default is not None or self._bucket is None else Reply.echo()
        self._latency = latency
        self._engine = engine
        self._models = tuple(models)
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._unscripted: list[RecordedRequest] = []
        self._rejected = 0
        self._in_flight = 0
        self._peak = 0
        self._ids = itertools.count(1)
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._failure: BaseException | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> OpenAIServer:
        """Bind a free port and serve on a background thread; returns once it accepts."""
        if self._thread is not None or self._stopped:
            raise RuntimeError("an OpenAIServer can be started only once")
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True,
                                        name="counterpoint-openai-server")
        self._thread.start()
        if not ready.wait(timeout=30):
            raise RuntimeError("OpenAIServer did not start within 30 s")
        if self._failure is not None:
            raise RuntimeError("OpenAIServer failed to start") from self._failure
        return self

    def stop(self) -> None:
        """Close every connection (cutting any answer in progress) and end the thread.

        Idempotent; blocks until the thread has exited.
        """
        self._stopped = True
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None:
            return
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed since the check
                loop.call_soon_threadsafe(stopping.set)
        thread.join(timeout=30)

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- what tests read and script ----------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (only once started)."""
        if self._port is None:
            raise RuntimeError("the OpenAIServer is not started")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, what the OpenAI SDK's ``base_url`` expects."""
        return f"{self.url}/v1"

    def script(self, *replies: Reply) -> None:
        """Append replies to the queue; each answers one later chat request, in order."""
        with self._lock:
            self._script.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (any path, including rejected ones), in order."""
        with self._lock:
            return list(self._requests)

    @property
    def unscripted(self) -> list[RecordedRequest]:
        """Chat requests that found neither a scripted reply nor a default (answered 500)."""
        with self._lock:
            return list(self._unscripted)

    @property
    def rejected(self) -> int:
        """429s sent by the rate limit (scripted ``Reply.status(429)`` are not counted)."""
        return self._rejected

    @property
    def peak_concurrency(self) -> int:
        """The most chat requests that were being answered at the same moment."""
        return self._peak

    # -- the event loop thread ---------------------------------------------------------------

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._serve(ready))
        except BaseException as exc:  # reported by start(); the thread must not die silently
            self._failure = exc
        finally:
            ready.set()
            loop.close()

    async def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0,
                                            limit=1 << 20, backlog=1024)
        self._port = server.sockets[0].getsockname()[1]
        ready.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            connections = list(self._connections)
            for task in connections:
                task.cancel()
            if connections:
                await asyncio.wait(connections)
            await server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while True:
                try:
                    http = await read_request(reader)
                except BadRequest as exc:
                    writer.write(b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\n"
                                 b"content-length: %d\r\n\r\n%b" % (len(str(exc)),
                                                                    str(exc).encode()))
                    await writer.drain()
                    break
                if http is None:
                    break
                responder = Responder(writer, http)
                await self._handle(http, reader, responder)
                if not responder.keep_alive:
                    break
        except (_Close, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # Only `_serve` cancels these tasks, when stopping. Ending normally matters:
            # Python 3.11's stream callback logs an error for a task that ends cancelled.
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()

    async def _handle(self, http: Request, reader: asyncio.StreamReader,
                      respond: Responder) -> None:
        try:
            parsed: Any = json.loads(http.body) if http.body else {}
        except ValueError:
            parsed = None
        record = RecordedRequest(method=http.method, path=http.path, headers=http.headers,
                                 body=parsed if isinstance(parsed, dict) else {},
                                 raw=http.body, at=time.monotonic())
        with self._lock:
            self._requests.append(record)
        path = http.path.rstrip("/")
        if http.method == "POST" and path.endswith("/chat/completions"):
            if not isinstance(parsed, dict):
                await self._send_error(respond, 400, "We could not parse the JSON body of "
                                       "your request (expected a JSON object).")
                return
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)
            try:
                await self._chat(record, reader, respond)
            finally:
                self._in_flight -= 1
        elif http.method == "GET" and path.endswith("/models"):
            await self._send_json(respond, 200, {"object": "list", "data": [
                _model(name) for name in self._models]})
        elif http.method == "GET" and "/models/" in path:
            name = path.rsplit("/models/", 1)[1]
            if name in self._models:
                await self._send_json(respond, 200, _model(name))
            else:
                await self._send_error(respond, 404, f"The model '{name}' does not exist")
        else:
            await self._send_error(respond, 404, f"Unknown route {http.method} {http.path}")

    async def _chat(self, record: RecordedRequest, reader: asyncio.StreamReader,
                    respond: Responder) -> None:
        limits: list[tuple[str, str]] = []
        if self._bucket is not None:
            wait = self._bucket.take(time.monotonic())
            limits = [("x-ratelimit-limit-requests", str(int(self._bucket.per_minute))),
                      ("x-ratelimit-remaining-requests", str(self._bucket.remaining)),
                      ("x-ratelimit-reset-requests", f"{self._bucket.until_full:.3f}s")]
            if wait > 0:
                self._rejected += 1
                ms = max(1, math.ceil(wait * 1000))
                body = error_body(429, "Rate limit reached for requests: "
                                  f"limit {self._bucket.per_minute:g} per minute. "
                                  f"Please try again in {ms}ms.")
                await respond.send(429, json.dumps(body).encode(), [
                    _JSON, ("retry-after", _seconds(ms)), ("retry-after-ms", str(ms)), *limits])
                return
        with self._lock:
            reply = self._script.popleft() if self._script else self._default
            if reply is None:
                self._unscripted.append(record)
        if reply is None:
            await self._send_error(
                respond, 500, "unscripted request: the OpenAIServer's script is empty and it "
                "has no default reply", code="unscripted_request")
            return
        delay = 0.0
        while isinstance(reply, DynamicReply):
            delay += reply.delay
            try:
                reply = reply.respond(record)
            except Exception as exc:
                await self._send_error(respond, 500, f"dynamic reply raised {exc!r}")
                return
        delay += self._latency + reply.delay
        if delay > 0:
            await asyncio.sleep(delay)
        engine = self._engine.get(record.model) if isinstance(self._engine, Mapping) else \
            self._engine
        if engine is not None:
            async with engine.serving():  # a free slot of the simulated engine
                busy, _, _ = engine.seconds(record.body, _answer_tokens(reply))
                if busy > 0:
                    await asyncio.sleep(busy)
                delay += busy
        headers = [("x-request-id", f"req_{next(self._ids):08d}"),
                   ("openai-processing-ms", str(round(delay * 1000))), *limits]
        await self._answer(reply, record, reader, respond, headers)

    async def _answer(self, reply: Reply, record: RecordedRequest,
                      reader: asyncio.StreamReader, respond: Responder,
                      headers: list[tuple[str, str]]) -> None:
        if isinstance(reply, StatusReply):
            await respond.send(reply.code, reply.body, [_JSON, *headers, *reply.headers])
        elif isinstance(reply, HangReply):
            with contextlib.suppress(TimeoutError):  # or the client gave up first
                await asyncio.wait_for(reader.read(), timeout=reply.seconds)
            raise _Close
        elif isinstance(reply, MalformedReply):
            if record.stream:
                await respond.start_stream(200, [_SSE, *headers])
                await respond.write(b"data: " + reply.body + b"\n\n")
                await respond.end()
            else:
                await respond.send(200, reply.body, [_JSON, *headers])
        elif isinstance(reply, TextReply | ToolCallsReply | RefusalReply | TruncatedReply):
            await self._message(reply, record, reader, respond, headers)
        else:
            raise TypeError(f"unknown reply {reply!r}")

    async def _message(self, reply: MessageReply, record: RecordedRequest,
                       reader: asyncio.StreamReader, respond: Responder,
                       headers: list[tuple[str, str]]) -> None:
        completion_id = f"chatcmpl-cp{next(self._ids):08d}"
        created = int(time.time())
        if not record.stream:
            body = json.dumps(completion(reply, record, completion_id=completion_id,
                                         created=created)).encode()
            if isinstance(reply, TruncatedReply):
                await respond.send(200, body[:len(body) // 2], [_JSON, *headers],
                                   content_length=len(body))
                raise _Close
            await respond.send(200, body, [_JSON, *headers])
            return
        await respond.start_stream(200, [_SSE, ("cache-control", "no-cache"), *headers])
        for chunk in stream_chunks(reply, record, completion_id=completion_id, created=created):
            await respond.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        if isinstance(reply, TruncatedReply):
            if reply.stall > 0:
                with contextlib.suppress(TimeoutError):  # or the client gave up first
                    await asyncio.wait_for(reader.read(), timeout=reply.stall)
            if reply.abort:
                raise _Close
        else:
            await respond.write(b"data: [DONE]\n\n")
        await respond.end()

    async def _send_json(self, respond: Responder, status: int, value: Any) -> None:
        await respond.send(status, json.dumps(value).encode(), [_JSON])

    async def _send_error(self, respond: Responder, status: int, message: str, *,
                          code: str | None = None) -> None:
        await self._send_json(respond, status, error_body(status, message, error_code=code))


def _answer_tokens(reply: Reply) -> int:
    if isinstance(reply, TextReply):
        return estimate_tokens(reply.content)
    if isinstance(reply, ToolCallsReply):
        return sum(estimate_tokens(call.name + call.arguments) for call in reply.calls)
    return 0


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 1700000000, "owned_by": "counterpoint"}


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.3f}".rstrip("0").rstrip(".")
