"""Watching a trial's load as it runs: the server log as it grows, the monitor's samples fed to the watchdog (and
the watchdog's limits for the trial), and the bounded wait for the load to end (early when the watchdog calls a
collapse)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Callable

from faultload.client.workers import WorkerPool
from faultload.model.sdk import SDK_BACKOFF_CAP_S, SDK_REQUEST_TIMEOUT_S
from faultload.model.trial import TrialConfig
from faultload.model.watchdog import FaultWindow, WatchdogLimits
from faultload.record.collapse import FD_EXHAUSTION
from faultload.record.samples import SAMPLE_FIELDS
from faultload.run.monitor import Monitor
from faultload.run.watchdog import Watchdog
from faultload.targets.server import ServerHandle

# progress(trial seconds, live counters, latest monitor sample)
Progress = Callable[[float, dict[str, int], tuple], None]
# The faults applied so far and when each was removed (the fault runner's records), as the watchdog takes them.
FaultWindows = Callable[[], tuple[FaultWindow, ...]]


class LogFollower:
    """Reads the server log as it grows and turns fatal lines into watchdog signals."""

    FD_EXHAUSTION_LINE = "Too many open files"

    def __init__(self, path: Path | None) -> None:
        self.path = path
        # A reused stack's log holds earlier trials too: this trial's part starts here.
        self.start = path.stat().st_size if path is not None and path.exists() else 0
        self.offset = self.start
        self.fd_lines = 0

    def text(self) -> str:
        """This trial's part of the log."""
        if self.path is None or not self.path.exists():
            return ""
        with open(self.path, "rb") as fh:
            fh.seek(self.start)
            return fh.read().decode(errors="replace")

    def poll(self, watchdog: Watchdog, t: float) -> None:
        if self.path is None or not self.path.exists():
            return
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read(8 << 20)
        self.offset += len(chunk)
        count = chunk.count(self.FD_EXHAUSTION_LINE.encode())
        if count and not self.fd_lines:
            watchdog.observe_log(FD_EXHAUSTION, t, f"server log: {self.FD_EXHAUSTION_LINE!r} first seen by t={t:.1f}s")
        self.fd_lines += count


def feed_watchdog(
    watchdog: Watchdog, monitor: Monitor, fed: list[int], alive: bool, faults: tuple[FaultWindow, ...] = ()
) -> None:
    """The monitor's new samples and probes, after the faults in force so far (each sample is judged with them)."""
    watchdog.observe_faults(faults)
    rows, probes = monitor.rows, monitor.probes
    for row in rows[fed[0] : len(rows)]:
        sample = dict(zip(SAMPLE_FIELDS, row))
        progress = (
            sample["client_completed"],
            sample["client_failed"],
            sample["router_received"],
            sample["router_completed"],
        )
        watchdog.observe_sample(
            sample["t"],
            int(sample["fds"]),
            int(sample["accept_queue"]),
            int(sample["listen_backlog"]),
            int(sample["listen_overflows"]),
            int(sample["client_in_flight"]),
            progress,
            alive,
        )
    fed[0] = len(rows)
    for t, latency, ok in probes[fed[1] : len(probes)]:
        watchdog.observe_probe(t, latency, ok)
    fed[1] = len(probes)


def wait_load(
    pool: WorkerPool,
    deadline: float,
    progress: Progress | None,
    monitor: Monitor,
    every_s: float,
    watchdog: Watchdog,
    server: ServerHandle,
    log: LogFollower,
    early_stop: bool,
    faults: FaultWindows = tuple,
    harness_failed: Callable[[], bool] = lambda: False,
) -> bool:
    """Wait for the load to finish; True if the watchdog stopped it early.

    ``faults()``: the faults injected so far, fed to the watchdog each turn (a
    partition and a paused server are silent by design, not collapsed).
    ``harness_failed()`` true (a fault the injector could not heal) ends the
    wait at once: what follows would be no test of the server."""
    next_report = time.monotonic() + every_s
    next_log = time.monotonic()
    fed = [0, 0]
    while not pool.finished() and time.monotonic() < deadline and not harness_failed():
        pool.poll(0.1)
        now = time.monotonic()
        feed_watchdog(watchdog, monitor, fed, server.alive(), faults())
        if now >= next_log:
            log.poll(watchdog, now - monitor.t0)
            next_log = now + 1.0
        if early_stop and watchdog.should_stop(now - monitor.t0):
            return True
        if progress is not None and now >= next_report:
            next_report += every_s
            progress(now - monitor.t0, pool.live(), monitor.latest)
    return False


def watchdog_limits(config: TrialConfig) -> WatchdogLimits:
    """The configured limits, with no_progress never shorter than what the trial holds still by design.

    A barrier router holds requests (nothing completes) for up to its barrier
    timeout, a latency router for its generation time, and a client whose
    first polls are delayed (or re-polls after an abandoned one) sends nothing
    for that long: idleness the trial asked for is not a collapse.
    """
    limits, shape = config.watchdog, config.shape
    expected_idle = config.router.gen_seconds
    if config.router.mode == "barrier":
        expected_idle = max(expected_idle, config.router.barrier_timeout_s)
    for polls in (shape.delay_polls, shape.abandon_polls):
        if polls.fraction > 0:
            expected_idle = max(expected_idle, shape.scaled(polls.after_s))
    window = max(limits.no_progress_window_s, expected_idle + 10.0)
    return dataclasses.replace(limits, no_progress_window_s=window)


def reconnect_s(config: TrialConfig) -> float:
    """How long a client may stay quiet after a fault heals, in trial seconds: its longest HTTP timeout
    (a request whose bytes the fault dropped) and then its backoff cap (the sleep it was in).

    The SDK's connection-error backoff (``min(2**n, 30)`` s) is not scaled by
    the time scale; its HTTP timeouts and all the raw client's timers are.
    """
    shape = config.shape
    timeout = shape.scaled(max(shape.policy.poll_timeout_s, SDK_REQUEST_TIMEOUT_S))
    backoff = SDK_BACKOFF_CAP_S if shape.client == "sdk" else shape.scaled(shape.policy.backoff_cap_s)
    return timeout + backoff
