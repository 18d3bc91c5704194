"""faultload.client.http.HttpPool against a local STUB HTTP server.

The server here is a TEST DOUBLE: a few dozen lines of asyncio streams that
read HTTP/1.1 requests (request line, headers, Content-Length body) and answer
with whatever bytes a test scripts, including malformed, truncated and never
sent answers, and it records what it saw (peer addresses, connections,
requests, client disconnects). Each test runs under asyncio and under uvloop
(the load workers use uvloop). Every wait is bounded; nothing asserts a
duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass, field
from typing import Awaitable, Callable

import pytest

from faultload.client.http import (
    ConnectError,
    ConnectTimeout,
    HttpError,
    HttpPool,
    HttpTimeout,
    ProtocolError,
    ResetError,
)
from faultload.host.network import pick_free_port

BOUND_S = 10.0  # upper bound on any wait here (never reached when things work)
LONG_S = 30.0  # a request timeout that must not fire


@dataclass
class Req:
    conn: int  # which connection (0, 1, ...) in accept order
    index: int  # which request on that connection
    path: str
    headers: dict[str, str]
    body: bytes


Responder = Callable[[Req, asyncio.StreamReader, asyncio.StreamWriter, "StubHttp"], Awaitable[bool]]


def response(status: int = 200, body: bytes = b"{}", ctype: str = "application/json", extra: str = "") -> bytes:
    return f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n{extra}\r\n".encode() + body


async def echo(req: Req, reader, writer, stub) -> bool:
    """200 with the request's path and body; keep the connection."""
    writer.write(response(200, req.path.encode() + b"|" + req.body))
    await writer.drain()
    return True


@dataclass
class StubHttp:
    """TEST DOUBLE of an HTTP/1.1 server; ``respond`` returns whether to keep the connection."""

    respond: Responder = echo
    peers: list[str] = field(default_factory=list)  # one per accepted connection
    requests: list[Req] = field(default_factory=list)
    client_gone: list[int] = field(default_factory=list)  # connections the client closed
    server: asyncio.AbstractServer | None = None
    port: int = 0
    handlers: set[asyncio.Task] = field(default_factory=set)

    async def __aenter__(self) -> StubHttp:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()
        for task in list(self.handlers):  # e.g. one still holding a request
            task.cancel()
        await asyncio.gather(*self.handlers, return_exceptions=True)
        await self.server.wait_closed()

    def pool(self, **kw) -> HttpPool:
        kw.setdefault("connect_timeout_s", 5.0)
        return HttpPool("127.0.0.1", self.port, kw.pop("source_ip", None), **kw)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = len(self.peers)
        self.peers.append(writer.get_extra_info("peername")[0])
        self.handlers.add(asyncio.current_task())
        index = 0
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError as exc:
                    if not exc.partial:
                        self.client_gone.append(conn)
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, version = lines[0].split(" ")
                assert (method, version) == ("POST", "HTTP/1.1")
                headers = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers["content-length"]))
                req = Req(conn, index, path, headers, body)
                self.requests.append(req)
                if not await self.respond(req, reader, writer, self):
                    return
                index += 1
        except (ConnectionError, asyncio.IncompleteReadError):
            self.client_gone.append(conn)
        except asyncio.CancelledError:
            pass  # the test is over (a cancelled handler task makes asyncio's streams log an error)
        finally:
            writer.close()
            self.handlers.discard(asyncio.current_task())

    async def wait_gone(self, conn: int) -> bool:
        return await until(lambda: conn in self.client_gone)


async def until(predicate: Callable[[], bool], timeout_s: float = BOUND_S) -> bool:
    """Poll ``predicate`` (bounded); return its last value."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.005)
    return predicate()


async def hold_until_client_leaves(reader: asyncio.StreamReader) -> bool:
    """Never answer; return True when the client drops the connection (bounded)."""
    try:
        return await asyncio.wait_for(reader.read(1), BOUND_S) == b""
    except ConnectionError:
        return True
    except asyncio.TimeoutError:
        return False


async def hold_first_connection_then_echo(req, reader, writer, stub) -> bool:
    """Stub behaviour: never answer on the first connection (note when the client drops it), echo after."""
    if req.conn == 0:
        if await hold_until_client_leaves(reader):
            stub.client_gone.append(req.conn)
        return False
    return await echo(req, reader, writer, stub)


@pytest.fixture
def run(on_each_loop):
    return on_each_loop


# --------------------------------------------------------------------------- responses


def test_plain_200_with_content_length(run):
    async def main():
        async with StubHttp() as stub, stub.pool() as pool:
            status, ctype, body = await pool.post(
                "/api/v1/asample",
                b'{"a":1}',
                b"Content-Type: application/json\r\nAccept: application/x-protobuf\r\n",
                LONG_S,
            )
            assert (status, ctype, body) == (200, "application/json", b'/api/v1/asample|{"a":1}')
            req = stub.requests[0]
            assert req.headers["host"] == f"127.0.0.1:{stub.port}"
            assert req.headers["content-length"] == "7"
            assert req.headers["content-type"] == "application/json"
            assert req.headers["accept"] == "application/x-protobuf"
            assert "connection" not in req.headers  # HTTP/1.1: keep-alive is the default

    run(main())


def test_error_status_and_empty_body(run):
    async def respond(req, reader, writer, stub):
        writer.write(response(404, b"", ctype="text/plain") if req.index == 0 else b"HTTP/1.1 204 No Content\r\n\r\n")
        return True

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            assert await pool.post("/", b"", b"", LONG_S) == (404, "text/plain", b"")
            assert await pool.post("/", b"", b"", LONG_S) == (204, "", b"")
            assert pool.connections_made == 1

    run(main())


def test_chunked_body(run):
    async def respond(req, reader, writer, stub):
        writer.write(
            b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        for piece in (b"Internal ", b"Server ", b"Error " * 1000):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.write(b"0\r\n\r\n")
        return True

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            for _ in range(2):  # a chunked response leaves the connection reusable
                status, ctype, body = await pool.post("/", b"x", b"", LONG_S)
                assert (status, ctype) == (500, "text/plain")
                assert body == b"Internal Server " + b"Error " * 1000
            assert len(stub.peers) == 1

    run(main())


def test_multi_megabyte_body(run):
    big = bytes(range(256)) * (6 * 4096)  # 6 MiB

    async def respond(req, reader, writer, stub):
        writer.write(
            f"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: {len(big)}\r\n\r\n".encode()
        )
        view = memoryview(big)
        for start in range(0, len(big), 1 << 20):
            writer.write(view[start : start + (1 << 20)])
            await writer.drain()
        return True

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            status, ctype, body = await pool.post("/", b"{}", b"", LONG_S)
            assert (status, ctype, len(body)) == (200, "application/x-protobuf", len(big))
            assert body == big
            assert await pool.post("/", b"{}", b"", LONG_S) == (200, "application/x-protobuf", big)
            assert len(stub.peers) == 1

    run(main())


def test_body_delimited_by_connection_close(run):
    """No Content-Length, no chunking: the body ends with the connection, which is not reused."""

    async def respond(req, reader, writer, stub):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil the end")
        return False

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            assert await pool.post("/", b"", b"", LONG_S) == (200, "text/plain", b"until the end")
            assert await pool.post("/", b"", b"", LONG_S) == (200, "text/plain", b"until the end")
            assert len(stub.peers) == 2

    run(main())


def test_interim_100_response_is_skipped(run):
    async def respond(req, reader, writer, stub):
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" + response(200, b"final"))
        return True

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            assert await pool.post("/", b"", b"", LONG_S) == (200, "application/json", b"final")

    run(main())


# --------------------------------------------------------------------------- keep-alive


def test_keepalive_reuses_one_connection_for_sequential_requests(run):
    async def main():
        async with StubHttp() as stub, stub.pool() as pool:
            for i in range(25):
                status, _, body = await pool.post(f"/r{i}", b"%d" % i, b"", LONG_S)
                assert (status, body) == (200, b"/r%d|%d" % (i, i))
            assert len(stub.peers) == 1
            assert [r.index for r in stub.requests] == list(range(25))
            assert pool.connections_made == 1

    run(main())


def test_idle_connections_older_than_the_expiry_are_closed_not_reused(run):
    # As httpx's keepalive_expiry (the Tinker SDK keeps its 5 s default).
    async def main():
        # 1 s: the idle gap between two posts in a row is microseconds, so even a loaded machine reuses; the
        # sleep is a lower bound, so the third post surely comes after the expiry
        async with StubHttp() as stub, stub.pool(keepalive_expiry_s=1.0) as pool:
            await pool.post("/a", b"1", b"", LONG_S)
            await pool.post("/b", b"2", b"", LONG_S)  # reused within the expiry
            assert pool.connections_made == 1
            await asyncio.sleep(1.2)
            await pool.post("/c", b"3", b"", LONG_S)  # the idle one expired: a new connection
            assert pool.connections_made == 2 and pool.expired == 1
            assert len(stub.peers) == 2
            assert await until(lambda: len(stub.client_gone) == 1)  # the client closed the expired one

    run(main())


def test_concurrent_requests_open_connections_then_reuse_them(run):
    async def respond(req, reader, writer, stub):
        await asyncio.sleep(0.05)  # overlap the requests of a batch
        return await echo(req, reader, writer, stub)

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            for _ in range(3):
                results = await asyncio.gather(*(pool.post("/", b"%d" % i, b"", LONG_S) for i in range(8)))
                assert [r[2] for r in results] == [b"/|%d" % i for i in range(8)]
            assert len(stub.peers) == pool.connections_made <= 8 * 3
            assert len(stub.requests) == 24

    run(main())


def test_connection_close_response_is_not_reused(run):
    async def respond(req, reader, writer, stub):
        close = req.index == 0 and req.conn == 0
        writer.write(response(200, b"ok", extra="connection: close\r\n" if close else ""))
        await writer.drain()
        if close:  # say close but keep the socket open: the client must still not reuse it
            await asyncio.sleep(0.2)
        return not close

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            for _ in range(3):
                assert await pool.post("/", b"", b"", LONG_S) == (200, "application/json", b"ok")
            assert len(stub.peers) == 2  # the first connection served one request, the second two
            assert [(r.conn, r.index) for r in stub.requests] == [(0, 0), (1, 0), (1, 1)]

    run(main())


def test_keepalive_false_sends_connection_close(run):
    async def main():
        async with StubHttp() as stub, stub.pool(keepalive=False) as pool:
            for _ in range(2):
                assert (await pool.post("/", b"", b"", LONG_S))[0] == 200
            assert stub.requests[0].headers["connection"] == "close"
            assert pool.connections_made == 2

    run(main())


def test_server_closing_an_idle_connection_is_noticed(run):
    """The server closes after answering (an idle timeout): the next request opens a new
    connection without any error or retry."""

    async def respond(req, reader, writer, stub):
        writer.write(response(200, b"ok"))
        await writer.drain()
        return False  # close it, without saying so in the response

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            assert (await pool.post("/", b"", b"", LONG_S))[0] == 200
            assert await until(lambda: pool.idle_count == 0)  # the client saw the FIN
            assert (await pool.post("/", b"", b"", LONG_S))[0] == 200
            assert len(stub.peers) == 2 and pool.stale_retries == 0

    run(main())


async def _close_reused_unanswered(req, reader, writer, stub) -> bool:
    """Answer the first request of a connection; close a reused one without answering
    (what the client sees when the server closes it while idle, just as a request goes out)."""
    if req.index > 0:
        return False
    writer.write(response(200, b"ok"))
    await writer.drain()
    return True


def test_keepalive_race_is_retried_once_on_a_fresh_connection(run):
    async def main():
        async with StubHttp(_close_reused_unanswered) as stub, stub.pool() as pool:
            assert (await pool.post("/", b"1", b"", LONG_S))[0] == 200
            assert await pool.post("/", b"2", b"", LONG_S) == (200, "application/json", b"ok")
            assert pool.stale_retries == 1
            assert [(r.conn, r.index, r.body) for r in stub.requests] == [(0, 0, b"1"), (0, 1, b"2"), (1, 0, b"2")]

    run(main())


def test_keepalive_race_without_retry_is_a_reset(run):
    async def main():
        async with StubHttp(_close_reused_unanswered) as stub, stub.pool(retry_stale=False) as pool:
            assert (await pool.post("/", b"1", b"", LONG_S))[0] == 200
            with pytest.raises(ResetError):
                await pool.post("/", b"2", b"", LONG_S)
            assert pool.stale_retries == 0 and len(stub.requests) == 2
            assert (await pool.post("/", b"3", b"", LONG_S))[0] == 200  # and the pool carries on

    run(main())


def test_a_fresh_connection_dropped_before_answering_is_not_retried(run):
    async def respond(req, reader, writer, stub):
        writer.transport.abort()
        return False

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            with pytest.raises(ResetError):
                await pool.post("/", b"", b"", LONG_S)
            assert len(stub.requests) == 1 and pool.stale_retries == 0

    run(main())


def test_stale_retry_happens_only_once(run):
    """Reused connection dropped, then the fresh one dropped too: the error surfaces."""

    async def respond(req, reader, writer, stub):
        if req.conn == 0 and req.index == 0:
            writer.write(response(200, b"ok"))
            return True
        return False

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            assert (await pool.post("/", b"", b"", LONG_S))[0] == 200
            with pytest.raises(ResetError):
                await pool.post("/", b"", b"", LONG_S)
            assert pool.stale_retries == 1 and len(stub.requests) == 3

    run(main())


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("source_ip", [None, "127.0.1.7"])
def test_connection_refused_is_a_connect_error(run, source_ip):
    async def main():
        async with HttpPool("127.0.0.1", pick_free_port(), source_ip, connect_timeout_s=5.0) as pool:
            with pytest.raises(ConnectError) as info:
                await pool.post("/", b"", b"", LONG_S)
            assert not isinstance(info.value, HttpTimeout)
            assert isinstance(info.value, HttpError) and isinstance(info.value, OSError)

    run(main())


def test_unusable_source_address_is_a_connect_error(run):
    async def main():
        async with StubHttp() as stub, stub.pool(source_ip="192.0.2.1") as pool:  # TEST-NET: not ours
            with pytest.raises(ConnectError):
                await pool.post("/", b"", b"", LONG_S)

    run(main())


def test_no_answer_is_a_timeout_and_the_connection_is_not_reused(run):
    respond = hold_first_connection_then_echo

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            with pytest.raises(HttpTimeout) as info:
                await pool.post("/", b"", b"", 0.3)
            assert isinstance(info.value, TimeoutError) and not isinstance(info.value, ConnectError)
            assert await stub.wait_gone(0)  # the client closed the timed-out connection
            assert (await pool.post("/", b"again", b"", LONG_S))[2] == b"/|again"
            assert [r.conn for r in stub.requests] == [0, 1]
            assert pool.connections_made == 2

    run(main())


def test_connect_that_never_completes_is_a_connect_timeout(run):
    """A listener that never accepts, its backlog full: Linux drops the SYN, the connect hangs."""

    async def main():
        listener = socket.socket()
        fillers = []
        try:
            listener.bind(("127.0.0.1", 0))
            listener.listen(0)
            port = listener.getsockname()[1]
            for _ in range(3):
                filler = socket.socket()
                filler.setblocking(False)
                fillers.append(filler)
                with contextlib.suppress(BlockingIOError):
                    filler.connect(("127.0.0.1", port))
            await asyncio.sleep(0.1)
            async with HttpPool("127.0.0.1", port, None, connect_timeout_s=0.3) as pool:
                with pytest.raises(ConnectTimeout) as info:
                    await pool.post("/", b"", b"", LONG_S)
                assert isinstance(info.value, ConnectError) and isinstance(info.value, HttpTimeout)
            async with HttpPool("127.0.0.1", port, None, connect_timeout_s=LONG_S) as pool:
                with pytest.raises(HttpTimeout):  # the total timeout bounds the connect too
                    await pool.post("/", b"", b"", 0.3)
        finally:
            listener.close()
            for filler in fillers:
                filler.close()

    run(main())


def test_raw_client_classifies_pool_errors():
    from faultload.client.endpoint import classify_error as _classify
    from faultload.record.history import ErrorClass

    assert _classify(ConnectError("refused")) == ErrorClass.CONNECT
    assert _classify(ConnectTimeout("slow connect")) == ErrorClass.TIMEOUT  # as aiohttp's ConnectionTimeoutError was
    assert _classify(HttpTimeout("slow")) == ErrorClass.TIMEOUT
    assert _classify(asyncio.TimeoutError()) == ErrorClass.TIMEOUT
    assert _classify(ResetError("reset")) == ErrorClass.RESET
    assert _classify(ProtocolError("garbage")) == ErrorClass.DECODE
    assert _classify(HttpError("pool closed")) == ErrorClass.OTHER


def test_connect_timeout_is_both_a_connect_error_and_a_timeout():
    assert issubclass(ConnectTimeout, ConnectError) and issubclass(ConnectTimeout, HttpTimeout)
    assert issubclass(HttpTimeout, TimeoutError) and issubclass(HttpError, OSError)
    for cls in (ConnectError, ResetError, HttpTimeout, ProtocolError):
        assert issubclass(cls, HttpError)


@pytest.mark.parametrize("how", ["reset", "close"])
def test_connection_lost_mid_body_is_a_reset(run, how):
    async def respond(req, reader, writer, stub):
        if req.conn > 0:
            return await echo(req, reader, writer, stub)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n" + b"x" * 5000
        )
        await writer.drain()
        await asyncio.sleep(0.05)
        if how == "reset":
            writer.transport.abort()
        return False

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            with pytest.raises(ResetError) as info:
                await pool.post("/", b"", b"", LONG_S)
            assert "mid-response" in str(info.value)
            assert pool.stale_retries == 0  # bytes had arrived: never retried
            assert (await pool.post("/", b"", b"", LONG_S))[0] == 200

    run(main())


def test_chunked_body_cut_short_is_a_reset(run):
    async def respond(req, reader, writer, stub):
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await writer.drain()
        return False

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            with pytest.raises(ResetError):
                await pool.post("/", b"", b"", LONG_S)

    run(main())


def test_garbage_is_a_protocol_error(run):
    async def respond(req, reader, writer, stub):
        if req.conn == 0:
            writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
            await writer.drain()
            await hold_until_client_leaves(reader)
            stub.client_gone.append(req.conn)
            return False
        return await echo(req, reader, writer, stub)

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            with pytest.raises(ProtocolError):
                await pool.post("/", b"", b"", LONG_S)
            assert await stub.wait_gone(0)  # the client dropped the connection
            assert (await pool.post("/", b"", b"", LONG_S))[0] == 200

    run(main())


def test_bytes_after_a_complete_response_discard_the_connection(run):
    async def respond(req, reader, writer, stub):
        writer.write(response(200, b"ok") + (b"HTTP/1.1 200 OK\r\n" if req.conn == 0 else b""))
        return True

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            for _ in range(3):
                assert await pool.post("/", b"", b"", LONG_S) == (200, "application/json", b"ok")
            assert stub.peers and [r.conn for r in stub.requests] == [0, 1, 1]

    run(main())


# --------------------------------------------------------------------------- cancellation, close, source address


def test_cancelling_a_request_closes_its_connection(run):
    respond = hold_first_connection_then_echo

    async def main():
        async with StubHttp(respond) as stub, stub.pool() as pool:
            task = asyncio.ensure_future(pool.post("/poll", b"", b"", LONG_S))
            assert await until(lambda: len(stub.requests) == 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await stub.wait_gone(0)  # the server saw the client drop the connection
            assert pool.idle_count == 0 and not pool._live
            assert (await pool.post("/", b"", b"", LONG_S))[0] == 200
            assert [r.conn for r in stub.requests] == [0, 1]

    run(main())


def test_close_closes_idle_connections_and_later_posts_fail(run):
    async def main():
        async with StubHttp() as stub:
            pool = stub.pool()
            await asyncio.gather(*(pool.post("/", b"", b"", LONG_S) for _ in range(3)))
            opened = len(stub.peers)
            await pool.close()
            assert await until(lambda: len(stub.client_gone) == opened)
            with pytest.raises(HttpError):
                await pool.post("/", b"", b"", LONG_S)

    run(main())


def test_source_address_is_bound(run):
    async def main():
        async with StubHttp() as stub, stub.pool(source_ip="127.0.1.7") as pool:
            for _ in range(3):
                assert (await pool.post("/", b"", b"", LONG_S))[0] == 200
            assert stub.peers == ["127.0.1.7"]

    run(main())


def test_source_bound_socket_leaves_its_port_to_connect(run):
    """IP_BIND_ADDRESS_NO_PORT on the bound socket (bind(ip, 0) alone costs ms per connect once
    TIME_WAIT sockets crowd the address); Nagle off, as on a connection made without a source."""

    async def main():
        async with StubHttp() as stub, stub.pool(source_ip="127.0.1.7") as bound, stub.pool() as plain:
            for pool in (bound, plain):
                assert (await pool.post("/", b"", b"", LONG_S))[0] == 200
            socks = [next(iter(pool._live)).transport.get_extra_info("socket") for pool in (bound, plain)]
            assert socks[0].getsockname()[0] == "127.0.1.7" and socks[0].getsockname()[1] > 0
            assert socks[0].getsockopt(socket.IPPROTO_IP, socket.IP_BIND_ADDRESS_NO_PORT) == 1
            nodelay = [s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0 for s in socks]
            assert nodelay == [True, True]

    run(main())
