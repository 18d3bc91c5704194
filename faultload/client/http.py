"""A minimal HTTP/1.1 client for the load workers: asyncio Protocols + httptools.

Why hand-assembled and not aiohttp: this is the load *generator*, and its CPU
per request is the budget that matters. Every sample is one ``asample`` POST
and at least one ``retrieve_future`` POST, thousands per second from a few
processes sharing the machine with the server under test. aiohttp's general
machinery (request/response objects, URL handling, header multidicts, stream
readers, timers, tracing hooks, connector bookkeeping) costs ~0.3 ms of CPU
per request here, as measured by ``bench/client_cpu.py`` (aiohttp vs this
module, same load, side by side). This client does only what the workers
need: POST a pre-encoded body with a pre-encoded header block to one
``host:port``, read the status, Content-Type and body, reuse the connection.
Response parsing is ``httptools.HttpResponseParser`` (llhttp, the C parser
uvicorn uses), so the framing rules (Content-Length, chunked, keep-alive)
are a well-kept parser's, not ours. Works under asyncio and uvloop.

Behaviour:

- Keep-alive: finished connections go back on an idle stack (LIFO, so a few
  hot connections serve a light load and the rest age out). With
  ``keepalive_expiry_s`` a connection idle longer than that is closed by the
  client instead of reused, as httpx (the Tinker SDK's client) does.
  A connection whose response said ``Connection: close`` (or that llhttp says
  cannot be kept, e.g. HTTP/1.0 or a body delimited by EOF) is closed, not
  reused; one the server closed while idle is noticed (EOF or
  ``connection_lost``) and skipped when taken off the stack.
- Keep-alive race: the server may close an idle connection just as a request
  is written on it; the request then fails before any response byte. With
  ``retry_stale=True`` (the default) such a failure on a *reused* connection
  is retried once on a fresh connection, like aiohttp's retry of
  ``ServerDisconnectedError``/``ClientOSError`` on a persistent connection.
  Note aiohttp (>= 3.10) does that only for idempotent methods (RFC 9112
  section 9.3.1.1), never for POST, and a client cannot tell this race apart
  from a server that read the request and then dropped the connection. A
  caller that must see every drop (a fault-injection load whose retries are
  counted, like ``faultload.client.raw``) passes ``retry_stale=False``.
- No connection limit: the caller's semaphores bound concurrency.
- ``source_ip``: outgoing sockets are bound to ``(source_ip, 0)`` before connect,
  with ``IP_BIND_ADDRESS_NO_PORT`` (Linux) so the kernel picks the port at
  connect time by the whole 4-tuple. A plain ``bind(ip, 0)`` searches for a
  port no other socket holds, TIME_WAIT ones included. A 4,096-request
  trial leaves ~4,000 TIME_WAIT sockets on its worker's address for 60 s; with
  12-16k of them (a few back-to-back trials) such a connect cost 2.7-7.4 ms of
  CPU instead of 0.03 ms (``bench/connect_cpu.py``). That is where the
  workers' CPU spread between identical trials came from.
- Timeouts: ``timeout_s`` of :meth:`HttpPool.post` bounds the whole request,
  connect included; ``connect_timeout_s`` bounds the connect alone. A timed
  out connection is aborted, never reused.
- Cancellation of :meth:`HttpPool.post` aborts its connection, so the server
  sees the client go away (the raw client's "abandoned poll" relies on it).
- Errors are :class:`HttpError` (an ``OSError``) subclasses: :class:`ConnectError`
  (refused, unreachable, bind failure; :class:`ConnectTimeout` is both a
  ``ConnectError`` and an :class:`HttpTimeout`), :class:`ResetError` (the
  connection reset or closed mid-request or mid-response, body incomplete),
  :class:`HttpTimeout` (also a builtin ``TimeoutError``), :class:`ProtocolError`
  (an unparseable response).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any

from faultload.client.http_conn import (
    ConnectError,
    Connection,
    ConnectTimeout,
    HttpError,
    HttpTimeout,
    ProtocolError,
    ResetError,
    StaleConnection,
)

__all__ = [
    "HttpPool",
    "HttpError",
    "ConnectError",
    "ConnectTimeout",
    "ResetError",
    "HttpTimeout",
    "ProtocolError",
]

# Linux only; elsewhere a source-bound socket gets its port at bind time.
IP_BIND_ADDRESS_NO_PORT: int | None = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", None)


class HttpPool:
    """Keep-alive HTTP/1.1 POSTs to one ``host:port`` (see the module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        source_ip: str | None,
        connect_timeout_s: float,
        keepalive: bool = True,
        retry_stale: bool = True,
        keepalive_expiry_s: float | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self._tls = tls  # https: each connection's TLS (the server's certificate checked against its name)
        self.port = port
        self.source_ip = source_ip
        self.connect_timeout_s = connect_timeout_s
        self._keepalive = keepalive
        self._retry_stale = retry_stale
        self._expiry_s = keepalive_expiry_s
        self._local_addr = (source_ip, 0) if source_ip else None
        self._peer: tuple[int, Any] | None = None  # (family, address) of host:port, resolved once
        authority = f"[{host}]" if ":" in host else host
        self._host_line = f"Host: {authority}:{port}\r\n".encode()
        self._conn_line = b"" if keepalive else b"Connection: close\r\n"
        self._idle: list[Connection] = []
        self._live: set[Connection] = set()
        self._heads: dict[str, bytes] = {}
        self._loop: Any = None
        self._closed = False
        # Counters for tests and benchmarks.
        self.connections_made = 0
        self.stale_retries = 0
        self.peak_live = 0  # most connections open at once (in flight or idle)
        self.expired = 0

    async def __aenter__(self) -> HttpPool:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def _head(self, path: str) -> bytes:
        head = self._heads.get(path)
        if head is None:
            head = b"POST " + path.encode("ascii") + b" HTTP/1.1\r\n" + self._host_line + self._conn_line
            if len(self._heads) < 64:  # the workers use two paths; never grow without bound
                self._heads[path] = head
        return head

    async def post(self, path: str, body: bytes, headers: bytes, timeout_s: float) -> tuple[int, str, bytes]:
        """POST ``body`` to ``path``; return (status, content type, body).

        ``headers`` is a pre-encoded block of ``Name: value\\r\\n`` lines; Host,
        Content-Length and (without keep-alive) ``Connection: close`` are added.
        Raises an :class:`HttpError` subclass on any transport failure.
        """
        if self._closed:
            raise HttpError("the pool is closed")
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        data = b"%s%sContent-Length: %d\r\n\r\n%s" % (self._head(path), headers, len(body), body)
        conn = self._take_idle()
        if conn is None:
            conn = await self._connect(deadline)
            reused = False
        else:
            reused = True
        try:
            return await self._exchange(conn, data, deadline, reused)
        except StaleConnection as exc:
            if not self._retry_stale:
                raise ResetError(*exc.args) from exc.__cause__
            self.stale_retries += 1
        conn = await self._connect(deadline)
        return await self._exchange(conn, data, deadline, False)

    async def _exchange(self, conn: Connection, data: bytes, deadline: float, reused: bool) -> tuple[int, str, bytes]:
        fut = conn.start(data, deadline, reused)
        try:
            result = await fut
        except BaseException:  # failed, timed out, or cancelled: never reuse this connection
            conn.fut = None
            if conn.timer is not None:
                conn.timer.cancel()
            conn._discard()
            raise
        if conn.keep_alive and not conn.closed and not self._closed:
            conn.idle_since = self._loop.time()
            self._idle.append(conn)
        elif not conn.closed:
            conn.closed = True
            conn.transport.close()  # type: ignore[union-attr]
        return result

    def _take_idle(self) -> Connection | None:
        idle = self._idle
        if self._expiry_s is not None and idle:
            # The stack is ordered by idle_since (oldest at the bottom): close the expired prefix.
            cutoff = self._loop.time() - self._expiry_s
            expired = 0
            while expired < len(idle) and idle[expired].idle_since < cutoff:
                expired += 1
            if expired:
                for conn in idle[:expired]:
                    if not conn.closed:
                        conn.closed = True
                        conn.transport.close()  # type: ignore[union-attr]
                del idle[:expired]
                self.expired += expired
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn
        return None

    async def _connect(self, deadline: float) -> Connection:
        loop = self._loop
        conn = Connection(self)
        timeout = min(self.connect_timeout_s, deadline - loop.time())
        try:
            async with asyncio.timeout(max(timeout, 0.0)):
                tls = {} if self._tls is None else {"ssl": self._tls, "server_hostname": self.host}
                if self._local_addr is None:
                    await loop.create_connection(lambda: conn, self.host, self.port, **tls)
                else:
                    sock = await self._bound_connected_socket()
                    await loop.create_connection(lambda: conn, sock=sock, **tls)
        except TimeoutError as exc:
            raise ConnectTimeout(f"connect to {self.host}:{self.port} timed out after {timeout:.3g}s") from exc
        except OSError as exc:
            message = f"cannot connect to {self.host}:{self.port}: {exc.strerror or exc}"
            raise (ConnectError(exc.errno, message) if exc.errno is not None else ConnectError(message)) from exc
        self.connections_made += 1
        return conn

    async def _bound_connected_socket(self) -> socket.socket:
        """A socket bound to the source address (its port left to connect), connected to the server."""
        loop = self._loop
        if self._peer is None:
            infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            self._peer = infos[0][0], infos[0][4]
        family, address = self._peer
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as create_connection(host) sets it
            if family == socket.AF_INET and IP_BIND_ADDRESS_NO_PORT is not None:
                sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            sock.bind(self._local_addr)
            await loop.sock_connect(sock, address)
        except BaseException:
            sock.close()
            raise
        return sock

    @property
    def idle_count(self) -> int:
        return sum(1 for c in self._idle if not c.closed)

    async def close(self) -> None:
        """Close every connection (idle or in flight); later posts fail."""
        self._closed = True
        self._idle.clear()
        for conn in list(self._live):
            conn._discard()
        await asyncio.sleep(0)  # let the transports run connection_lost
