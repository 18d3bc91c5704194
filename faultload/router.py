"""The fake vLLM router: answers ``POST /v1/completions`` from the prompt's nonce.

The server under test forwards each sample request here. Output tokens and
logprobs come from :mod:`faultload.tokens`, so the client can check that every
result belongs to its request without any state shared with the router.

Bodies
    Choice ``j`` of a request whose prompt decodes to ``nonce`` carries
    ``token_ids = tokens.output_tokens(nonce, j, T)`` and ``token_logprobs =
    -d/10000`` for ``d`` in ``tokens.logprob_digits(nonce, j, T)``, with
    ``T = max_tokens`` and ``finish_reason = "length"``. Numbers are printed at
    fixed width from lookup tables by one numpy gather per array (token ids
    right-aligned with leading spaces, logprobs as ``-0.dddd``), so a
    multi-MB body costs a few milliseconds. Measured here (2 cores):
    T = 1,000,000, n = 1 gives a 14 MB body in 21-29 ms including token
    generation, i.e. ~490-660 MB/s (``python -m faultload.router --bench
    1000000``). Serving small bodies (T = 16) costs the router ~0.1 ms of CPU
    per request (immediate and latency modes, 64 keep-alive clients), ~0.2 ms
    in a 4,096-request barrier wave over 2 processes.
    If the request asks for ``prompt_logprobs``, every choice also carries
    ``prompt_logprobs``: ``null`` for position 0, then ``{"<token id>":
    {"logprob": -d/10000, "rank": 1, "decoded_token": ""}}`` with
    ``d = (7 * nonce + 13 * i) % 10000`` (only the prompt token's own entry).
    A prompt that is not a faultload prompt, or a bad ``n``/``max_tokens``,
    gets a 400 with a vLLM-style JSON error.

Modes (``--mode``)
    ``immediate``  answer at once.
    ``barrier``    requests form waves. An arriving request joins the current
                   wave and is held; the wave is released (all its requests
                   answered at once) when ``--barrier N`` requests are held
                   together, counted across all router processes, or when
                   ``--barrier-timeout S`` seconds have passed since the wave's
                   first request arrived. The next arrival starts a new wave.
                   A held request whose client disconnects leaves the wave
                   (the wave's timeout clock keeps its first arrival time).
                   ``--barrier-expect`` is not implemented.
    ``latency``    at most ``--max-num-seqs K`` requests generate at once,
                   router-wide (a shared counter across processes); each
                   generation is an ``asyncio.sleep(--gen-seconds G)``. The
                   others wait: FIFO within a process; between processes a
                   freed slot goes to whichever process polls first (every
                   5 ms), i.e. approximately FIFO.

Faults (``POST /control/...``, state shared by all processes; a new call for
the same fault replaces its window, ``seconds: 0`` ends it)
    ``stall {"seconds": S}``   for S s no response is written: requests are
        accepted and go through their mode (barrier, generation) but then wait
        just before their answer until the stall ends, then proceed normally.
    ``errors {"seconds": S, "status": 503}``  for S s every completions request
        is answered with that status (400..599) and a JSON error: new arrivals
        at once, and any request whose answer falls in the window.
    ``truncate {"seconds": S}``  for S s every 200 body is cut to its first
        ``len(body) // 2`` bytes; Content-Length is that truncated length, so
        the HTTP exchange is clean but the body is invalid JSON.
    ``reset``  ends all fault windows (held barrier requests stay held).
    A crash is the parent killing the processes (:meth:`RouterHandle.crash`).

``GET /stats`` returns counters summed over all processes (whichever answers):
``received``; ``completed`` (a 200 body fully written, truncated ones included);
``failed`` (400, injected error, client gone); ``in_flight``/``peak_in_flight``
(handlers running, up to the last byte written); ``held`` (barrier waiters),
``released_waves``; ``generating``/``peak_generating``/``queued`` (latency
mode); ``stalled``, ``truncated``, ``errors_injected``, ``cancelled``,
``bad_requests``; ``bytes_out`` (200 body bytes); ``procs``, ``procs_ready``,
``mode`` and ``faults`` (seconds left per window). ``GET /health`` answers 200.
Every completions answer carries ``X-Router-Pid`` (the process that served it).

Processes: with ``--procs 1`` the main process serves. With ``--procs N > 1``
the main process only supervises N forked workers that listen on the same port
with SO_REUSEPORT; counters, barrier state and fault windows live in shared
memory created before the fork, updated under one lock. ``READY <port>`` is
printed on stdout once every worker listens. The supervisor does not serve so
that :meth:`RouterHandle.crash` can SIGKILL the workers, let the supervisor reap
them, then kill it: orphans would stay zombies (PID 1 here reaps none).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import functools
import http.client
import json
import math
import multiprocessing as mp
import multiprocessing.connection
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import struct
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from aiohttp import web

from faultload import aio, tokens
from faultload.procutil import tied_to_this_process

MODES = ("barrier", "latency", "immediate")
MAX_TOKENS = 2_000_000  # per choice
MAX_N = 1024
MAX_TOTAL_TOKENS = 8_000_000  # n * max_tokens, bounds one body to ~110 MB
MAX_FAULT_S = 86_400.0
MAX_PROCS = 64
LISTEN_BACKLOG = 4096
POLL_S = 0.005  # cross-process polling period (barrier, latency slots)
STALL_POLL_S = 0.02
SHUTDOWN_S = 1.0
CLIENT_MAX_SIZE = 64 << 20


# --------------------------------------------------------------------------- config


@dataclass(frozen=True)
class RouterConfig:
    """How the router answers; plain data (``dataclasses.asdict`` round-trips)."""

    mode: str = "latency"  # "barrier" | "latency" | "immediate"
    barrier: int = 0  # wave size N in barrier mode
    barrier_timeout_s: float = 60.0
    max_num_seqs: int = 256
    gen_seconds: float = 1.0
    procs: int = 1

    def validate(self) -> None:
        """Raise ValueError with one line naming the first bad field."""
        if self.mode not in MODES:
            _bad("mode", f"must be one of {', '.join(MODES)} (got {self.mode!r})")
        _check_int("barrier", self.barrier, 0, 1_000_000)
        if self.mode == "barrier" and self.barrier < 1:
            _bad("barrier", f"must be >= 1 in barrier mode (got {self.barrier})")
        _check_float("barrier_timeout_s", self.barrier_timeout_s, 0.0, MAX_FAULT_S, open_low=True)
        _check_int("max_num_seqs", self.max_num_seqs, 1, 1_000_000)
        _check_float("gen_seconds", self.gen_seconds, 0.0, 3600.0)
        _check_int("procs", self.procs, 1, MAX_PROCS)

    def to_argv(self) -> list[str]:
        """CLI flags that reproduce this config."""
        return [
            "--mode", self.mode,
            "--barrier", str(self.barrier),
            "--barrier-timeout", repr(float(self.barrier_timeout_s)),
            "--max-num-seqs", str(self.max_num_seqs),
            "--gen-seconds", repr(float(self.gen_seconds)),
            "--procs", str(self.procs),
        ]  # fmt: skip


def _bad(field: str, why: str) -> None:
    raise ValueError(f"RouterConfig.{field}: {why}")


def _check_int(field: str, value: Any, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        _bad(field, f"must be an int (got {value!r})")
    if not lo <= value <= hi:
        _bad(field, f"must be in [{lo}, {hi}] (got {value})")


def _check_float(field: str, value: Any, lo: float, hi: float, open_low: bool = False) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        _bad(field, f"must be a finite number (got {value!r})")
    if value < lo or value > hi or (open_low and value == lo):
        low = f"({lo}" if open_low else f"[{lo}"
        _bad(field, f"must be in {low}, {hi}] (got {value})")


# --------------------------------------------------------------------------- bodies


@functools.cache
def _token_table() -> np.ndarray:
    """Row i = token id i right-aligned in a fixed width plus ',' (one void item per row)."""
    width = len(str(tokens.VOCAB - 1))
    ids = np.arange(tokens.VOCAB, dtype=np.int64)
    rows = np.full((tokens.VOCAB, width + 1), ord(" "), dtype=np.uint8)
    rows[:, width] = ord(",")
    rest = ids.copy()
    for col in range(width - 1, -1, -1):
        digit = (rest % 10 + ord("0")).astype(np.uint8)
        keep = (ids >= 10 ** (width - 1 - col)) | (col == width - 1)
        rows[keep, col] = digit[keep]
        rest //= 10
    return np.ascontiguousarray(rows).view(f"V{width + 1}").reshape(-1)


@functools.cache
def _logprob_table() -> np.ndarray:
    """Row d = '-0.dddd,' as one uint64 (8 bytes), d in [0, LOGPROB_SCALE)."""
    scale = tokens.LOGPROB_SCALE
    assert scale == 10_000, "the table prints exactly four decimals"
    d = np.arange(scale, dtype=np.int64)
    rows = np.empty((scale, 8), dtype=np.uint8)
    rows[:, :3] = np.frombuffer(b"-0.", dtype=np.uint8)
    for col, div in zip(range(3, 7), (1000, 100, 10, 1)):
        rows[:, col] = (d // div % 10 + ord("0")).astype(np.uint8)
    rows[:, 7] = ord(",")
    return rows.view(np.uint64).reshape(-1)


def _without_last_byte(rows: np.ndarray) -> memoryview:
    """The gathered rows as bytes, minus the trailing comma (no copy)."""
    return memoryview(rows.view(np.uint8).reshape(-1))[:-1]


def _prompt_logprobs_json(nonce: int, prompt: list[int]) -> bytes:
    """vLLM-shaped prompt logprobs: null, then the prompt token's own entry per position."""
    items = ["null"]
    for i, tid in enumerate(prompt[1:], start=1):
        d = (7 * nonce + 13 * i) % tokens.LOGPROB_SCALE
        items.append(f'{{"{int(tid)}":{{"logprob":-{d / tokens.LOGPROB_SCALE:.4f},"rank":1,"decoded_token":""}}}}')
    return ("[" + ",".join(items) + "]").encode()


def completion_body(
    nonce: int,
    n: int,
    max_tokens: int,
    model: str = "",
    prompt: list[int] | None = None,
    prompt_logprobs: int | None = None,
) -> bytes:
    """The full vLLM /v1/completions JSON body for ``n`` samples of ``max_tokens`` each."""
    prompt_len = len(prompt) if prompt is not None else 3
    plp = _prompt_logprobs_json(nonce, prompt or []) if prompt_logprobs is not None and prompt else None
    head = b'{"id":"cmpl-%x","object":"text_completion","created":0,"model":%s,"choices":[' % (
        nonce,
        json.dumps(model).encode(),
    )
    parts: list[Any] = [head]
    tok_table, lp_table = _token_table(), _logprob_table()
    for j in range(n):
        toks = tok_table[tokens.output_tokens(nonce, j, max_tokens)]
        lps = lp_table[tokens.logprob_digits(nonce, j, max_tokens)]
        parts += [
            b'%s{"index":%d,"text":"","token_ids":[' % (b"," if j else b"", j),
            _without_last_byte(toks),
            b'],"logprobs":{"token_logprobs":[',
            _without_last_byte(lps),
            b']},"finish_reason":"length","stop_reason":null',
        ]
        if plp is not None:
            parts += [b',"prompt_logprobs":', plp]
        parts.append(b"}")
    completion = n * max_tokens
    parts.append(
        b'],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}'
        % (prompt_len, prompt_len + completion, completion)
    )
    return b"".join(parts)


@dataclass(frozen=True)
class _Job:
    nonce: int
    n: int
    max_tokens: int
    model: str
    prompt: list[int]
    prompt_logprobs: int | None


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def parse_job(raw: bytes) -> _Job | str:
    """The request's parameters, or a one-line reason for a 400."""
    try:
        payload = json.loads(raw)
    except ValueError as e:
        return f"invalid JSON: {e}"
    if not isinstance(payload, dict):
        return "body must be a JSON object"
    prompt = payload.get("prompt")
    if not isinstance(prompt, list) or not all(_is_int(t) for t in prompt[:3]):
        return "prompt must be a list of token ids"
    nonce = tokens.nonce_of(prompt)
    if nonce is None:
        return "not a faultload prompt (first token is not tokens.PROMPT_MARK)"
    n, max_tokens = payload.get("n", 1), payload.get("max_tokens", 16)
    if not _is_int(n) or not 1 <= n <= MAX_N:
        return f"n must be an int in [1, {MAX_N}] (got {n!r})"
    if not _is_int(max_tokens) or not 1 <= max_tokens <= MAX_TOKENS:
        return f"max_tokens must be an int in [1, {MAX_TOKENS}] (got {max_tokens!r})"
    if n * max_tokens > MAX_TOTAL_TOKENS:
        return f"n * max_tokens must be <= {MAX_TOTAL_TOKENS}"
    plp = payload.get("prompt_logprobs")
    if plp is not None and (not _is_int(plp) or plp < 0):
        return f"prompt_logprobs must be a non-negative int (got {plp!r})"
    model = payload.get("model", "")
    if not isinstance(model, str):
        return "model must be a string"
    return _Job(nonce, n, max_tokens, model, prompt, plp)


# --------------------------------------------------------------------------- shared state

# Integer slots in shared memory; the first group is reported by /stats under these names.
_STAT_INTS = (
    "received", "completed", "failed", "in_flight", "peak_in_flight", "held",
    "released_waves", "bytes_out", "generating", "peak_generating", "queued",
    "stalled", "truncated", "errors_injected", "cancelled", "bad_requests",
)  # fmt: skip
_INTS = _STAT_INTS + ("procs_ready", "errors_status")
_FLOATS = ("wave_started", "stall_until", "errors_until", "truncate_until")
_I = {name: i for i, name in enumerate(_INTS)}
_F = {name: i for i, name in enumerate(_FLOATS)}


class SharedState:
    """Counters, barrier state and fault windows in fork-inherited shared memory.

    Times are ``time.monotonic()`` values: CLOCK_MONOTONIC is system-wide, so
    every process compares them directly.
    """

    def __init__(self) -> None:
        ctx = mp.get_context("fork")
        self.lock = ctx.Lock()
        self.ints = ctx.RawArray(ctypes.c_int64, len(_INTS))
        self.floats = ctx.RawArray(ctypes.c_double, len(_FLOATS))

    def add(self, name: str, delta: int = 1) -> None:
        with self.lock:
            self.ints[_I[name]] += delta

    def arrive(self) -> None:
        """One more request received and in flight."""
        ints = self.ints
        with self.lock:
            ints[_I["received"]] += 1
            ints[_I["in_flight"]] += 1
            if ints[_I["in_flight"]] > ints[_I["peak_in_flight"]]:
                ints[_I["peak_in_flight"]] = ints[_I["in_flight"]]

    def depart(self, outcome: str, bytes_out: int) -> None:
        """A request left: outcome is 'completed' or 'failed'."""
        with self.lock:
            self.ints[_I["in_flight"]] -= 1
            self.ints[_I[outcome]] += 1
            self.ints[_I["bytes_out"]] += bytes_out

    def window_left(self, name: str) -> float:
        """Seconds left in a fault window (<= 0: inactive)."""
        return self.floats[_F[name]] - time.monotonic()

    def set_window(self, name: str, seconds: float) -> None:
        with self.lock:
            self.floats[_F[name]] = time.monotonic() + seconds if seconds > 0 else 0.0

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            ints = list(self.ints)
            floats = list(self.floats)
        now = time.monotonic()
        stats: dict[str, Any] = {name: ints[_I[name]] for name in _STAT_INTS}
        stats["procs_ready"] = ints[_I["procs_ready"]]
        stats["faults"] = {
            "stall_s": max(0.0, floats[_F["stall_until"]] - now),
            "errors_s": max(0.0, floats[_F["errors_until"]] - now),
            "errors_status": ints[_I["errors_status"]],
            "truncate_s": max(0.0, floats[_F["truncate_until"]] - now),
        }
        return stats


# --------------------------------------------------------------------------- gates


class Barrier:
    """Holds requests until a wave of ``size`` is held router-wide or the wave times out.

    Each process keeps one future per wave it has waiters in; a poller (only
    while there are local waiters) watches the shared wave number and the
    wave's age every POLL_S.
    """

    def __init__(self, shared: SharedState, size: int, timeout_s: float) -> None:
        self._s = shared
        self._size = size
        self._timeout_s = timeout_s
        self._waves: dict[int, asyncio.Future[None]] = {}
        self._waiters: dict[int, int] = {}
        self._poller: asyncio.Task[None] | None = None

    def _release_locked(self) -> None:
        ints = self._s.ints
        ints[_I["held"]] = 0
        ints[_I["released_waves"]] += 1
        self._s.floats[_F["wave_started"]] = 0.0

    def _join(self) -> int | None:
        """Join the current wave; None if this arrival completed (released) it."""
        s = self._s
        with s.lock:
            wave = s.ints[_I["released_waves"]]
            s.ints[_I["held"]] += 1
            if s.ints[_I["held"]] == 1:
                s.floats[_F["wave_started"]] = time.monotonic()
            if s.ints[_I["held"]] >= self._size:
                self._release_locked()
                return None
        return wave

    def _leave(self, wave: int) -> None:
        """A waiter gave up: leave the wave unless it was released meanwhile."""
        s = self._s
        with s.lock:
            if s.ints[_I["released_waves"]] == wave and s.ints[_I["held"]] > 0:
                s.ints[_I["held"]] -= 1
                if s.ints[_I["held"]] == 0:
                    s.floats[_F["wave_started"]] = 0.0

    async def wait(self) -> None:
        wave = self._join()
        if wave is None:
            self._wake()
            return
        fut = self._waves.get(wave)
        if fut is None:
            fut = self._waves[wave] = asyncio.get_running_loop().create_future()
        self._waiters[wave] = self._waiters.get(wave, 0) + 1
        self._ensure_poller()
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            self._leave(wave)
            raise
        finally:
            self._waiters[wave] -= 1
            if self._waiters[wave] == 0:
                del self._waiters[wave]
                self._waves.pop(wave).cancel()  # no-op when already released

    def _wake(self) -> None:
        current = self._s.ints[_I["released_waves"]]
        for wave, fut in self._waves.items():
            if wave < current and not fut.done():
                fut.set_result(None)

    def _check_timeout(self) -> None:
        s = self._s
        started = s.floats[_F["wave_started"]]
        if started <= 0.0 or time.monotonic() - started < self._timeout_s:
            return
        with s.lock:
            started = s.floats[_F["wave_started"]]
            if started > 0.0 and time.monotonic() - started >= self._timeout_s:
                self._release_locked()

    def _ensure_poller(self) -> None:
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll())

    async def _poll(self) -> None:
        # Runs only while some local wave is unreleased; each wave ends within its timeout.
        while any(not f.done() for f in self._waves.values()):
            await asyncio.sleep(POLL_S)
            self._check_timeout()
            self._wake()


class SlotPool:
    """At most ``size`` generations at once router-wide; local waiters are FIFO."""

    def __init__(self, shared: SharedState, size: int, poll: bool) -> None:
        self._s = shared
        self._size = size
        self._poll_other_procs = poll
        self._queue: deque[asyncio.Future[None]] = deque()
        self._waiting = 0
        self._poller: asyncio.Task[None] | None = None

    def _take(self, want: int) -> int:
        ints = self._s.ints
        with self._s.lock:
            got = max(0, min(want, self._size - ints[_I["generating"]]))
            ints[_I["generating"]] += got
            if ints[_I["generating"]] > ints[_I["peak_generating"]]:
                ints[_I["peak_generating"]] = ints[_I["generating"]]
        return got

    async def acquire(self) -> None:
        if self._waiting == 0 and self._take(1) == 1:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(fut)
        self._waiting += 1
        self._s.add("queued", 1)
        if self._poll_other_procs:
            self._ensure_poller()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # granted, then cancelled before it ran
            else:
                self._waiting -= 1
                self._s.add("queued", -1)
            raise

    def release(self) -> None:
        self._s.add("generating", -1)
        self._dispatch()

    def _dispatch(self) -> None:
        if self._waiting == 0:
            return
        got = self._take(self._waiting)
        granted = 0
        while granted < got and self._queue:
            fut = self._queue.popleft()
            if not fut.cancelled():  # a cancelled one is counted off when its task resumes
                fut.set_result(None)
                self._waiting -= 1
                granted += 1
        while self._queue and self._queue[0].cancelled():
            self._queue.popleft()
        with self._s.lock:
            self._s.ints[_I["generating"]] -= got - granted  # slots taken for waiters that left
            self._s.ints[_I["queued"]] -= granted

    def _ensure_poller(self) -> None:
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll())

    async def _poll(self) -> None:
        # Slots freed by other processes are only seen by polling; ends when no one waits.
        while self._waiting:
            await asyncio.sleep(POLL_S)
            self._dispatch()


# --------------------------------------------------------------------------- HTTP app


def _error_json(status: int, message: str) -> bytes:
    kind = "BadRequestError" if status < 500 else "ServiceUnavailableError"
    return json.dumps({"object": "error", "message": message, "type": kind, "param": None, "code": status}).encode()


COMPLETION_RECORD = np.dtype([("nonce", "<i8"), ("epoch", "<f8")])


class CompletionLog:
    """Appends (nonce, wall-clock time) for every completion this process answered.

    One file per process (``completions-PID.bin`` in ``directory``), written
    unbuffered so a crashed router loses nothing. The invariants use it to tell
    a result the server could have delivered before the client dropped its
    poll from one that did not exist yet (``no_lost_results``). 16 bytes per
    completion; a ``write`` per completion is ~2 µs against ~300 µs of router
    CPU per request.
    """

    def __init__(self, directory: str | None) -> None:
        self._directory = directory
        self._fd = -1
        self._pid = -1

    def record(self, nonce: int) -> None:
        if not self._directory:
            return
        if self._pid != os.getpid():  # forked workers open their own file
            self._pid = os.getpid()
            path = os.path.join(self._directory, f"completions-{self._pid}.bin")
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        os.write(self._fd, struct.pack("<qd", nonce, time.time()))


def read_completions(directory: str | Path, since_epoch: float = 0.0) -> dict[int, float]:
    """nonce -> first completion time (epoch seconds) at or after ``since_epoch``, over all processes."""
    first: dict[int, float] = {}
    for path in sorted(Path(directory).glob("completions-*.bin")):
        raw = path.read_bytes()
        records = np.frombuffer(raw[: len(raw) - len(raw) % COMPLETION_RECORD.itemsize], dtype=COMPLETION_RECORD)
        records = records[records["epoch"] >= since_epoch]
        for nonce, epoch in zip(records["nonce"].tolist(), records["epoch"].tolist()):
            if epoch < first.get(nonce, math.inf):
                first[nonce] = epoch
    return first


class RouterApp:
    """Per-process request handling over the shared state."""

    def __init__(self, config: RouterConfig, shared: SharedState, completions: CompletionLog | None = None) -> None:
        self._config = config
        self._s = shared
        self._completions = completions or CompletionLog(None)
        self._barrier = Barrier(shared, config.barrier, config.barrier_timeout_s) if config.mode == "barrier" else None
        self._slots = SlotPool(shared, config.max_num_seqs, config.procs > 1) if config.mode == "latency" else None
        self._headers = {"X-Router-Pid": str(os.getpid())}  # which process answered
        self._stall_over: asyncio.Event | None = None  # set when the current stall window ends

    def build(self) -> web.Application:
        app = web.Application(client_max_size=CLIENT_MAX_SIZE)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_get("/health", self.health)
        app.router.add_get("/stats", self.stats)
        app.router.add_post("/control/{fault}", self.control)
        return app

    async def health(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok")

    async def stats(self, request: web.Request) -> web.StreamResponse:
        snap = self._s.snapshot()
        snap["procs"] = self._config.procs
        snap["mode"] = self._config.mode
        return web.json_response(snap)

    async def control(self, request: web.Request) -> web.StreamResponse:
        fault = request.match_info["fault"]
        try:
            raw = await request.read()
            body = json.loads(raw) if raw.strip() else {}
            if not isinstance(body, dict):
                raise ValueError("body must be a JSON object")
            self._apply_fault(fault, body)
        except KeyError:
            return web.json_response({"error": f"unknown fault {fault!r}"}, status=404)
        except ValueError as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response(self._s.snapshot()["faults"])

    def _apply_fault(self, fault: str, body: dict[str, Any]) -> None:
        if fault == "reset":
            for name in ("stall_until", "errors_until", "truncate_until"):
                self._s.set_window(name, 0.0)
            return
        if fault not in ("stall", "errors", "truncate"):
            raise KeyError(fault)
        seconds = body.get("seconds")
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 <= seconds <= MAX_FAULT_S:
            raise ValueError(f"seconds must be a number in [0, {MAX_FAULT_S:g}] (got {seconds!r})")
        if fault == "errors":
            status = body.get("status", 503)
            if not _is_int(status) or not 400 <= status <= 599:
                raise ValueError(f"status must be an int in [400, 599] (got {status!r})")
            with self._s.lock:
                self._s.ints[_I["errors_status"]] = status
        self._s.set_window(f"{fault}_until", float(seconds))

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """Answer one sample request; in_flight covers everything up to the last byte written."""
        s = self._s
        s.arrive()
        outcome, sent = "failed", 0
        try:
            resp = await self._answer(request)
            try:
                await resp.prepare(request)
                await resp.write_eof()
            except ConnectionError:
                return resp
            if resp.status == 200:
                outcome, sent = "completed", resp.content_length or 0
                nonce = resp.get("nonce")
                if nonce is not None:
                    self._completions.record(nonce)
            return resp
        except asyncio.CancelledError:
            s.add("cancelled", 1)
            raise
        finally:
            s.depart(outcome, sent)

    def _injected_error(self) -> web.Response | None:
        if self._s.window_left("errors_until") <= 0:
            return None
        status = int(self._s.ints[_I["errors_status"]]) or 503
        self._s.add("errors_injected", 1)
        body = _error_json(status, "injected fault")
        return web.Response(status=status, body=body, content_type="application/json", headers=self._headers)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        early = self._injected_error()
        if early is not None:
            return early
        job = parse_job(await request.read())
        if isinstance(job, str):
            self._s.add("bad_requests", 1)
            body = _error_json(400, job)
            return web.Response(status=400, body=body, content_type="application/json", headers=self._headers)
        await self._mode_gate()
        await self._stall_gate()
        late = self._injected_error()
        if late is not None:
            return late
        body = completion_body(job.nonce, job.n, job.max_tokens, job.model, job.prompt, job.prompt_logprobs)
        if self._s.window_left("truncate_until") > 0:
            body = body[: len(body) // 2]
            self._s.add("truncated", 1)
        resp = web.Response(body=body, content_type="application/json", headers=self._headers)
        resp["nonce"] = job.nonce
        return resp

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


# --------------------------------------------------------------------------- processes


def raise_nofile_limit() -> None:
    """Soft RLIMIT_NOFILE to the hard limit: one process may hold ~10k connections."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _bind_socket(host: str, port: int, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


async def _serve(config: RouterConfig, shared: SharedState, sock: socket.socket, on_ready: Any,
                 completions_dir: str | None = None) -> None:
    """Serve on ``sock`` until SIGTERM/SIGINT."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = web.AppRunner(
        RouterApp(config, shared, CompletionLog(completions_dir)).build(),
        access_log=None,
        handler_cancellation=True,  # a client that hangs up leaves its barrier wave / queue
        shutdown_timeout=SHUTDOWN_S,
    )
    await runner.setup()
    try:
        site = web.SockSite(runner, sock, backlog=LISTEN_BACKLOG, shutdown_timeout=SHUTDOWN_S)
        await site.start()
        on_ready()
        await stop.wait()
    finally:
        await runner.cleanup()


def _set_parent_death_signal() -> None:
    """Workers get SIGTERM when the supervisor dies, so none outlives it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _worker_main(config: RouterConfig, shared: SharedState, host: str, port: int, reservation: socket.socket,
                 completions_dir: str | None = None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _set_parent_death_signal()
    reservation.close()
    raise_nofile_limit()
    sock = _bind_socket(host, port, reuse_port=True)
    aio.run(_serve(config, shared, sock, lambda: shared.add("procs_ready", 1), completions_dir))


def _announce(port: int) -> None:
    sys.stdout.write(f"READY {port}\n")
    sys.stdout.flush()


def _supervise(config: RouterConfig, shared: SharedState, host: str, port: int,
               completions_dir: str | None = None) -> int:
    """Fork ``config.procs`` workers on one SO_REUSEPORT port; reap them; stop them on a signal."""
    stopping = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    reservation = _bind_socket(host, port, reuse_port=True)  # holds the port; never listens
    port = reservation.getsockname()[1]
    ctx = mp.get_context("fork")
    workers = [
        ctx.Process(target=_worker_main, args=(config, shared, host, port, reservation, completions_dir), name=f"router-{i}")
        for i in range(config.procs)
    ]
    for w in workers:
        w.start()
    try:
        if not _wait_workers_ready(shared, workers, lambda: stopping):
            return 1
        reservation.close()
        _announce(port)
        while not stopping and any(w.is_alive() for w in workers):
            mp.connection.wait([w.sentinel for w in workers if w.is_alive()], timeout=0.2)
        return 0 if stopping else 1
    finally:
        reservation.close()
        _stop_workers(workers)


def _wait_workers_ready(shared: SharedState, workers: list[Any], stopping: Any) -> bool:
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline and not stopping():
        if shared.ints[_I["procs_ready"]] >= len(workers):
            return True
        dead = [w for w in workers if not w.is_alive()]
        if dead:
            print(f"faultload.router: worker {dead[0].name} exited with {dead[0].exitcode}", file=sys.stderr)
            return False
        time.sleep(0.01)
    print("faultload.router: workers did not become ready", file=sys.stderr)
    return False


def _stop_workers(workers: list[Any]) -> None:
    for w in workers:
        if w.is_alive():
            w.terminate()
    deadline = time.monotonic() + SHUTDOWN_S + 3.0
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
    for w in workers:
        if w.is_alive():
            w.kill()
            w.join(2.0)


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        sys.stderr.write(f"faultload.router: error: {message}\n")
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="python -m faultload.router", description="Fake vLLM router for faultload.")
    d = RouterConfig()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--mode", default=d.mode, choices=MODES)
    p.add_argument("--barrier", type=int, default=d.barrier, help="wave size in barrier mode")
    p.add_argument("--barrier-timeout", type=float, default=d.barrier_timeout_s, help="seconds")
    p.add_argument("--max-num-seqs", type=int, default=d.max_num_seqs)
    p.add_argument("--gen-seconds", type=float, default=d.gen_seconds)
    p.add_argument("--procs", type=int, default=d.procs)
    p.add_argument("--completions-dir", default=None, metavar="DIR",
                   help="append (nonce, time) of every completion to DIR/completions-PID.bin")
    p.add_argument("--bench", type=int, metavar="T", help="time body building for max_tokens=T and exit")
    return p


def _bench(max_tokens: int) -> int:
    completion_body(1, 1, 16)  # build the tables
    reps = 5
    t0 = time.perf_counter()
    for i in range(reps):
        body = completion_body(i, 1, max_tokens)
    dt = (time.perf_counter() - t0) / reps
    print(f"T={max_tokens}: {len(body)} bytes in {dt * 1e3:.1f} ms = {len(body) / dt / 1e6:.0f} MB/s")
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI entry: serve until SIGTERM/SIGINT; exit 2 on bad flags."""
    args = _parser().parse_args(argv)
    if args.bench is not None:
        return _bench(args.bench)
    config = RouterConfig(
        mode=args.mode,
        barrier=args.barrier,
        barrier_timeout_s=args.barrier_timeout,
        max_num_seqs=args.max_num_seqs,
        gen_seconds=args.gen_seconds,
        procs=args.procs,
    )
    try:
        config.validate()
        if not 0 <= args.port <= 65535:
            raise ValueError(f"--port: must be in [0, 65535] (got {args.port})")
    except ValueError as e:
        sys.stderr.write(f"faultload.router: error: {e}\n")
        return 2
    raise_nofile_limit()
    shared = SharedState()
    try:
        if config.procs > 1:
            return _supervise(config, shared, args.host, args.port, args.completions_dir)
        sock = _bind_socket(args.host, args.port, reuse_port=False)
        port = sock.getsockname()[1]

        def on_ready() -> None:
            shared.add("procs_ready", 1)
            _announce(port)

        aio.run(_serve(config, shared, sock, on_ready, args.completions_dir))
        return 0
    except OSError as e:
        sys.stderr.write(f"faultload.router: error: cannot serve on {args.host}:{args.port}: {e}\n")
        return 1


# --------------------------------------------------------------------------- handle


def _process_gone(pid: int) -> bool:
    """True if ``pid`` no longer runs (a zombie counts as gone: it holds no socket)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """Poll until all ``pids`` are gone or the timeout passes; returns the ones left."""
    deadline = time.monotonic() + timeout_s
    left = [p for p in pids if not _process_gone(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.01)
        left = [p for p in left if not _process_gone(p)]
    return left


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


class RouterHandle:
    """A running router subprocess (its own process group) and its control calls."""

    def __init__(self, config: RouterConfig, host: str) -> None:
        self.config = config
        self.host = host
        self.port = 0
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._workers: list[int] = []
        self._log_dir = Path(tempfile.mkdtemp(prefix="faultload-router-"))

    # -- lifecycle

    @property
    def pid(self) -> int:
        """Main (supervisor or sole server) pid of the current incarnation."""
        return self._proc.pid if self._proc is not None else -1

    def _spawn(self, port: int, ready_timeout_s: float) -> None:
        root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        cmd = [sys.executable, "-m", "faultload.router", "--host", self.host, "--port", str(port),
               "--completions-dir", str(self._log_dir)]
        self._log_dir.mkdir(parents=True, exist_ok=True)
        out_path, err_path = self._log_dir / "stdout.log", self._log_dir / "stderr.log"
        with open(out_path, "wb") as out, open(err_path, "ab") as err:
            self._proc = subprocess.Popen(
                cmd + self.config.to_argv(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                env=env,
                cwd=root,
                preexec_fn=tied_to_this_process(signal.SIGTERM),
            )
        try:
            self.port = self._wait_ready_line(out_path, ready_timeout_s)
            self.url = f"http://{self.host}:{self.port}"
            self._wait_health(ready_timeout_s)
        except RuntimeError:
            self._kill_all()
            raise RuntimeError(f"router failed to start: {self.stderr_tail()}") from None
        self._workers = self._child_pids()

    def _wait_ready_line(self, out_path: Path, timeout_s: float) -> int:
        assert self._proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            m = re.search(rb"READY (\d+)", out_path.read_bytes())
            if m:
                return int(m.group(1))
            if self._proc.poll() is not None:
                raise RuntimeError("exited")
            time.sleep(0.02)
        raise RuntimeError("timeout")

    def _wait_health(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if self._request("GET", "/health", timeout_s=1.0)[0] == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.02)
        raise RuntimeError("no /health")

    def _child_pids(self) -> list[int]:
        try:
            return [c.pid for c in psutil.Process(self.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def pids(self) -> list[int]:
        """All live router process pids (main first), e.g. for CPU accounting."""
        if self._proc is None or self._proc.poll() is not None:
            return [p for p in self._workers if not _process_gone(p)]
        return [self.pid] + [p for p in self._child_pids() if not _process_gone(p)]

    def stderr_tail(self, lines: int = 10) -> str:
        """Last lines of the router's stderr (all incarnations), joined by ' | '."""
        try:
            text = (self._log_dir / "stderr.log").read_bytes().decode(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def _kill_all(self) -> None:
        """SIGKILL workers first (the supervisor reaps them: no orphans), then the group."""
        if self._proc is None:
            return
        workers = self._child_pids() or self._workers
        for pid in workers:
            _kill(pid, signal.SIGKILL)
        _wait_gone(workers, 5.0)
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self._proc.wait(5.0)
        except subprocess.TimeoutExpired:
            pass

    def crash(self) -> None:
        """SIGKILL every router process; the port stops answering until :meth:`restart`."""
        self._kill_all()

    def reconfigure(self, config: RouterConfig, ready_timeout_s: float = 20.0) -> None:
        """Restart on the same port with ``config`` (a new mode, barrier or latency)."""
        config.validate()
        self.config = config
        self.restart(ready_timeout_s)

    def restart(self, ready_timeout_s: float = 20.0) -> None:
        """Start again on the same port and config (stopping a live one first); wait until ready."""
        self.stop(remove_logs=False)
        self._spawn(self.port, ready_timeout_s)

    def stop(self, remove_logs: bool = True) -> None:
        """SIGTERM, then SIGKILL after a few seconds; waits for exit. Idempotent."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            workers = self._child_pids()
            _kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(SHUTDOWN_S + 5.0)
            except subprocess.TimeoutExpired:
                self._kill_all()
            _wait_gone(workers, 2.0)
        if proc is not None and proc.poll() is None:
            self._kill_all()
        if remove_logs:
            shutil.rmtree(self._log_dir, ignore_errors=True)

    def __enter__(self) -> RouterHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- control

    def _request(self, method: str, path: str, body: Any = None, timeout_s: float = 5.0) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout_s)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def _control(self, path: str, body: Any = None) -> dict[str, Any]:
        status, raw = self._request("POST", path, body)
        if status != 200:
            raise RuntimeError(f"router {path} answered {status}: {raw[:200].decode(errors='replace')}")
        return json.loads(raw)

    def stats(self, timeout_s: float = 5.0) -> dict[str, Any]:
        """GET /stats: counters summed over all router processes."""
        status, raw = self._request("GET", "/stats", timeout_s=timeout_s)
        if status != 200:
            raise RuntimeError(f"router /stats answered {status}")
        return json.loads(raw)

    def completions(self, since_epoch: float = 0.0) -> dict[int, float]:
        """nonce -> first completion (epoch seconds) since ``since_epoch``, over every incarnation."""
        return read_completions(self._log_dir, since_epoch)

    def stall(self, seconds: float) -> None:
        self._control("/control/stall", {"seconds": seconds})

    def errors(self, seconds: float, status: int = 503) -> None:
        self._control("/control/errors", {"seconds": seconds, "status": status})

    def truncate(self, seconds: float) -> None:
        self._control("/control/truncate", {"seconds": seconds})

    def reset_faults(self) -> None:
        self._control("/control/reset")


def start_router(
    config: RouterConfig, host: str = "127.0.0.1", port: int = 0, ready_timeout_s: float = 20.0
) -> RouterHandle:
    """Launch ``python -m faultload.router`` in its own session; return once /health answers.

    Raises ValueError for a bad config and RuntimeError("router failed to start: ...")
    otherwise, leaving no process behind.
    """
    config.validate()
    handle = RouterHandle(config, host)
    try:
        handle._spawn(port, ready_timeout_s)
    except BaseException:
        handle.stop()
        raise
    return handle


if __name__ == "__main__":
    sys.exit(main())
