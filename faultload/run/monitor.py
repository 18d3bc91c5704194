"""Watch the server under test while a trial runs.

Two threads, so a slow ``/healthz`` never delays the process samples:
- the sampler reads the server process's RSS, open fds and CPU (psutil), the
  router's ``/stats`` and the load workers' live counters, every ``interval_s``;
- the prober times ``GET /api/v1/healthz`` straight to the server (not through
  the edge proxy), so its latency is the server's event loop, not the faults.
  Its timeout (10 s) is well above any latency budget, so a slow answer is
  measured as slow rather than cut off at the timeout and counted as failed.

Samples stay in memory as small tuples (a 10-minute trial at 2 Hz is ~1,200
rows) and are returned as numpy columns.
"""

from __future__ import annotations

import ssl
import threading
import time
from typing import Callable, Union

import numpy as np
import psutil

from faultload.host.network import http_get_json
from faultload.record.samples import SAMPLE_FIELDS, MonitorSamples, ProcessSnapshot
from faultload.run import kernel


class CpuLedger:
    """The last CPU seconds seen of each process of a server's tree, so the tree's total never falls.

    A tree's processes come and go (Ray starts and ends workers as it schedules tasks); summing only the
    living ones drops every ended worker's CPU, and a trial's server CPU read negative (-53 s over a
    132 s trial of a Ray server). An ended process counts at its last sample: low by at most one sampling
    period of its CPU."""

    def __init__(self) -> None:
        self._last: dict[tuple[int, float], float] = {}  # (pid, start time) -> CPU seconds

    def record(self, proc: psutil.Process, cpu_s: float) -> None:
        try:
            self._last[(proc.pid, proc.create_time())] = cpu_s
        except (psutil.Error, OSError):  # gone between its CPU read and now: its last read stands
            pass

    def total(self) -> float:
        return sum(self._last.values())


def snapshot(pid: int | None, tree: bool = False, ledger: CpuLedger | None = None) -> ProcessSnapshot | None:
    """RSS, open fds and CPU seconds of ``pid`` (with ``tree``: summed over it and its descendants, a server
    that is a Ray cluster; with ``ledger``, its CPU counts the descendants that ended too); None if it is
    gone or not ours to read."""
    if pid is None:
        return None
    try:
        root = psutil.Process(pid)
        procs = [root] + (root.children(recursive=True) if tree else [])
    except (psutil.Error, OSError):
        return None
    total: ProcessSnapshot | None = None
    for proc in procs:
        one = _one_snapshot(proc)
        if one is None and proc is root:
            return None
        if one is None:
            continue
        if ledger is not None:
            ledger.record(proc, one.cpu_s)
        total = (
            one if total is None else ProcessSnapshot(total.rss + one.rss, total.fds + one.fds, total.cpu_s + one.cpu_s)
        )
    if total is not None and ledger is not None:
        total = ProcessSnapshot(total.rss, total.fds, ledger.total())
    return total


def _one_snapshot(proc: psutil.Process) -> ProcessSnapshot | None:
    try:
        with proc.oneshot():
            cpu = proc.cpu_times()
            rss = proc.memory_info().rss
    except (psutil.Error, OSError):
        return None
    fds = kernel.open_fds(proc.pid)  # O(1) on Linux >= 6.2, where psutil.num_fds lists every fd
    return None if fds is None else ProcessSnapshot(rss, fds, cpu.user + cpu.system)


# A pid, or where to read it each time: a restarted server (server:restart) has a new one.
PidSource = Union[int, None, Callable[[], Union[int, None]]]


class Monitor:
    """Samples a server process and its health endpoint until stopped."""

    def __init__(
        self,
        server_pid: PidSource,
        healthz_url: str,
        router_stats_url: str | None,
        live_counters: Callable[[], dict[str, int]] | None,
        t0: float,
        interval_s: float = 0.5,
        healthz_timeout_s: float = 10.0,
        server_port: int | None = None,
        tls: ssl.SSLContext | None = None,
        tree: bool = False,
    ) -> None:
        self.server_pid = server_pid
        self.tree = tree  # the server is its pid's process tree (snapshot)
        self._cpu = CpuLedger() if tree else None  # its ended processes' CPU still counts
        self.healthz_url = healthz_url
        self.tls = tls  # an https server's /healthz
        self.router_stats_url = router_stats_url
        self.live_counters = live_counters
        self.t0 = t0
        self.interval_s = interval_s
        self.healthz_timeout_s = healthz_timeout_s
        # Append-only, read by the trial's watchdog while the threads run.
        self.rows: list[tuple] = []
        self.probes: list[tuple[float, float, bool]] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._sample_loop, name="faultload-monitor", daemon=True),
            threading.Thread(target=self._probe_loop, name="faultload-healthz", daemon=True),
        ]
        self.server_port = server_port
        self.baseline: ProcessSnapshot | None = None
        self.fd_limit: tuple[int, int] | None = None
        self._listen0 = kernel.listen_counters() or (0, 0)
        self.latest: tuple = ()
        self._engine: tuple[int | None, psutil.Process | None] = (None, None)  # (server pid, its engine)

    def pid(self) -> int | None:
        """The server's pid now (it follows a restart)."""
        return self.server_pid() if callable(self.server_pid) else self.server_pid

    def start(self) -> None:
        pid = self.pid()
        self.baseline = snapshot(pid, self.tree, self._cpu)
        self.fd_limit = kernel.fd_limits(pid) if pid else None
        for thread in self._threads:
            thread.start()

    def _now(self) -> float:
        return time.monotonic() - self.t0

    def sample_once(self) -> tuple:
        snap = snapshot(self.pid(), self.tree, self._cpu)
        stats: dict = {}
        if self.router_stats_url:
            _, stats = http_get_json(self.router_stats_url, timeout_s=1.0)
            stats = stats or {}
        live = self.live_counters() if self.live_counters else {}
        listen = kernel.listen_state(self.server_port) if self.server_port else None
        counters = kernel.listen_counters()
        engine = None if self.tree else self._engine_snapshot(self.pid())
        row = (
            self._now(),
            snap.rss if snap else -1,
            snap.fds if snap else -1,
            snap.cpu_s if snap else -1.0,
            stats.get("received", -1),
            stats.get("completed", -1),
            stats.get("in_flight", -1),
            live.get("completed", -1),
            live.get("failed", -1),
            live.get("in_flight", -1),
            listen.queued if listen else -1,
            listen.backlog if listen else -1,
            counters[0] - self._listen0[0] if counters else -1,
            counters[1] - self._listen0[1] if counters else -1,
            live.get("connections_peak", -1),
            engine.fds if engine else -1,
            engine.cpu_s if engine else -1.0,
        )
        self.rows.append(row)
        self.latest = row
        return row

    def _engine_snapshot(self, server_pid: int | None) -> ProcessSnapshot | None:
        """The server's engine subprocess (its first child), found once per server pid and again if it went."""
        cached_pid, proc = self._engine
        if server_pid is None:
            return None
        if cached_pid != server_pid or proc is None or not proc.is_running():
            try:
                children = psutil.Process(server_pid).children()
            except psutil.Error:
                children = []
            proc = children[0] if children else None
            self._engine = (server_pid, proc)
        return snapshot(proc.pid) if proc is not None else None

    def _sample_loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.sample_once()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def _probe_loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            elapsed, body = http_get_json(self.healthz_url, timeout_s=self.healthz_timeout_s, tls=self.tls)
            self.probes.append((started - self.t0, elapsed, body is not None))
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def stop(self, wait_s: float | None = None) -> None:
        """Stop sampling; wait for each thread up to ``wait_s`` (default: one /healthz timeout)."""
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=self.healthz_timeout_s + 2.0 if wait_s is None else wait_s)

    def result(self, drained: ProcessSnapshot | None = None) -> MonitorSamples:
        # Copies first (atomic): a thread not yet joined may still append.
        rows = np.asarray(list(self.rows), dtype=np.float64).reshape(-1, len(SAMPLE_FIELDS))
        probes = np.asarray(list(self.probes), dtype=np.float64).reshape(-1, 3)
        return MonitorSamples(
            samples={name: rows[:, i] for i, name in enumerate(SAMPLE_FIELDS)},
            healthz_t=probes[:, 0],
            healthz_latency_s=probes[:, 1],
            healthz_ok=probes[:, 2].astype(bool),
            baseline=self.baseline,
            drained=drained,
            fd_limit=self.fd_limit,
        )


# How often the drain looks at the server's fds: a snapshot is ~0.1 ms (psutil's oneshot and the fd count
# from /proc/PID/fd's size), and every trial waits on the drain, half a period on average past the moment.
DRAIN_POLL_S = 0.05


def drain_fds(server_pid: int | None, baseline_fds: int | None, drain_s: float, kept_fds: int = 0, tree: bool = False):
    """Wait (bounded) for the server's fds to come back near baseline (+ ``kept_fds`` it keeps by design:
    its DB pool after training); return the last snapshot."""
    deadline = time.monotonic() + drain_s
    snap = snapshot(server_pid, tree)
    while snap is not None and baseline_fds is not None and time.monotonic() < deadline:
        if snap.fds <= baseline_fds + 2 + kept_fds:
            break
        time.sleep(DRAIN_POLL_S)
        snap = snapshot(server_pid, tree)
    return snap
