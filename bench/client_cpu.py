"""CPU seconds per HTTP request of the load client: aiohttp vs faultload's HttpPool.

A benchmark, not a test. Starts a local uvicorn app in a subprocess (a stand-in
for the server's two sampling endpoints: ``asample`` answers
``{"request_id": "N"}``, ``retrieve_future`` answers a small protobuf-shaped
body), then in this process drives the same load with each client, side by
side, alternating the order every repetition:

- ``--requests`` HTTP requests (default 20,000), half ``asample`` and half
  ``retrieve_future`` (each simulated sample posts one, reads the id, posts the
  other), ``--concurrency`` samples in flight (default 200), keep-alive;
- the aiohttp client is configured as ``faultload.client.raw`` had it
  (TCPConnector(limit=0), no cookie jar, no decompression, a ClientTimeout
  per request, ``async with session.post(...)`` + ``read()``); the HttpPool as
  raw.py now uses it;
- CPU is ``resource.getrusage(RUSAGE_SELF)`` user+system of this (client)
  process only, around the measured load (after a warm-up that opens the
  connections); the server's CPU is not counted.

Prints per-repetition microseconds of client CPU per request, the medians,
and the ratio. The machine may be shared: use the medians.

Usage: .faultload/venv/bin/python bench/client_cpu.py [--requests N] [--concurrency C]
       [--repeat R] [--loop uvloop|asyncio]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Awaitable, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROTO_BODY = bytes(range(200))  # ~ a short SampleResponse
SAMPLE_BODY = (
    b'{"sampling_session_id":"bench","seq_id":1,"num_samples":1,"type":"sample",'
    b'"prompt":{"chunks":[{"type":"encoded_text","tokens":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}]},'
    b'"sampling_params":{"max_tokens":64,"temperature":1.0,"seed":7}}'
)
ACCEPT = "application/x-protobuf"


# --------------------------------------------------------------------------- the server (subprocess)


async def app(scope, receive, send) -> None:
    """A raw ASGI stand-in for the two endpoints (no framework: keep the server cheap)."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    if scope["path"] == "/api/v1/asample":
        app.counter += 1
        body, ctype = b'{"request_id":"%d","model_id":"bench"}' % app.counter, b"application/json"
    else:
        body, ctype = PROTO_BODY, b"application/x-protobuf"
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", ctype), (b"content-length", b"%d" % len(body))],
        }
    )
    await send({"type": "http.response.body", "body": body})


app.counter = 0


def serve(port: int) -> None:
    import uvicorn

    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        lifespan="off",
        access_log=False,
        log_level="warning",
        timeout_keep_alive=60,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server() -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("the bench server exited")
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the bench server did not start")


# --------------------------------------------------------------------------- the clients


Post = Callable[[str, bytes, bool], Awaitable[tuple[int, bytes]]]


async def aiohttp_client(port: int):
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=60.0, happy_eyeballs_delay=None)
    session = aiohttp.ClientSession(connector=connector, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar())
    base = f"http://127.0.0.1:{port}"
    json_headers = {"Content-Type": "application/json"}
    poll_headers = {"Accept": ACCEPT, "Content-Type": "application/json"}

    async def post(path: str, body: bytes, poll: bool) -> tuple[int, bytes]:
        timeout = aiohttp.ClientTimeout(total=60.0, sock_connect=5.0)
        headers = poll_headers if poll else json_headers
        async with session.post(base + path, data=body, headers=headers, timeout=timeout) as resp:
            payload = await resp.read()
            if poll:
                resp.headers.get("Content-Type", "")
            return resp.status, payload

    return post, session.close


async def httppool_client(port: int):
    from faultload.client.http import HttpPool

    pool = HttpPool("127.0.0.1", port, None, connect_timeout_s=5.0, keepalive=True, retry_stale=False)
    json_headers = b"Content-Type: application/json\r\n"
    poll_headers = f"Accept: {ACCEPT}\r\n".encode() + json_headers

    async def post(path: str, body: bytes, poll: bool) -> tuple[int, bytes]:
        status, _, payload = await pool.post(path, body, poll_headers if poll else json_headers, 60.0)
        return status, payload

    return post, pool.close


CLIENTS = {"aiohttp": aiohttp_client, "httppool": httppool_client}


async def drive(post: Post, samples: int, concurrency: int) -> None:
    """``samples`` asample+retrieve_future pairs, ``concurrency`` at a time."""
    left = samples

    async def runner() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            status, payload = await post("/api/v1/asample", SAMPLE_BODY, False)
            assert status == 200, status
            rid = payload.split(b'"request_id":"', 1)[1].split(b'"', 1)[0]
            status, payload = await post("/api/v1/retrieve_future", b'{"request_id":"%s"}' % rid, True)
            assert status == 200 and len(payload) == len(PROTO_BODY), status

    await asyncio.gather(*(runner() for _ in range(concurrency)))


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(name: str, port: int, requests: int, concurrency: int) -> tuple[float, float]:
    """(client CPU seconds per request, wall seconds) for ``requests`` HTTP requests."""
    post, close = await CLIENTS[name](port)
    try:
        await drive(post, max(concurrency, requests // 20) // 2 * 2, concurrency)  # warm-up: open the connections
        cpu0, wall0 = cpu_s(), time.perf_counter()
        await drive(post, requests // 2, concurrency)
        cpu1, wall1 = cpu_s(), time.perf_counter()
    finally:
        await close()
    return (cpu1 - cpu0) / requests, wall1 - wall0


def run_loop(coro, loop: str):
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000, help="HTTP requests per measurement")
    parser.add_argument("--concurrency", type=int, default=200, help="samples in flight")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop", help="the workers use uvloop")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return 0

    proc, port = start_server()
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in CLIENTS}
    try:
        print(
            f"{args.requests} requests ({args.requests // 2} asample + retrieve_future pairs), "
            f"{args.concurrency} concurrent, {args.loop} loop, client pid {os.getpid()}, server pid {proc.pid}"
        )
        print(f"{'rep':>3}  {'client':<9} {'us CPU/req':>10} {'wall s':>7} {'req/s':>7}")
        for rep in range(args.repeat):
            order = list(CLIENTS) if rep % 2 == 0 else list(reversed(CLIENTS))
            for name in order:
                per_req, wall = run_loop(measure(name, port, args.requests, args.concurrency), args.loop)
                results[name].append((per_req, wall))
                print(
                    f"{rep + 1:>3}  {name:<9} {per_req * 1e6:>10.1f} {wall:>7.2f} {args.requests / wall:>7.0f}",
                    flush=True,
                )
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    medians = {name: statistics.median(r[0] for r in runs) for name, runs in results.items()}
    print()
    for name, value in medians.items():
        print(f"median {name:<9} {value * 1e6:8.1f} us CPU per request")
    ratios = [a[0] / b[0] for a, b in zip(results["httppool"], results["aiohttp"])]
    print(
        f"httppool / aiohttp: {medians['httppool'] / medians['aiohttp']:.2f} (ratio of medians); "
        f"per repetition: {', '.join(f'{r:.2f}' for r in ratios)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
