"""State every router process shares: counters, barrier, latency slots, fault windows.

Lives in fork-inherited shared memory created before the workers fork and is
updated under one lock; :class:`Barrier` and :class:`SlotPool` are the
per-process asyncio gates over it (modes ``barrier`` and ``latency``).
"""

from __future__ import annotations

import asyncio
import ctypes
import multiprocessing as mp
import time
from collections import deque
from typing import Any

from faultload.model.faults import ROUTER_TIMED_KINDS

POLL_S = 0.005  # cross-process polling period (barrier, latency slots)

_STAT_INTS = (
    "received", "completed", "failed", "in_flight", "peak_in_flight", "held",
    "released_waves", "bytes_out", "generating", "peak_generating", "queued",
    "stalled", "truncated", "errors_injected", "cancelled", "bad_requests",
)  # fmt: skip
_INTS = _STAT_INTS + ("procs_ready", "errors_status")
# one window per timed router kind (model.fault_kinds): "<kind>_until", its end as a monotonic time
_FLOATS = ("wave_started", *(f"{kind}_until" for kind in sorted(ROUTER_TIMED_KINDS)))
INT_INDEX = {name: i for i, name in enumerate(_INTS)}
FLOAT_INDEX = {name: i for i, name in enumerate(_FLOATS)}


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
            self.ints[INT_INDEX[name]] += delta

    def arrive(self) -> None:
        """One more request received and in flight."""
        ints = self.ints
        with self.lock:
            ints[INT_INDEX["received"]] += 1
            ints[INT_INDEX["in_flight"]] += 1
            if ints[INT_INDEX["in_flight"]] > ints[INT_INDEX["peak_in_flight"]]:
                ints[INT_INDEX["peak_in_flight"]] = ints[INT_INDEX["in_flight"]]

    def depart(self, outcome: str, bytes_out: int) -> None:
        """A request left: outcome is 'completed' or 'failed'."""
        with self.lock:
            self.ints[INT_INDEX["in_flight"]] -= 1
            self.ints[INT_INDEX[outcome]] += 1
            self.ints[INT_INDEX["bytes_out"]] += bytes_out

    def window_left(self, name: str) -> float:
        """Seconds left in a fault window (<= 0: inactive)."""
        return self.floats[FLOAT_INDEX[name]] - time.monotonic()

    def set_window(self, name: str, seconds: float, until: float | None = None) -> None:
        """Open a window of ``seconds`` from now, ending no later than ``until`` (the caller's monotonic deadline:
        a request that waited in a paused router's socket ends when it was meant to, or does nothing)."""
        end = time.monotonic() + seconds
        if until is not None:
            end = min(end, until)
        with self.lock:
            self.floats[FLOAT_INDEX[name]] = end if seconds > 0 and end > time.monotonic() else 0.0

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            ints = list(self.ints)
            floats = list(self.floats)
        now = time.monotonic()
        stats: dict[str, Any] = {name: ints[INT_INDEX[name]] for name in _STAT_INTS}
        stats["procs_ready"] = ints[INT_INDEX["procs_ready"]]
        windows = {f"{kind}_s": max(0.0, floats[FLOAT_INDEX[f"{kind}_until"]] - now) for kind in ROUTER_TIMED_KINDS}
        stats["faults"] = {**windows, "errors_status": ints[INT_INDEX["errors_status"]]}
        return stats


class Barrier:
    """Holds requests until a wave of ``size`` is held router-wide or the wave times out.

    Each process keeps, per wave it has waiters in, one future per waiter (a
    waiter that leaves cancels only its own; ``asyncio.shield`` over one shared
    future cost ~9% of the router's CPU in a 4,096 wave); a poller (only while
    there are local waiters) watches the shared wave number and the wave's age
    every POLL_S.
    """

    def __init__(self, shared: SharedState, size: int, timeout_s: float) -> None:
        self._s = shared
        self._size = size
        self._timeout_s = timeout_s
        self._waves: dict[int, set[asyncio.Future[None]]] = {}
        self._poller: asyncio.Task[None] | None = None

    def _release_locked(self) -> None:
        ints = self._s.ints
        ints[INT_INDEX["held"]] = 0
        ints[INT_INDEX["released_waves"]] += 1
        self._s.floats[FLOAT_INDEX["wave_started"]] = 0.0

    def _join(self) -> int | None:
        """Join the current wave; None if this arrival completed (released) it."""
        s = self._s
        with s.lock:
            wave = s.ints[INT_INDEX["released_waves"]]
            s.ints[INT_INDEX["held"]] += 1
            if s.ints[INT_INDEX["held"]] == 1:
                s.floats[FLOAT_INDEX["wave_started"]] = time.monotonic()
            if s.ints[INT_INDEX["held"]] >= self._size:
                self._release_locked()
                return None
        return wave

    def _leave(self, wave: int) -> None:
        """A waiter gave up: leave the wave unless it was released meanwhile."""
        s = self._s
        with s.lock:
            if s.ints[INT_INDEX["released_waves"]] == wave and s.ints[INT_INDEX["held"]] > 0:
                s.ints[INT_INDEX["held"]] -= 1
                if s.ints[INT_INDEX["held"]] == 0:
                    s.floats[FLOAT_INDEX["wave_started"]] = 0.0

    async def wait(self) -> None:
        wave = self._join()
        if wave is None:
            self._wake()
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._waves.setdefault(wave, set())
        waiters.add(fut)
        self._ensure_poller()
        try:
            await fut
        except asyncio.CancelledError:
            waiters.discard(fut)
            if not waiters and self._waves.get(wave) is waiters:
                del self._waves[wave]
            self._leave(wave)
            raise

    def _wake(self) -> None:
        current = self._s.ints[INT_INDEX["released_waves"]]
        for wave in [w for w in self._waves if w < current]:
            for fut in self._waves.pop(wave):
                if not fut.done():
                    fut.set_result(None)

    def _check_timeout(self) -> None:
        s = self._s
        started = s.floats[FLOAT_INDEX["wave_started"]]
        if started <= 0.0 or time.monotonic() - started < self._timeout_s:
            return
        with s.lock:
            started = s.floats[FLOAT_INDEX["wave_started"]]
            if started > 0.0 and time.monotonic() - started >= self._timeout_s:
                self._release_locked()

    def _ensure_poller(self) -> None:
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll())

    async def _poll(self) -> None:
        # Runs only while some local wave is unreleased; each wave ends within its timeout.
        while self._waves:
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
            got = max(0, min(want, self._size - ints[INT_INDEX["generating"]]))
            ints[INT_INDEX["generating"]] += got
            if ints[INT_INDEX["generating"]] > ints[INT_INDEX["peak_generating"]]:
                ints[INT_INDEX["peak_generating"]] = ints[INT_INDEX["generating"]]
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
            self._s.ints[INT_INDEX["generating"]] -= got - granted  # slots taken for waiters that left
            self._s.ints[INT_INDEX["queued"]] -= granted

    def _ensure_poller(self) -> None:
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll())

    async def _poll(self) -> None:
        # Slots freed by other processes are only seen by polling; ends when no one waits.
        while self._waiting:
            await asyncio.sleep(POLL_S)
            self._dispatch()
