"""One keep-alive HTTP/1.1 client connection of :class:`faultload.client.http.HttpPool`, and its errors.

The protocol holds at most one request in flight; responses are parsed by
``httptools.HttpResponseParser``. Its behaviour (keep-alive, the stale-connection
race, timeouts, cancellation) is described in :mod:`faultload.client.http`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import httptools


class ConnectionOwner(Protocol):
    """What a connection reads and updates of the pool that owns it (:class:`faultload.client.http.HttpPool`),
    stated here so that this module needs nothing of the pool's: no import cycle, not even a type-only one."""

    _live: set[Any]  # the pool's open connections, this one among them while open
    peak_live: int
    _loop: Any
    _keepalive: bool


class HttpError(OSError):
    """Any transport-level failure of an :class:`HttpPool` request."""


class ConnectError(HttpError):
    """Could not connect: refused, unreachable, source address unusable, or connect timeout."""


class HttpTimeout(HttpError, TimeoutError):
    """The request's total timeout passed; its connection was closed."""


class ConnectTimeout(ConnectError, HttpTimeout):
    """The connect did not finish within ``connect_timeout_s`` (or the total timeout)."""


class ResetError(HttpError):
    """The connection was reset or closed before the response was complete."""


class ProtocolError(HttpError):
    """The server's bytes are not a valid HTTP/1.1 response."""


class StaleConnection(ResetError):
    """A reused connection failed before any response byte (the keep-alive race)."""


_CONTENT_TYPE = b"content-type"
_CONTENT_LENGTH = b"content-length"
_TRANSFER_ENCODING = b"transfer-encoding"


class Connection(asyncio.Protocol):
    """One connection; at most one request in flight on it."""

    __slots__ = (
        "pool",
        "transport",
        "parser",
        "closed",
        "fut",
        "timer",
        "status",
        "ctype",
        "chunks",
        "got_bytes",
        "headers_done",
        "framed",
        "keep_alive",
        "reused",
        "idle_since",
    )

    def __init__(self, pool: ConnectionOwner) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.fut: asyncio.Future | None = None  # the request in flight
        self.timer: asyncio.TimerHandle | None = None
        self.status = 0
        self.ctype = b""
        self.chunks: list[bytes] = []
        self.got_bytes = False
        self.headers_done = False
        self.framed = False  # Content-Length or Transfer-Encoding seen (else the body ends at EOF)
        self.keep_alive = False
        self.reused = False
        self.idle_since = 0.0  # loop time it went back on the idle stack

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        live = self.pool._live
        live.add(self)
        if len(live) > self.pool.peak_live:
            self.pool.peak_live = len(live)

    def data_received(self, data: bytes) -> None:
        if self.fut is None:
            # Bytes on an idle connection: nothing may follow a complete response.
            self._discard()
            return
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(ProtocolError("unexpected protocol upgrade in a response"))
        except httptools.HttpParserError as exc:
            self._fail(ProtocolError(f"bad HTTP response: {exc}"))

    def eof_received(self) -> bool:
        self.closed = True  # never reuse; a body delimited by EOF is finished in connection_lost
        return False  # close our side too; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool._live.discard(self)
        if self.fut is None:
            return
        if self.headers_done and not self.framed and exc is None:
            self._complete(keep_alive=False)  # a body delimited by the end of the connection
            return
        if not self.got_bytes and self.reused:
            error: HttpError = StaleConnection("reused keep-alive connection closed before any response byte")
        elif not self.got_bytes:
            error = ResetError("connection closed before any response byte")
        else:
            error = ResetError("connection closed mid-response (incomplete body)")
        if exc is not None:
            error.__cause__ = exc
            error.args = (f"{error.args[0]}: {exc!r}",)
        self._fail(error, abort=False)

    # ------------------------------------------------------------------ httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        n = len(name)
        if n == 12 and name.lower() == _CONTENT_TYPE:
            self.ctype = value
        elif (n == 14 and name.lower() == _CONTENT_LENGTH) or (n == 17 and name.lower() == _TRANSFER_ENCODING):
            self.framed = True

    def on_headers_complete(self) -> None:
        self.headers_done = True
        self.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_begin(self) -> None:
        if self.fut is None:  # bytes after a complete response: a parser error, the connection is discarded
            raise ProtocolError("a response nobody asked for")

    def on_message_complete(self) -> None:
        if self.status < 200:  # 1xx interim response: the real one follows
            self.headers_done = self.framed = False
            self.ctype = b""
            self.chunks = []
            return
        self._complete(self.parser.should_keep_alive())

    # ------------------------------------------------------------------ request state

    def start(self, data: bytes, deadline: float, reused: bool) -> asyncio.Future:
        loop = self.pool._loop
        fut = self.fut = loop.create_future()
        self.status = 0
        self.ctype = b""
        self.chunks = []
        self.got_bytes = self.headers_done = self.framed = False
        self.reused = reused
        self.timer = loop.call_at(deadline, self._on_timeout)
        self.transport.write(data)  # type: ignore[union-attr]
        return fut

    def _complete(self, keep_alive: bool) -> None:
        fut, self.fut = self.fut, None
        self.timer.cancel()  # type: ignore[union-attr]
        chunks = self.chunks
        self.chunks = []
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self.keep_alive = keep_alive and self.pool._keepalive
        if not fut.done():  # type: ignore[union-attr]
            fut.set_result((self.status, self.ctype.decode("latin-1"), body))  # type: ignore[union-attr]

    def _fail(self, error: HttpError, abort: bool = True) -> None:
        fut, self.fut = self.fut, None
        if self.timer is not None:
            self.timer.cancel()
        self.chunks = []
        if abort:
            self._discard()
        if fut is not None and not fut.done():
            fut.set_exception(error)

    def _on_timeout(self) -> None:
        if self.fut is not None:
            self._fail(HttpTimeout("request timed out"))

    def _discard(self) -> None:
        """Never reuse this connection; close it at once (unsent data is dropped)."""
        self.closed = True
        self.keep_alive = False
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.abort()
