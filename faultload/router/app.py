"""One router process's HTTP side: its routes over the shared state, and its serving loop.

Routes and fault semantics are specified in :mod:`faultload.router`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
from typing import Any

from faultload.model.faults import ROUTER_TIMED_KINDS
from faultload.model.router import CLOSE_IDLE_SIGNAL, MAX_FAULT_S, SHUTDOWN_S, RouterConfig, is_int
from faultload.router.bodies import completion_body, parse_job
from faultload.router.completions import CompletionLog
from faultload.router.http_server import Request, Response, Send, Server
from faultload.router.state import INT_INDEX, Barrier, SharedState, SlotPool

LISTEN_BACKLOG = 4096
STALL_POLL_S = 0.02
CLIENT_MAX_SIZE = 64 << 20


def _error_json(status: int, message: str) -> bytes:
    kind = "BadRequestError" if status < 500 else "ServiceUnavailableError"
    return json.dumps({"object": "error", "message": message, "type": kind, "param": None, "code": status}).encode()


def _json(value: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(value).encode())


_CONTROL = "/control/"


class RouterApp:
    """Per-process request handling over the shared state."""

    def __init__(self, config: RouterConfig, shared: SharedState, completions: CompletionLog | None = None) -> None:
        self._config = config
        self._s = shared
        self._completions = completions or CompletionLog(None)
        self._barrier = Barrier(shared, config.barrier, config.barrier_timeout_s) if config.mode == "barrier" else None
        self._slots = SlotPool(shared, config.max_num_seqs, config.procs > 1) if config.mode == "latency" else None
        self._headers = b"X-Router-Pid: %d\r\n" % os.getpid()  # which process answered
        self._stall_over: asyncio.Event | None = None  # set when the current stall window ends

    async def handle(self, request: Request, send: Send) -> None:
        """Route one request (the aiohttp app's routes, kept: anything else is a 404 or a 405)."""
        path, method = request.path, request.method
        if path == "/v1/completions":
            if method == "POST":
                return await self.completions(request, send)
        elif path == "/health":
            if method == "GET":
                await send(Response(200, b"ok", "text/plain; charset=utf-8"))
                return
        elif path == "/stats":
            if method == "GET":
                await send(_json(self.stats()))
                return
        elif path.startswith(_CONTROL) and "/" not in path[len(_CONTROL) :] and len(path) > len(_CONTROL):
            if method == "POST":
                await send(self.control(path[len(_CONTROL) :], request.body))
                return
        else:
            await send(Response(404, b"404: Not Found", "text/plain; charset=utf-8"))
            return
        await send(Response(405, b"405: Method Not Allowed", "text/plain; charset=utf-8"))

    def stats(self) -> dict[str, Any]:
        snap = self._s.snapshot()
        snap["procs"] = self._config.procs
        snap["mode"] = self._config.mode
        return snap

    def control(self, fault: str, raw: bytes) -> Response:
        try:
            body = json.loads(raw) if raw.strip() else {}
            if not isinstance(body, dict):
                raise ValueError("body must be a JSON object")
            self._apply_fault(fault, body)
        except KeyError:
            return _json({"error": f"unknown fault {fault!r}"}, status=404)
        except ValueError as e:
            return _json({"error": str(e)}, status=400)
        return _json(self._s.snapshot()["faults"])

    def _apply_fault(self, fault: str, body: dict[str, Any]) -> None:
        if fault == "reset":
            for name in sorted(ROUTER_TIMED_KINDS):
                self._s.set_window(f"{name}_until", 0.0)
            return
        if fault not in ROUTER_TIMED_KINDS:
            raise KeyError(fault)
        seconds = body.get("seconds")
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 <= seconds <= MAX_FAULT_S:
            raise ValueError(f"seconds must be a number in [0, {MAX_FAULT_S:g}] (got {seconds!r})")
        if fault == "errors":
            status = body.get("status", 503)
            if not is_int(status) or not 400 <= status <= 599:
                raise ValueError(f"status must be an int in [400, 599] (got {status!r})")
            with self._s.lock:
                self._s.ints[INT_INDEX["errors_status"]] = status
        until = body.get("until_monotonic")
        if until is not None and (not isinstance(until, (int, float)) or isinstance(until, bool)):
            raise ValueError(f"until_monotonic must be a number (got {until!r})")
        self._s.set_window(f"{fault}_until", float(seconds), None if until is None else float(until))

    async def completions(self, request: Request, send: Send) -> None:
        """Answer one sample request; in_flight covers everything up to the last byte written."""
        s = self._s
        s.arrive()
        outcome, sent = "failed", 0
        try:
            resp, nonce = await self._answer(request)
            if await send(resp) and resp.status == 200:
                outcome, sent = "completed", len(resp.body)
                if nonce is not None:
                    self._completions.record(nonce)
        except asyncio.CancelledError:
            s.add("cancelled", 1)
            raise
        finally:
            s.depart(outcome, sent)

    def _injected_error(self) -> Response | None:
        if self._s.window_left("errors_until") <= 0:
            return None
        status = int(self._s.ints[INT_INDEX["errors_status"]]) or 503
        self._s.add("errors_injected", 1)
        return Response(status, _error_json(status, "injected fault"), headers=self._headers)

    async def _answer(self, request: Request) -> tuple[Response, int | None]:
        """The response, and the nonce of a 200 completion (None otherwise)."""
        early = self._injected_error()
        if early is not None:
            return early, None
        job = parse_job(request.body)
        if isinstance(job, str):
            self._s.add("bad_requests", 1)
            return Response(400, _error_json(400, job), headers=self._headers), None
        await self._mode_gate()
        await self._stall_gate()
        late = self._injected_error()
        if late is not None:
            return late, None
        body = completion_body(job.nonce, job.n, job.max_tokens, job.model, job.prompt, job.prompt_logprobs)
        if self._s.window_left("truncate_until") > 0:
            body = body[: len(body) // 2]
            self._s.add("truncated", 1)
        return Response(200, body, headers=self._headers), job.nonce

    async def _mode_gate(self) -> None:
        if self._barrier is not None:
            await self._barrier.wait()
        elif self._slots is not None:
            await self._slots.acquire()
            try:
                await asyncio.sleep(self._config.gen_seconds)
            finally:
                self._slots.release()

    async def _stall_gate(self) -> None:
        """Wait out a stall window.

        All stalled requests of this process wait on one event, set by one
        watcher task that re-reads the shared window each tick (so a reset or
        an extension takes effect): thousands of held requests cost one timer,
        not one each.
        """
        if self._s.window_left("stall_until") <= 0:
            return
        self._s.add("stalled", 1)
        try:
            if self._stall_over is None or self._stall_over.is_set():
                self._stall_over = asyncio.Event()
                asyncio.ensure_future(self._watch_stall(self._stall_over))
            await self._stall_over.wait()
        finally:
            self._s.add("stalled", -1)

    async def _watch_stall(self, over: asyncio.Event) -> None:
        deadline = time.monotonic() + MAX_FAULT_S
        try:
            while time.monotonic() < deadline:
                left = self._s.window_left("stall_until")
                if left <= 0:
                    break
                await asyncio.sleep(min(left, STALL_POLL_S))
        finally:
            over.set()


def close_idle_connections(server: Server | None, shared: SharedState) -> None:
    """Close this process's keep-alive connections if no completion is in flight anywhere.

    Sent by the trial once its load has ended: the router's idle timeout
    running out at once, so a well-behaved server's forwarding pool releases
    its fds now instead of after its own keep-alive (0.4.0's aiohttp connector:
    2 s, swept every 2 s). A server that leaks them keeps them (CLOSE_WAIT
    still holds the fd), so the drain still sees it. With a completion in
    flight the server may be about to reuse a connection, and a close racing
    its write would fail a forward nobody injected: then nothing is closed.
    """
    if server is None or shared.ints[INT_INDEX["in_flight"]] != 0:
        return
    server.close_idle()


async def serve(
    config: RouterConfig, shared: SharedState, sock: socket.socket, on_ready: Any, completions_dir: str | None = None
) -> None:
    """Serve on ``sock`` until SIGTERM/SIGINT."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    app = RouterApp(config, shared, CompletionLog(completions_dir))
    # A client that hangs up cancels its request's handler: it leaves its barrier wave / queue.
    server = Server(app.handle, max_body=CLIENT_MAX_SIZE)
    loop.add_signal_handler(CLOSE_IDLE_SIGNAL, close_idle_connections, server, shared)
    try:
        await server.start(sock, LISTEN_BACKLOG)
        on_ready()
        await stop.wait()
    finally:
        await server.shutdown(SHUTDOWN_S)
