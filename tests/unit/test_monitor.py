"""The monitor (faultload.run.monitor) against a tiny local HTTP server and real process ids.

The HTTP server is a test double running in a thread: ``/api/v1/healthz``
(200, 500, or slow, as the test sets) and a router-like ``/stats``. Waits
are bounded; nothing asserts a duration.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from conftest import wait_until

from faultload.host.network import http_get_json, pick_free_port
from faultload.record.samples import SAMPLE_FIELDS
from faultload.run.monitor import CpuLedger, Monitor, snapshot

ROUTER_STATS = {"received": 11, "completed": 7, "in_flight": 4, "peak_in_flight": 9}


class _Handler(BaseHTTPRequestHandler):
    server: "_StubHTTP"

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.server.hits.append(self.path)
        if self.path == "/api/v1/healthz":
            status, body = self.server.healthz_status, {"status": "ok"}
        elif self.path == "/stats":
            status, body = 200, ROUTER_STATS
        elif self.path == "/notjson":
            status, body = 200, None
        else:
            status, body = 404, {"detail": "no"}
        data = b"not json at all" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


class _StubHTTP(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, healthz_status: int = 200) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.healthz_status = healthz_status
        self.hits: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def http_stub():
    servers: list[_StubHTTP] = []

    def start(healthz_status: int = 200) -> _StubHTTP:
        server = _StubHTTP(healthz_status)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _run_monitor(mon: Monitor, rows: int = 3, probes: int = 3):
    mon.start()
    try:
        wait_until(lambda: len(mon.rows) >= rows and len(mon.probes) >= probes, timeout_s=20.0, every_s=0.02)
    finally:
        mon.stop()
    return mon.result(drained=snapshot(mon.server_pid))


def test_samples_process_router_and_live_counters(http_stub):
    server = http_stub()
    live = {"completed": 5, "failed": 1, "in_flight": 3, "submitted": 9}
    mon = Monitor(
        os.getpid(),
        f"{server.url}/api/v1/healthz",
        f"{server.url}/stats",
        lambda: live,
        time.monotonic(),
        interval_s=0.05,
    )
    result = _run_monitor(mon)
    s = result.samples
    assert set(s) == set(SAMPLE_FIELDS)
    n = s["t"].size
    assert n >= 2
    assert all(col.size == n for col in s.values())
    assert (s["rss"] > 0).all() and (s["fds"] > 0).all() and (s["cpu_s"] >= 0).all()
    assert np.all(np.diff(s["t"]) >= 0)
    assert (s["router_received"] == 11).all() and (s["router_in_flight"] == 4).all()
    assert (s["router_completed"] == 7).all()
    assert (s["client_completed"] == 5).all() and (s["client_failed"] == 1).all() and (s["client_in_flight"] == 3).all()
    assert result.healthz_t.size >= 2
    assert result.healthz_ok.all() and result.healthz_failures == 0
    assert (result.healthz_latency_s >= 0).all()
    assert result.baseline is not None and result.baseline.rss > 0 and result.baseline.fds > 0
    assert result.drained is not None and result.drained.fds > 0
    assert "/api/v1/healthz" in server.hits and "/stats" in server.hits
    assert mon.latest and mon.latest[1] > 0


def test_server_listen_queue_is_sampled(http_stub):
    """With the server's port, each sample carries its listener's accept queue and capacity."""
    server = http_stub()
    port = server.server_address[1]
    mon = Monitor(
        os.getpid(), f"{server.url}/api/v1/healthz", None, None, time.monotonic(), interval_s=0.05, server_port=port
    )
    s = _run_monitor(mon, rows=2, probes=1).samples
    assert (s["listen_backlog"] > 0).all()
    assert (s["accept_queue"] >= 0).all()
    assert (s["listen_overflows"] >= 0).all()


def test_child_process_is_measured():
    child = subprocess.Popen(["sleep", "30"])
    try:
        snap = snapshot(child.pid)
        assert snap is not None and snap.rss > 0 and snap.fds >= 0 and snap.cpu_s >= 0
    finally:
        child.kill()
        child.wait(timeout=10)


# A parent whose child spends CPU, says so, and ends when the test closes its stdin.
_BURNER = """
import subprocess, sys
kid = subprocess.Popen([sys.executable, "-c", "import sys, time\\nend = time.process_time() + 0.3\\n"
    "while time.process_time() < end: pass\\nprint('burnt', flush=True)\\nsys.stdin.read()"],
    stdin=subprocess.PIPE, stdout=sys.stdout)
sys.stdin.read()
kid.stdin.close()
kid.wait()
print('reaped', flush=True)
sys.stdin.read()
"""


def test_a_tree_ledger_keeps_the_cpu_of_processes_that_ended():
    """Without the ledger a tree's CPU falls when a descendant ends (Ray's workers do); with it, it never falls."""
    parent = subprocess.Popen([sys.executable, "-c", _BURNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "burnt"
        ledger = CpuLedger()
        before = snapshot(parent.pid, tree=True, ledger=ledger)
        before_plain = snapshot(parent.pid, tree=True)
        parent.stdin.write("x")
        parent.stdin.close()  # the parent closes its child's stdin: the child ends and is reaped
        assert parent.stdout.readline().strip() == "reaped"
        after = snapshot(parent.pid, tree=True, ledger=ledger)
        after_plain = snapshot(parent.pid, tree=True)
        assert before is not None and after is not None and before_plain is not None and after_plain is not None
        assert before.cpu_s >= 0.3 and after.cpu_s >= before.cpu_s
        assert after_plain.cpu_s < before_plain.cpu_s - 0.2  # what the ledger is for
    finally:
        parent.kill()
        parent.wait(timeout=10)


def test_dead_pid_gives_minus_one_without_crashing(http_stub):
    server = http_stub()
    child = subprocess.Popen(["true"])
    child.wait(timeout=10)  # reaped: the pid names no process now
    assert snapshot(child.pid) is None
    assert snapshot(None) is None
    mon = Monitor(child.pid, f"{server.url}/api/v1/healthz", None, None, time.monotonic(), interval_s=0.05)
    result = _run_monitor(mon, rows=2, probes=2)
    s = result.samples
    assert s["t"].size >= 2
    for name in ("rss", "fds", "cpu_s", "router_received", "client_completed", "client_in_flight"):
        assert (s[name] == -1).all(), name
    assert result.baseline is None and result.drained is None
    assert result.healthz_failures == 0  # the health endpoint itself was fine
    assert all(t.is_alive() is False for t in mon._threads)


def test_process_dying_mid_run_switches_to_minus_one(http_stub):
    server = http_stub()
    child = subprocess.Popen(["sleep", "30"])
    mon = Monitor(child.pid, f"{server.url}/api/v1/healthz", None, None, time.monotonic(), interval_s=0.05)
    mon.start()
    try:
        assert wait_until(lambda: len(mon.rows) >= 2, timeout_s=20.0, every_s=0.02)
        child.kill()
        child.wait(timeout=10)
        before = len(mon.rows)
        assert wait_until(lambda: len(mon.rows) >= before + 2, timeout_s=20.0, every_s=0.02)
    finally:
        mon.stop()
        if child.poll() is None:
            child.kill()
    rss = mon.result().samples["rss"]
    assert rss[0] > 0 and rss[-1] == -1


def test_healthz_500_counts_failures(http_stub):
    server = http_stub(healthz_status=500)
    mon = Monitor(os.getpid(), f"{server.url}/api/v1/healthz", None, None, time.monotonic(), interval_s=0.05)
    result = _run_monitor(mon, rows=2, probes=3)
    probes = result.healthz_t.size
    assert probes >= 3
    assert result.healthz_failures == probes
    assert not result.healthz_ok.any()


def test_healthz_closed_port_counts_failures():
    port = pick_free_port()
    mon = Monitor(
        os.getpid(),
        f"http://127.0.0.1:{port}/api/v1/healthz",
        f"http://127.0.0.1:{port}/stats",
        None,
        time.monotonic(),
        interval_s=0.05,
        healthz_timeout_s=1.0,
    )
    result = _run_monitor(mon, rows=2, probes=3)
    assert result.healthz_failures == result.healthz_t.size >= 3
    assert (result.samples["router_received"] == -1).all()
    assert (result.samples["rss"] > 0).all()  # process sampling is independent of the probe


def test_http_get_json(http_stub):
    server = http_stub()
    before = time.monotonic()
    elapsed, body = http_get_json(f"{server.url}/stats", timeout_s=5.0)
    assert body == ROUTER_STATS and 0 < elapsed <= time.monotonic() - before  # seconds, within the call's own
    assert http_get_json(f"{server.url}/missing", timeout_s=5.0)[1] is None  # 404
    assert http_get_json(f"{server.url}/notjson", timeout_s=5.0)[1] is None
    assert http_get_json(f"http://127.0.0.1:{pick_free_port()}/x", timeout_s=1.0)[1] is None


def test_empty_result_before_any_sample():
    mon = Monitor(None, "http://127.0.0.1:1/api/v1/healthz", None, None, time.monotonic())
    result = mon.result()
    assert result.samples["t"].size == 0 and result.healthz_t.size == 0 and result.healthz_failures == 0


def test_stop_is_idempotent_and_threads_end(http_stub):
    server = http_stub()
    mon = Monitor(os.getpid(), f"{server.url}/api/v1/healthz", None, None, time.monotonic(), interval_s=0.05)
    mon.start()
    mon.stop()
    mon.stop()
    assert not any(t.is_alive() for t in mon._threads)
    rows = len(mon.rows)
    time.sleep(0.2)
    assert len(mon.rows) == rows  # nothing samples after stop
