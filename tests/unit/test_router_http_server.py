"""faultload.router.http_server: the router's HTTP/1.1 server, driven over real loopback sockets.

The handlers here are test doubles of the router's; what is checked is the
server's own behaviour: framing, keep-alive, ordering, cancellation on
hang-up, limits, idle closing and shutdown.
"""

from __future__ import annotations

import asyncio
import socket

import pytest
from test_http_client import BOUND_S, until

from faultload.client.http import HttpPool, ResetError
from faultload.router.http_server import Request, Response, Send, Server

LONG_S = 10.0


@pytest.fixture
def run(on_each_loop):
    return on_each_loop


class Served:
    """A Server on an ephemeral loopback port with ``handler``; ``async with`` starts and shuts it down."""

    def __init__(self, handler, **kw) -> None:
        kw.setdefault("max_body", 1 << 20)
        self.server = Server(handler, **kw)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]

    async def __aenter__(self) -> Served:
        await self.server.start(self.sock, 128)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.server.shutdown(1.0)

    def pool(self) -> HttpPool:
        return HttpPool("127.0.0.1", self.port, None, connect_timeout_s=5.0)

    async def raw(self, data: bytes, until_eof: bool = True) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(data)
        await writer.drain()
        try:
            if until_eof:
                return await asyncio.wait_for(reader.read(), LONG_S)
            return await asyncio.wait_for(reader.read(65536), LONG_S)
        finally:
            writer.close()


async def echo(request: Request, send: Send) -> None:
    await send(
        Response(
            200, f"{request.method} {request.path} ".encode() + request.body, "text/plain", headers=b"X-Test: 1\r\n"
        )
    )


def test_a_request_is_answered_with_its_length_and_headers(run):
    async def main():
        async with Served(echo) as s:
            raw = await s.raw(b"POST /a?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc")
            head, _, body = raw.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            assert b"Content-Length: 11\r\n" in head + b"\r\n" and b"X-Test: 1" in head
            assert b"Connection: close" in head
            assert body == b"POST /a abc"

    run(main())


def test_keep_alive_serves_many_requests_on_one_connection(run):
    async def main():
        async with Served(echo) as s, s.pool() as pool:
            for i in range(20):
                status, ctype, body = await pool.post(f"/r{i}", b"x" * i, b"", LONG_S)
                assert (status, ctype, body) == (200, "text/plain", f"POST /r{i} ".encode() + b"x" * i)
            assert pool.connections_made == 1

    run(main())


def test_pipelined_requests_are_answered_in_order(run):
    async def slow_first(request: Request, send: Send) -> None:
        if request.path == "/1":
            await asyncio.sleep(0.2)
        await send(Response(200, request.path.encode(), "text/plain"))

    async def main():
        async with Served(slow_first) as s:
            two = b"POST /1 HTTP/1.1\r\nContent-Length: 0\r\n\r\nPOST /2 HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            raw = await s.raw(two)
            assert raw.index(b"\r\n\r\n/1") < raw.index(b"\r\n\r\n/2")

    run(main())


def test_a_client_hanging_up_cancels_its_handler(run):
    started, cancelled = asyncio.Event(), []

    async def hold(request: Request, send: Send) -> None:
        started.set()
        try:
            await asyncio.sleep(LONG_S)
        except asyncio.CancelledError:
            cancelled.append(request.path)
            raise

    async def main():
        async with Served(hold) as s:
            reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
            writer.write(b"POST /held HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
            await asyncio.wait_for(started.wait(), LONG_S)
            writer.close()
            for _ in range(200):
                if cancelled:
                    break
                await asyncio.sleep(0.01)
            assert cancelled == ["/held"]

    run(main())


def test_a_handler_that_raises_or_sends_nothing_gets_a_500(run):
    async def bad(request: Request, send: Send) -> None:
        if request.path == "/raise":
            raise ValueError("boom")

    async def main():
        async with Served(bad) as s, s.pool() as pool:
            status, _, body = await pool.post("/raise", b"", b"", LONG_S)
            assert status == 500 and b"ValueError: boom" in body
            status, _, body = await pool.post("/quiet", b"", b"", LONG_S)
            assert status == 500 and b"no response" in body
            assert pool.connections_made == 1  # the connection survives a handler's bug

    run(main())


@pytest.mark.parametrize(
    "request_bytes, answer",
    [
        (b"POST / HTTP/1.1\r\nContent-Length: 200\r\n\r\n" + b"x" * 200, b"HTTP/1.1 413 "),  # over max_body=100
        (b"NOT HTTP AT ALL\r\n\r\n", b"HTTP/1.1 400 "),
    ],
)
def test_what_cannot_be_served_is_refused_and_closed(run, request_bytes, answer):
    async def main():
        async with Served(echo, max_body=100) as s:
            raw = await s.raw(request_bytes)  # read to EOF: the server closed the connection
            assert raw.startswith(answer) and b"Connection: close" in raw

    run(main())


def test_http_1_0_is_answered_and_closed(run):
    async def main():
        async with Served(echo) as s:
            raw = await s.raw(b"POST /old HTTP/1.0\r\nContent-Length: 0\r\n\r\n")
            assert raw.startswith(b"HTTP/1.1 200 ") and b"Connection: close" in raw and raw.endswith(b"POST /old ")

    run(main())


def test_a_large_body_is_written_whole(run):
    big = bytes(range(256)) * (1 << 14)  # 4 MiB: past the transport's high-water mark

    async def large(request: Request, send: Send) -> None:
        assert await send(Response(200, big, "application/octet-stream"))

    async def main():
        async with Served(large) as s, s.pool() as pool:
            status, _, body = await pool.post("/", b"", b"", LONG_S)
            assert status == 200 and body == big

    run(main())


def test_close_idle_closes_only_connections_without_a_request(run):
    release, holding = asyncio.Event(), asyncio.Event()

    async def gated(request: Request, send: Send) -> None:
        if request.path == "/hold":
            holding.set()
            await release.wait()
        await send(Response(200, b"ok"))

    async def main():
        async with Served(gated) as s, s.pool() as idle_pool, s.pool() as busy_pool:
            assert (await idle_pool.post("/", b"", b"", LONG_S))[0] == 200
            held = asyncio.ensure_future(busy_pool.post("/hold", b"", b"", LONG_S))
            await asyncio.wait_for(holding.wait(), BOUND_S)  # the busy connection's request is in its handler
            s.server.close_idle()
            assert await until(lambda: len(s.server.connections) == 1)  # the idle one is gone, the busy one stays
            release.set()
            assert (await held)[0] == 200

    run(main())


def test_an_idle_connection_is_closed_after_the_keepalive(run):
    async def main():
        async with Served(echo, keepalive_s=0.2) as s, s.pool() as pool:
            assert (await pool.post("/", b"", b"", LONG_S))[0] == 200
            assert await until(lambda: not s.server.connections)  # bounded: BOUND_S, far past the 0.2 s

    run(main())


def test_shutdown_lets_a_running_handler_finish_then_cancels_the_rest(run):
    async def slow(request: Request, send: Send) -> None:
        await asyncio.sleep(0.2 if request.path == "/quick" else LONG_S)
        await send(Response(200, b"done"))

    async def main():
        s = Served(slow)
        await s.server.start(s.sock, 128)
        async with s.pool() as a, s.pool() as b:
            quick = asyncio.ensure_future(a.post("/quick", b"", b"", LONG_S))
            stuck = asyncio.ensure_future(b.post("/stuck", b"", b"", LONG_S))
            await asyncio.sleep(0.05)
            await s.server.shutdown(1.0)
            assert (await quick)[2] == b"done"
            with pytest.raises(ResetError):
                await stuck
            assert not s.server.tasks and not s.server.connections

    run(main())
