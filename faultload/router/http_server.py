"""A minimal HTTP/1.1 server for the fake router: asyncio Protocols + httptools.

Why not aiohttp's server: the router is harness, and every millisecond of its
CPU is one the server under test does not get. With aiohttp's server
(Request objects, stream readers, multidicts, routing, its writer) the router
spent 0.59 ms of CPU per request in a 4,096-request barrier burst and 0.56 ms
in ``make run``'s trial; with this module 0.38 ms in both (``bench/harness_ab.py``,
4 runs a side, ABBA), and importing the router's app takes 0.11 s instead of
0.3 s (``python -X importtime``). Request parsing is ``httptools.HttpRequestParser``
(llhttp, the C parser uvicorn uses), so the framing rules are a well-kept
parser's, not ours. Works under asyncio and uvloop.

What it does:

- one handler task per request, ``handler(request, send)``; the handler calls
  ``await send(response)`` once, which is True when the response was written
  (and drained), False when the client had gone. A handler that returns
  without sending gets a 500 sent for it; one that raises, a 500 too.
- requests on one connection are answered in order (a pipelined request
  waits for the one before it); keep-alive unless the request asked for
  ``Connection: close`` or was HTTP/1.0; an idle connection is closed after
  ``keepalive_s`` (aiohttp's default, 75 s).
- a client that closes its connection cancels the handler of the request in
  flight on it (aiohttp's ``handler_cancellation=True``).
- a body over ``max_body`` bytes is answered 413 and the connection closed;
  bytes llhttp cannot parse, 400 and closed.
- :meth:`Server.close_idle` closes every keep-alive connection between requests (not one just accepted);
  :meth:`Server.shutdown` stops listening, lets running handlers finish for
  up to ``timeout_s``, then cancels them and closes every connection.

Not supported (nothing that talks to the router sends them): ``Expect:
100-continue``, upgrades, chunked responses.
"""

from __future__ import annotations

import asyncio
import collections
import socket
from dataclasses import dataclass
from http import HTTPStatus
from typing import Awaitable, Callable

import httptools

KEEPALIVE_S = 75.0


@dataclass(slots=True)
class Request:
    method: str
    path: str  # without the query string
    body: bytes


@dataclass(slots=True)
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: bytes = b""  # extra pre-encoded ``Name: value\r\n`` lines


Send = Callable[[Response], Awaitable[bool]]
Handler = Callable[[Request, Send], Awaitable[None]]

_REASONS = {s.value: s.phrase.encode() for s in HTTPStatus}


def _head(response: Response, keep_alive: bool) -> bytes:
    reason = _REASONS.get(response.status, b"Unknown")
    return b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s%s\r\n" % (
        response.status, reason, response.content_type.encode("latin-1"), len(response.body),
        response.headers, b"" if keep_alive else b"Connection: close\r\n",
    )  # fmt: skip


class _Connection(asyncio.Protocol):
    """One client connection: parse requests, run their handlers one at a time, write the answers."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.body: list[bytes] = []
        self.body_size = 0
        self.pending: collections.deque[tuple[Request, bool]] = collections.deque()
        self.task: asyncio.Task | None = None
        self.closed = False
        self.paused = False
        self.drained: asyncio.Future | None = None
        self.idle_timer: asyncio.TimerHandle | None = None
        self.refused = False  # a 413/400 is on its way: ignore the rest
        self.begun = 0  # requests whose first byte was parsed
        self.received = 0  # requests parsed whole

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)
        self._arm_idle_timer()

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        self._disarm_idle_timer()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if not self.refused:
                self._refuse(400, b"bad HTTP request")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        self._disarm_idle_timer()
        self.pending.clear()
        if self.task is not None and not self.task.done():
            self.task.cancel()  # the client left: its request's handler is cancelled
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)

    # ------------------------------------------------------------------ httptools callbacks
    def on_message_begin(self) -> None:
        self.begun += 1
        self.url = b""
        self.body = []
        self.body_size = 0

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body_size += len(body)
        if self.body_size > self.server.max_body:
            self._refuse(413, b"request body too large")
            raise httptools.HttpParserError("body too large")  # stops this feed
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.received += 1
        path = self.url.split(b"?", 1)[0].decode("latin-1")
        body = self.body[0] if len(self.body) == 1 else b"".join(self.body)
        request = Request(self.parser.get_method().decode("latin-1"), path, body)
        self.pending.append((request, self.parser.should_keep_alive()))
        if self.task is None:
            self._next()

    # ------------------------------------------------------------------ requests
    def _next(self) -> None:
        if self.closed or not self.pending:
            self.task = None
            if not self.closed:
                self._arm_idle_timer()
            return
        request, keep_alive = self.pending.popleft()
        self.task = asyncio.ensure_future(self._run(request, keep_alive))
        self.server.tasks.add(self.task)
        self.task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self.server.tasks.discard(task)
        self._next()

    async def _run(self, request: Request, keep_alive: bool) -> None:
        sent = False

        async def send(response: Response) -> bool:
            nonlocal sent
            if sent:
                raise RuntimeError("a response was already sent for this request")
            sent = True
            return await self._write(response, keep_alive)

        try:
            await self.server.handler(request, send)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a handler's bug: answered, not a dead connection
            if not sent:
                await send(Response(500, f"{type(exc).__name__}: {exc}".encode(), "text/plain"))
            return
        if not sent:
            await send(Response(500, b"the handler sent no response", "text/plain"))

    async def _write(self, response: Response, keep_alive: bool) -> bool:
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            return False
        transport.writelines((_head(response, keep_alive), response.body))
        if self.paused:
            self.drained = asyncio.get_running_loop().create_future()
            await self.drained
            if self.closed:
                return False
        if not keep_alive:
            self.closed = True
            transport.close()
        return True

    def _refuse(self, status: int, message: bytes) -> None:
        """Answer a request that cannot be served (after the one in flight) and close."""
        self.refused = True
        self.pending.clear()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_head(Response(status, message, "text/plain"), False) + message)
            self.transport.close()
        self.closed = True

    # ------------------------------------------------------------------ idleness
    def _arm_idle_timer(self) -> None:
        self._disarm_idle_timer()
        self.idle_timer = asyncio.get_running_loop().call_later(self.server.keepalive_s, self.close)

    def _disarm_idle_timer(self) -> None:
        if self.idle_timer is not None:
            self.idle_timer.cancel()
            self.idle_timer = None

    @property
    def idle(self) -> bool:
        """A keep-alive connection between requests: it served one and holds no part of the next. A connection
        just accepted is not idle: its first request may be on its way, and closing it would cut that request."""
        return self.received > 0 and self.begun == self.received and self.task is None and not self.pending

    def close(self) -> None:
        self.closed = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


class Server:
    """Serves ``handler`` on a listening socket (see the module docstring)."""

    def __init__(self, handler: Handler, max_body: int, keepalive_s: float = KEEPALIVE_S) -> None:
        self.handler = handler
        self.max_body = max_body
        self.keepalive_s = keepalive_s
        self.connections: set[_Connection] = set()
        self.tasks: set[asyncio.Task] = set()
        self._server: asyncio.AbstractServer | None = None

    async def start(self, sock: socket.socket, backlog: int) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Connection(self), sock=sock, backlog=backlog)

    def close_idle(self) -> None:
        """Close every connection that has no request in it."""
        for conn in list(self.connections):
            if conn.idle:
                conn.close()

    async def shutdown(self, timeout_s: float) -> None:
        """Stop listening; give running handlers ``timeout_s`` to finish, then cancel them; close all."""
        if self._server is not None:
            self._server.close()
        self.close_idle()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=timeout_s)
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=timeout_s)
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()
