"""A stand-in Tinker API server for faultload's own tests — a test double, not a server under test.

It opens sessions as SkyRL's API does (``/api/v1/healthz``, ``create_session``,
``session_heartbeat``, ``create_sampling_session``, ``get_server_capabilities``,
``client/config``, ``telemetry``, ``samplers/{id}``), so faultload's raw client
and the real ``tinker`` SDK get a sampling session, and then answers **every
asample with HTTP 400** ``{"detail": "base model not loaded"}``: a server that
accepts nothing with no fault in force, which every invariant but
``accepted_requests`` passed or left unknown. ``retrieve_future``
answers 404 (it never accepted a request). ``GET /standin/stats`` counts the
requests per path, so a test can check the load reached it.

faultload needs no more of a ``url=`` target: a ``/api/v1/healthz`` answer to
attach, the session endpoints, and (optionally, ``--server-pid``) a pid for
the monitor's process metrics; the line printed at start gives both.

Run by hand (bound to 127.0.0.1; ``--port 0`` picks a free port)::

    .faultload/venv/bin/python tests/standin_server.py --port 8765
    # standin listening on http://127.0.0.1:8765 pid 12345

In tests: the ``standin_server`` fixture, or ``with running() as server:``.
Either stops the process (SIGTERM, then SIGKILL after a bound) on the way out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

REJECTION = {"detail": "base model not loaded"}
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
BANNER = "standin listening on "


def make_app(retrieve_futures: bool = False):
    """The aiohttp application: session endpoints that work, an asample that always refuses."""
    from aiohttp import web

    counts: Counter[str] = Counter()
    ids = itertools.count(1)

    @web.middleware
    async def count(request, handler):
        counts[request.path] += 1
        return await handler(request)

    async def healthz(request):
        return web.json_response({"status": "ok"})

    async def create_session(request):
        await request.read()
        return web.json_response(
            {
                "type": "create_session",
                "session_id": f"standin-session-{next(ids)}",
                "info_message": None,
                "warning_message": None,
                "error_message": None,
            }
        )

    async def heartbeat(request):
        return web.json_response({"type": "session_heartbeat"})

    async def create_sampling_session(request):
        body = await request.json()
        if not body.get("session_id"):
            return web.json_response({"detail": "Session not found"}, status=404)
        return web.json_response(
            {"type": "create_sampling_session", "sampling_session_id": f"standin-sampler-{next(ids)}"}
        )

    async def capabilities(request):
        return web.json_response({"supported_models": [{"model_name": "standin"}]})

    async def client_config(request):
        return web.json_response({"pjwt_auth_enabled": False, "sample_use_retrieve_futures": retrieve_futures})

    async def telemetry(request):
        return web.json_response({"status": "accepted"})

    async def sampler(request):
        return web.json_response(
            {"sampler_id": request.match_info["sampler_id"], "base_model": "standin", "model_path": None}
        )

    async def asample(request):
        await request.read()
        return web.json_response(REJECTION, status=400)

    async def retrieve_future(request):
        await request.read()
        return web.json_response({"detail": "Request not found"}, status=404)

    async def stats(request):
        return web.json_response(dict(counts))

    app = web.Application(middlewares=[count])
    app.add_routes(
        [
            web.get("/api/v1/healthz", healthz),
            web.post("/api/v1/create_session", create_session),
            web.post("/api/v1/session_heartbeat", heartbeat),
            web.post("/api/v1/create_sampling_session", create_sampling_session),
            web.get("/api/v1/get_server_capabilities", capabilities),
            web.post("/api/v1/client/config", client_config),
            web.post("/api/v1/telemetry", telemetry),
            web.get("/api/v1/samplers/{sampler_id}", sampler),
            web.post("/api/v1/asample", asample),
            web.post("/api/v1/retrieve_future", retrieve_future),
            web.get("/standin/stats", stats),
        ]
    )
    return app


async def serve(port: int, retrieve_futures: bool = False) -> None:
    """Serve on 127.0.0.1:``port`` until SIGTERM or SIGINT; print the banner once listening."""
    from aiohttp import web

    runner = web.AppRunner(make_app(retrieve_futures), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", port).start()
        bound = runner.addresses[0][1]
        print(f"{BANNER}http://127.0.0.1:{bound} pid {os.getpid()}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument(
        "--retrieve-futures",
        action="store_true",
        help="client/config turns on tinker 0.38's per-session retrieve_futures polls",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port {args.port}: expected 0-65535")
    try:
        asyncio.run(serve(args.port, args.retrieve_futures))
    except OSError as exc:
        print(f"standin: cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0


# --------------------------------------------------------------------------- for tests


@dataclass(frozen=True)
class Standin:
    url: str
    port: int
    pid: int

    @property
    def target(self) -> str:
        return f"url={self.url}"


def _banner(proc: subprocess.Popen, timeout_s: float) -> str:
    """The first stdout line of ``proc``, waited for at most ``timeout_s``."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline and proc.poll() is None:
            if sel.select(timeout=min(0.2, max(0.0, deadline - time.monotonic()))):
                return proc.stdout.readline()
    return ""


@contextlib.contextmanager
def running(port: int = 0, python: str = sys.executable, retrieve_futures: bool = False) -> Iterator[Standin]:
    """Start the stand-in in its own process; stop it (bounded) when the block ends."""
    flags = ["--retrieve-futures"] if retrieve_futures else []
    proc = subprocess.Popen(
        [python, str(Path(__file__).resolve()), "--port", str(port), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = _banner(proc, START_TIMEOUT_S)
        if not line.startswith(BANNER):
            err = proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
            raise RuntimeError(f"the stand-in server did not start: {line!r} {err[-500:]!r}")
        url, _, pid = line[len(BANNER) :].split()
        yield Standin(url, int(url.rsplit(":", 1)[1]), int(pid))
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT_S)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


try:  # the fixture, when imported by a test module or a conftest
    import pytest

    @pytest.fixture
    def standin_server() -> Iterator[Standin]:
        """A running stand-in server (see the module docstring); stopped after the test."""
        with running() as server:
            yield server
except ImportError:  # run as a script without pytest installed
    pass


if __name__ == "__main__":
    sys.exit(main())
