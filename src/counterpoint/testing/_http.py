"""Just enough HTTP/1.1 over asyncio streams for a local test server.

Reads requests (``Content-Length`` or chunked bodies, keep-alive) and writes
responses, either whole or streamed with chunked transfer encoding (or, for
HTTP/1.0 clients, unframed until the connection closes). Not a general server:
no TLS, no ``Expect: 100-continue``, no pipelining guarantees beyond in-order
handling of one connection's requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus

MAX_HEADER_BYTES = 1 << 16
MAX_BODY_BYTES = 1 << 26


class BadRequest(Exception):
    """The bytes on the connection are not an HTTP request this module can read."""


@dataclass(frozen=True, kw_only=True)
class Request:
    """One request read from a connection."""

    method: str
    target: str
    version: str
    headers: dict[str, str]
    """Names lower-cased; a repeated header keeps its last value."""
    body: bytes

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def keep_alive(self) -> bool:
        """Whether the connection stays open after the response (HTTP/1.1 default)."""
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return connection == "keep-alive"
        return connection != "close"


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request, or ``None`` if the peer closed the connection between requests.

    Raises `BadRequest` for unreadable input and ``asyncio.IncompleteReadError`` when
    the peer closes mid-request.
    """
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise
    except asyncio.LimitOverrunError as exc:
        raise BadRequest("request head too large") from exc
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError as exc:
        raise BadRequest(f"bad request line {lines[0]!r}") from exc
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, sep, value = line.partition(":")
            if not sep:
                raise BadRequest(f"bad header line {line!r}")
            headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    else:
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError as exc:
            raise BadRequest("bad Content-Length") from exc
        if not 0 <= length <= MAX_BODY_BYTES:
            raise BadRequest("Content-Length out of range")
        body = await reader.readexactly(length)
    return Request(method=method.upper(), target=target, version=version.strip(),
                   headers=headers, body=body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise BadRequest("bad chunk size") from exc
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return b"".join(parts)
        total += size
        if total > MAX_BODY_BYTES:
            raise BadRequest("body too large")
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


class Responder:
    """Writes the response to one request. Not safe for concurrent use."""

    def __init__(self, writer: asyncio.StreamWriter, request: Request) -> None:
        self._writer = writer
        self._chunked = request.version != "HTTP/1.0"
        self.keep_alive = request.keep_alive
        """Whether the connection may serve another request after this response."""

    def _head(self, status: int, headers: Iterable[tuple[str, str]]) -> bytes:
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Status"
        lines = [f"HTTP/1.1 {status} {reason}"]
        lines.extend(f"{name}: {value}" for name, value in headers)
        lines.append(f"connection: {'keep-alive' if self.keep_alive else 'close'}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def send(self, status: int, body: bytes, headers: Iterable[tuple[str, str]] = (),
                   *, content_length: int | None = None) -> None:
        """A whole response. ``content_length`` overrides the declared length (to lie)."""
        declared = len(body) if content_length is None else content_length
        self._writer.write(self._head(status, [*headers, ("content-length", str(declared))])
                           + body)
        await self._writer.drain()

    async def start_stream(self, status: int, headers: Iterable[tuple[str, str]]) -> None:
        """The head of a streamed response; follow with `write` calls and `end`."""
        framing = [("transfer-encoding", "chunked")] if self._chunked else []
        if not self._chunked:
            self.keep_alive = False  # the end of an unframed body is the end of the connection
        self._writer.write(self._head(status, [*headers, *framing]))
        await self._writer.drain()

    async def write(self, data: bytes) -> None:
        """One piece of a streamed body, flushed at once."""
        if not data:
            return
        self._writer.write(b"%x\r\n%b\r\n" % (len(data), data) if self._chunked else data)
        await self._writer.drain()

    async def end(self) -> None:
        """Terminate a streamed body properly."""
        if self._chunked:
            self._writer.write(b"0\r\n\r\n")
            await self._writer.drain()
