"""Tests for faultload.faults: spec validation, JSON round-trip, and real Toxiproxy effects.

The Toxiproxy tests run the real toxiproxy-server (built by ``faultload setup``)
in front of a tiny aiohttp server in this process and check each toxic's
observable effect against a baseline measured in the same test.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import selectors
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from aiohttp import web
from conftest import require_toxiproxy

from faultload.faults.control import FaultControlError, ToxiproxyControl
from faultload.faults.schedule import FaultRunner
from faultload.faults.topology import create_proxy_on_free_port, create_topology, teardown
from faultload.faults.toxiproxy import ToxiproxyServer, check_toxiproxy, process_gone, reap_stale
from faultload.host.network import ephemeral_range, pick_free_port, port_is_free
from faultload.model.fault_kinds import INJECTORS, KINDS
from faultload.model.faults import Fault, FaultSchedule, parse_fault
from faultload.model.watchdog import FaultWindow
from faultload.record.faults import AppliedFault, FaultLog

REPO = Path(__file__).resolve().parents[2]

# A latency toxic the tests can tell from none. Measured with these fixtures while a nightly matrix row and the
# unit tier kept both cores busy: 200 loopback GETs through the proxy, p99 2.2 ms, max 3.1 ms; so 1 s separates
# "applied" from "not applied" by a margin of ~300x (the 0.2-0.3 s bounds before left ~60x, and a loaded
# machine's scheduling stalls run to tenths of a second). "Applied" is a lower bound: it cannot flake.
LATENCY_MS = 1000
LATENCY_S = LATENCY_MS / 1000


# ---------------------------------------------------------------------------
# spec: parsing, validation, JSON
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, expect",
    [
        ("edge:reset_peer:timeout=0@5+3", Fault("edge", "reset_peer", {"timeout": 0}, start_s=5, duration_s=3)),
        (
            "backend:latency:latency=2000@0+30",
            Fault("backend", "latency", {"latency": 2000, "jitter": 0}, duration_s=30),
        ),
        ("edge:down@2+1", Fault("edge", "down", start_s=2, duration_s=1)),
        ("router:stall@5+60", Fault("router", "stall", start_s=5, duration_s=60)),
        ("router:errors", Fault("router", "errors", {"status": 503})),
        ("router:crash@1.5", Fault("router", "crash", start_s=1.5)),
        (
            "edge:latency:latency=100,jitter=10,stream=upstream,toxicity=0.5",
            Fault("edge", "latency", {"latency": 100, "jitter": 10}, stream="upstream", toxicity=0.5),
        ),
        ("backend:slicer:average_size=64,delay=10", Fault("backend", "slicer", {"average_size": 64, "delay": 10})),
        ("edge:limit_data:bytes=100", Fault("edge", "limit_data", {"bytes": 100})),
        ("edge:bandwidth:rate=10", Fault("edge", "bandwidth", {"rate": 10})),
        ("edge:slow_close:delay=10", Fault("edge", "slow_close", {"delay": 10})),
        ("edge:timeout:timeout=0", Fault("edge", "timeout", {"timeout": 0})),
        (
            "edge:latency:latency=2000,stream=both@1+5",
            Fault("edge", "latency", {"latency": 2000}, stream="both", start_s=1, duration_s=5),
        ),
        (
            "backend:limit_data:bytes=0,stream=upstream,toxicity=0.1@0+720",
            Fault("backend", "limit_data", {"bytes": 0}, stream="upstream", toxicity=0.1, duration_s=720),
        ),
    ],
)
def test_parse_fault(spec: str, expect: Fault) -> None:
    fault = parse_fault(spec)
    assert fault == expect
    assert parse_fault(fault.to_spec()) == fault


def test_both_streams_are_the_pair_of_toxics() -> None:
    both = parse_fault("edge:latency:latency=2000,stream=both@1+5")
    assert (
        both.streams == ("downstream", "upstream")
        and both.to_spec() == "edge:latency:jitter=0,latency=2000,stream=both@1.0+5.0"
    )
    assert Fault.from_dict(json.loads(json.dumps(both.to_dict()))) == both
    assert parse_fault("backend:reset_peer:stream=upstream").streams == ("upstream",)
    assert parse_fault("edge:slicer:average_size=1").streams == ("downstream",)
    assert parse_fault("edge:down").streams == () and parse_fault("router:stall").streams == ()
    with pytest.raises(ValueError, match="allowed: downstream, upstream, both$"):
        parse_fault("edge:latency:latency=1,stream=sideways")


def test_parse_without_window_lasts_whole_trial() -> None:
    fault = parse_fault("edge:down")
    assert (fault.start_s, fault.duration_s, fault.end_s) == (0.0, None, float("inf"))


@pytest.mark.parametrize(
    "spec, field",
    [
        ("lan:latency:latency=1", "fault.link"),
        ("edge:jitter", "fault.kind"),
        ("router:latency:latency=1", "fault.kind"),  # toxic kind on the router link
        ("backend:crash", "fault.kind"),  # router kind on a proxy link
        ("edge:latency", "fault.attributes"),  # missing required attribute
        ("edge:latency:latency=1,rate=2", "fault.attributes"),  # unknown attribute
        ("edge:latency:latency=fast", "fault.attributes.latency"),
        ("edge:latency:latency=-5", "fault.attributes.latency"),
        ("edge:latency:latency=1.5", "fault.attributes.latency"),
        ("edge:bandwidth:rate=inf", "fault.attributes.rate"),
        ("router:errors:status=404", "fault.attributes.status"),
        ("edge:latency:latency=1,toxicity=1.5", "fault.toxicity"),
        ("edge:latency:latency=1,toxicity=-0.1", "fault.toxicity"),
        ("edge:latency:latency=1,stream=sideways", "fault.stream"),
        ("edge:latency:latency=1,stream=both,stream=upstream", "fault.stream"),
        ("edge:latency:latency=1,toxicity=1,toxicity=0.5", "fault.toxicity"),
        ("edge:down:toxicity=0.5", "fault.stream/toxicity"),
        ("edge:down:stream=both", "fault.stream/toxicity"),
        ("router:stall:stream=upstream", "fault.stream/toxicity"),
        ("edge:latency:latency=1@-1+2", "fault.start_s"),
        ("edge:latency:latency=1@1+0", "fault.duration_s"),
        ("edge:latency:latency=1@1+-2", "fault.duration_s"),
        ("edge:latency:latency=1@soon", "fault.start_s/duration_s"),
        ("edge", "fault spec"),
        ("", "fault spec"),
    ],
)
def test_bad_spec_is_one_line_naming_the_field(spec: str, field: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_fault(spec)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(field + ":"), message


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(link="edge", kind="latency", attributes={"latency": True}), "fault.attributes.latency"),
        (dict(link="edge", kind="latency", attributes={"latency": "1"}), "fault.attributes.latency"),
        (dict(link="edge", kind="latency", attributes=(("latency", 1), ("latency", 2))), "fault.attributes"),
        (dict(link="edge", kind="latency", attributes=5), "fault.attributes"),
        (dict(link="edge", kind="down", start_s="1"), "fault.start_s"),
        (dict(link="edge", kind="down", duration_s=float("nan")), "fault.duration_s"),
        (dict(link=None, kind="down"), "fault.link"),
    ],
)
def test_bad_fault_values(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError) as info:
        Fault(**kwargs)
    assert "\n" not in str(info.value) and str(info.value).startswith(field + ":"), str(info.value)


def test_lists_what_is_allowed() -> None:
    with pytest.raises(ValueError, match="allowed: edge, backend, router"):
        parse_fault("lan:down")
    with pytest.raises(ValueError, match="router kinds: ") as refused:
        parse_fault("router:latency:latency=1")
    listed = str(refused.value).split("router kinds: ", 1)[1].replace(",", " ").split()
    assert {"stall", "errors", "truncate", "crash", "pause"} <= set(listed), listed
    with pytest.raises(ValueError, match="allowed: average_size, size_variation, delay"):
        parse_fault("edge:slicer:bytes=1")


def test_schedule_json_round_trip_is_exact() -> None:
    schedule = FaultSchedule.parse(
        [
            "edge:reset_peer:timeout=0@5+3",
            "backend:latency:latency=2000,jitter=7@0+30",
            "edge:down@2.25+1",
            "router:stall@5+60",
            "router:errors:status=502@1",
            "edge:slicer:average_size=10,size_variation=3,delay=5,stream=upstream,toxicity=0.25",
        ]
    )
    text = schedule.to_json()
    back = FaultSchedule.from_json(text)
    assert back == schedule
    assert back.to_json() == text
    assert json.loads(text)["faults"][1]["attributes"] == {"jitter": 7, "latency": 2000}
    assert FaultSchedule.from_json(FaultSchedule().to_json()) == FaultSchedule()


def test_from_dict_rejects_unknown_fields() -> None:
    data = parse_fault("edge:down").to_dict()
    with pytest.raises(ValueError, match=r"^fault\.color: unknown field"):
        Fault.from_dict({**data, "color": "red"})
    with pytest.raises(ValueError, match=r"^fault\.kind: missing"):
        Fault.from_dict({"link": "edge"})
    with pytest.raises(ValueError, match="schedule"):
        FaultSchedule.from_dict({"fault": []})


def test_fault_log_active_at_and_round_trip() -> None:
    a, b = parse_fault("edge:down@1+1"), parse_fault("router:stall@1.5")
    log = FaultLog(
        (
            AppliedFault(0, a, applied_at_s=1.0, removed_at_s=2.1, applied_at_epoch=101.0, removed_at_epoch=102.1),
            AppliedFault(1, b, applied_at_s=1.5, applied_at_epoch=101.5),
            AppliedFault(2, a, applied_at_s=3.0, error="boom"),
        ),
        trial_start_epoch=100.0,
    )
    assert log.active_at(0.5) == []
    assert log.active_at(1.2) == [a]
    assert log.active_at(2.0) == [a, b]
    assert log.active_at(99.0) == [b]
    assert FaultLog.from_dict(json.loads(json.dumps(log.to_dict()))) == log
    # The watchdog's view: what took effect, until removed (a failed apply never did).
    assert log.windows() == (FaultWindow(1.0, 2.1, "edge", "down"), FaultWindow(1.5, math.inf, "router", "stall"))


def test_ports_below_ephemeral_range() -> None:
    low, _ = ephemeral_range()
    rng = random.Random(1)
    ports = {pick_free_port(rng=rng) for _ in range(20)}
    assert all(20000 <= p < low for p in ports)


def test_doctor_messages(tmp_path: Path) -> None:
    ok, msg = check_toxiproxy(tmp_path, explicit=tmp_path / "nope", go="/usr/bin/go")
    assert not ok and "faultload setup" in msg and "--toxiproxy PATH" in msg
    ok, msg = check_toxiproxy(tmp_path, explicit=tmp_path / "nope", go="")
    assert not ok and "ghcr.io/shopify/toxiproxy:2.12.0" in msg and "--toxiproxy PATH" in msg


# ---------------------------------------------------------------------------
# real toxiproxy
# ---------------------------------------------------------------------------


def _binary() -> Path:
    return require_toxiproxy()


class EchoServer:
    """aiohttp on its own loop thread: /small and /big?n=BYTES."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.port = 0
        self.runner: web.AppRunner | None = None

    async def _start(self) -> None:
        async def small(request: web.Request) -> web.Response:
            return web.Response(body=b"hello")

        async def big(request: web.Request) -> web.Response:
            return web.Response(body=b"x" * int(request.query.get("n", "100000")))

        app = web.Application()
        app.router.add_get("/small", small)
        app.router.add_get("/big", big)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def start(self) -> "EchoServer":
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    def stop(self) -> None:
        if self.runner is not None:
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def raw_get(port: int, path: str = "/small", timeout: float = 5.0, keep_alive: bool = False) -> tuple[bytes, float]:
    """One HTTP/1.1 request; (bytes received, seconds).

    With ``keep_alive`` False it asks for Connection: close and reads until EOF;
    with True it reads until the Content-Length is complete (the server keeps
    the connection open, as for a real SDK client).
    """
    start = time.monotonic()
    chunks: list[bytes] = []
    header = "" if keep_alive else "Connection: close\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n{header}\r\n".encode())
        for _ in range(100_000):
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
            if keep_alive and _complete(b"".join(chunks)):
                break
    return b"".join(chunks), time.monotonic() - start


def _complete(response: bytes) -> bool:
    head, sep, body = response.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


def body_of(response: bytes) -> bytes:
    return response.partition(b"\r\n\r\n")[2]


def baseline(port: int, path: str = "/small", n: int = 3) -> float:
    return min(raw_get(port, path)[1] for _ in range(n))


@pytest.fixture(scope="module")
def toxiproxy(tmp_path_factory: pytest.TempPathFactory):
    binary = _binary()
    server = ToxiproxyServer(binary, tmp_path_factory.mktemp("toxiproxy"), seed=1).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def control(toxiproxy: ToxiproxyServer) -> ToxiproxyControl:
    return toxiproxy.control(timeout_s=5.0)


@pytest.fixture(scope="module")
def echo():
    server = EchoServer().start()
    yield server
    server.stop()


@pytest.fixture
def proxy(control: ToxiproxyControl, echo: EchoServer, request: pytest.FixtureRequest):
    name = "t_" + request.node.name.replace("[", "_").replace("]", "")[:40]
    info = create_proxy_on_free_port(control, name, f"127.0.0.1:{echo.port}")
    yield info
    control.destroy(name)


def test_server_version_and_port(toxiproxy: ToxiproxyServer, control: ToxiproxyControl) -> None:
    assert control.version() == "2.12.0"
    assert toxiproxy.port < ephemeral_range()[0]
    assert toxiproxy.log_path is not None and toxiproxy.log_path.exists()


def test_proxy_passes_traffic(proxy) -> None:
    response, _ = raw_get(proxy.listen_port)
    assert response.startswith(b"HTTP/1.1 200") and body_of(response) == b"hello"
    assert proxy.listen_port < ephemeral_range()[0]


def test_latency_adds_delay(proxy, control: ToxiproxyControl) -> None:
    base = baseline(proxy.listen_port)
    control.add_toxic(proxy.name, "lat", "latency", {"latency": LATENCY_MS})
    response, took = raw_get(proxy.listen_port)
    assert body_of(response) == b"hello"
    assert base < LATENCY_S <= took, (took, base)  # not took - base: a loaded machine's base is not additive
    control.update_toxic(proxy.name, "lat", {"latency": 0})  # the adapter's PATCH works too
    assert raw_get(proxy.listen_port)[1] < LATENCY_S


def test_reset_peer_resets_connection(proxy, control: ToxiproxyControl) -> None:
    control.add_toxic(proxy.name, "rst", "reset_peer", {"timeout": 0})
    with pytest.raises(ConnectionResetError):
        raw_get(proxy.listen_port, timeout=3)
    control.remove_toxic(proxy.name, "rst")
    assert body_of(raw_get(proxy.listen_port)[0]) == b"hello"


def test_down_refuses_then_up_works(proxy, control: ToxiproxyControl) -> None:
    control.disable(proxy.name)
    with pytest.raises(ConnectionRefusedError):
        raw_get(proxy.listen_port, timeout=3)
    control.enable(proxy.name)
    assert body_of(raw_get(proxy.listen_port)[0]) == b"hello"


def test_limit_data_cuts_response(proxy, control: ToxiproxyControl) -> None:
    full, _ = raw_get(proxy.listen_port, "/big?n=50000")
    assert len(body_of(full)) == 50000
    control.add_toxic(proxy.name, "cut", "limit_data", {"bytes": 1000})
    cut, _ = raw_get(proxy.listen_port, "/big?n=50000", timeout=3)
    assert len(cut) == 1000


@pytest.mark.parametrize("stream", ["downstream", "upstream"])
def test_timeout_hangs_until_client_timeout(proxy, control: ToxiproxyControl, stream: str) -> None:
    # Keep-alive, as real clients: a server that closes after the response lets the
    # close through a downstream timeout toxic, and the client sees an empty EOF at once.
    assert body_of(raw_get(proxy.listen_port, keep_alive=True)[0]) == b"hello"
    control.add_toxic(proxy.name, "hang", "timeout", {"timeout": 0}, stream=stream)
    start = time.monotonic()
    with pytest.raises(socket.timeout):
        raw_get(proxy.listen_port, timeout=1.0, keep_alive=True)
    assert time.monotonic() - start >= 0.95


def test_bandwidth_slows_large_response(proxy, control: ToxiproxyControl) -> None:
    path = "/big?n=200000"
    base = baseline(proxy.listen_port, path)
    control.add_toxic(proxy.name, "bw", "bandwidth", {"rate": 200})  # KB/s: 200 KB takes ~1 s
    response, took = raw_get(proxy.listen_port, path)
    assert len(body_of(response)) == 200000
    assert took - base >= 0.5, (took, base)


def test_slicer_applies_and_request_succeeds(proxy, control: ToxiproxyControl) -> None:
    control.add_toxic(proxy.name, "slice", "slicer", {"average_size": 64, "size_variation": 16, "delay": 100})
    assert [t["type"] for t in control.toxics(proxy.name)] == ["slicer"]
    response, _ = raw_get(proxy.listen_port, "/big?n=20000")
    assert len(body_of(response)) == 20000


def test_slow_close_applies_and_request_succeeds(proxy, control: ToxiproxyControl) -> None:
    base = baseline(proxy.listen_port)
    control.add_toxic(proxy.name, "sc", "slow_close", {"delay": 300})
    assert [t["type"] for t in control.toxics(proxy.name)] == ["slow_close"]
    response, took = raw_get(proxy.listen_port)
    assert body_of(response) == b"hello"
    assert took - base >= 0.25, (took, base)  # EOF (the close) arrives late


def test_upstream_toxic_and_toxicity(proxy, control: ToxiproxyControl) -> None:
    control.add_toxic(proxy.name, "up", "latency", {"latency": LATENCY_MS}, stream="upstream", toxicity=0.0)
    assert control.toxics(proxy.name)[0]["stream"] == "upstream"
    assert raw_get(proxy.listen_port)[1] < LATENCY_S  # toxicity 0: never applied
    control.update_toxic(proxy.name, "up", toxicity=1.0)
    assert raw_get(proxy.listen_port)[1] >= LATENCY_S


def test_control_calls_are_bounded() -> None:
    """A server that accepts but never answers: calls fail within the time limit, sync and async."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        control = ToxiproxyControl("127.0.0.1", silent.getsockname()[1], timeout_s=0.5)
        for call in (control.reset, control.version, lambda: control.disable("x")):
            start = time.monotonic()
            with pytest.raises(FaultControlError):
                call()
            assert time.monotonic() - start < 2.0

        async def run() -> float:
            start = time.monotonic()
            with pytest.raises(FaultControlError):
                await control.areset()
            return time.monotonic() - start

        assert asyncio.run(run()) < 2.0


def test_errors_are_one_clear_exception(proxy, control: ToxiproxyControl) -> None:
    with pytest.raises(FaultControlError, match="proxy not found"):
        control.enable("no_such_proxy")
    with pytest.raises(FaultControlError, match="invalid toxic type"):
        control.add_toxic(proxy.name, "x", "bogus", {})
    with pytest.raises(FaultControlError, match="address already in use"):
        control.create_proxy("dup_port", proxy.listen_port, "127.0.0.1:1")


# ---------------------------------------------------------------------------
# FaultRunner against the real server
# ---------------------------------------------------------------------------


class FakeRouter:
    """Records calls with their times; optionally async."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, float]] = []
        self.t0 = time.monotonic()

    def _log(self, name: str, *args: object) -> None:
        self.calls.append((name, args, time.monotonic() - self.t0))

    def timed_fault(self, kind: str, seconds: float, *attributes: object) -> None:
        self._log(kind, seconds, *attributes)

    async def crash(self) -> None:
        self._log("crash")

    async def restart(self) -> None:
        self._log("restart")

    def reset_faults(self) -> None:
        self._log("reset_faults")


@pytest.fixture
def topology(control: ToxiproxyControl, echo: EchoServer):
    up = f"127.0.0.1:{echo.port}"
    topo = create_topology(control, up, up, names=("edge_t", "backend_t"))
    yield topo
    for name in topo.names.values():
        control.destroy(name)


def test_runner_applies_and_removes_on_schedule(control: ToxiproxyControl, topology) -> None:
    schedule = FaultSchedule.parse(
        [
            "edge:latency:latency=50@0.1+0.5",
            "backend:down@0.2+0.3",
            "router:stall@0.1+0.2",
            "router:crash@0.2+0.3",
            "router:errors:status=502@0+0.4",
        ]
    )
    router = FakeRouter()

    async def run() -> tuple[FaultRunner, list, dict]:
        runner = FaultRunner(schedule, control, topology.names, router)
        runner.start()
        await asyncio.sleep(0.35)
        mid_toxics = await control.atoxics(topology.edge.name)
        mid_proxies = await control.aproxies()
        assert await runner.wait(5.0)
        return runner, mid_toxics, mid_proxies

    runner, mid_toxics, mid_proxies = asyncio.run(run())
    assert [t["type"] for t in mid_toxics] == ["latency"]
    assert mid_proxies[topology.backend.name]["enabled"] is False
    records = runner.records()
    for rec in records:
        assert rec.error is None and rec.remove_error is None and rec.removed_by == "schedule"
        assert rec.applied_at_s is not None and rec.removed_at_s is not None
        assert rec.fault.start_s <= rec.applied_at_s < rec.fault.start_s + 0.15, rec
        assert rec.fault.end_s <= rec.removed_at_s < rec.fault.end_s + 0.25, rec
        assert rec.applied_at_epoch == pytest.approx(runner.trial_start_epoch + rec.applied_at_s)
    # Afterwards: clean proxies, and the router saw its calls in time order.
    assert control.toxics(topology.edge.name) == []
    assert all(p["enabled"] for p in control.proxies().values())
    names = [c[0] for c in router.calls]
    assert names == ["errors", "stall", "crash", "restart"]
    assert router.calls[0][1] == (0.4, 502) and router.calls[1][1] == (0.2,)
    # Attribution.
    assert {f.kind for f in runner.active_at(0.3)} == {"latency", "down", "stall", "crash", "errors"}
    assert runner.active_at(5.0) == []


class PausableRouter(FakeRouter):
    """A test double of a paused router: a control call made while it is paused blocks until it is resumed
    (as an HTTP request waits in a SIGSTOPped router's socket), or 5 s, the real call's socket timeout."""

    def __init__(self) -> None:
        super().__init__()
        self.running = threading.Event()
        self.running.set()

    def pause(self, seconds: float) -> None:
        self._log("pause", seconds)
        self.running.clear()

    def resume(self) -> None:
        self._log("resume")
        self.running.set()

    def timed_fault(self, kind: str, seconds: float, *attributes: object) -> None:
        self.running.wait(5.0)
        self._log(kind, seconds, *attributes)


def test_a_control_call_that_waits_on_a_paused_router_does_not_hold_its_resume() -> None:
    """Nightly 2026-12-01: a truncate sent during a router pause blocked the fault loop for the call's 5 s
    timeout, the router was resumed only then, and the truncate cut the next trial's bodies."""
    schedule = FaultSchedule.parse(["router:pause@0+0.3", "router:truncate@0.1+0.1"])
    router = PausableRouter()

    async def run() -> FaultRunner:
        runner = FaultRunner(schedule, None, {}, router)
        runner.start()
        assert await runner.wait(10.0)
        return runner

    runner = asyncio.run(run())
    assert [c[0] for c in router.calls] == ["pause", "resume", "truncate"]  # the resume did not wait on it
    pause, truncate = runner.records()
    assert pause.removed_by == "schedule" and pause.error is None and truncate.error is None


def test_heal_removes_everything(control: ToxiproxyControl, topology) -> None:
    schedule = FaultSchedule.parse(
        [
            "edge:latency:latency=1000",
            "edge:limit_data:bytes=10,stream=upstream",
            "backend:down",
            "backend:down@0.05",  # overlapping downs on one link
            "backend:reset_peer:timeout=100",
            "router:crash",
            "router:stall",
            "edge:timeout:timeout=0@100",  # never reached
        ]
    )
    router = FakeRouter()

    async def run() -> tuple[FaultRunner, list[str]]:
        runner = FaultRunner(schedule, control, topology.names, router, until_end_s=600.0)
        runner.start()
        for _ in range(100):
            if sum(r.applied for r in runner.records()) == 7:
                break
            await asyncio.sleep(0.02)
        return runner, await runner.heal()

    start = time.monotonic()
    runner, errors = asyncio.run(run())
    assert time.monotonic() - start < 5.0
    assert errors == []
    for name in topology.names.values():
        assert control.toxics(name) == []
    assert all(p["enabled"] for p in control.proxies().values())
    names = [c[0] for c in router.calls]
    assert sorted(names[:2]) == ["crash", "stall"] and names[2:] == ["restart", "reset_faults"]
    assert [c[1] for c in router.calls if c[0] == "stall"] == [(600.0,)]
    records = runner.records()
    assert all(r.removed_by == "heal" and r.removed_at_s is not None for r in records[:7])
    assert not records[7].applied and records[7].applied_at_s is None
    assert body_of(raw_get(topology.edge.listen_port)[0]) == b"hello"


def test_both_streams_apply_two_toxics_and_remove_both(control: ToxiproxyControl, topology) -> None:
    schedule = FaultSchedule.parse(
        [
            "edge:latency:latency=50,stream=both@0+0.4",
            "backend:reset_peer:stream=upstream@0+0.4",
            "backend:limit_data:bytes=0,stream=both",  # to the end: heal removes the pair
        ]
    )

    async def run() -> tuple[FaultRunner, list, list, list[str]]:
        runner = FaultRunner(schedule, control, topology.names, None)
        runner.start()
        await asyncio.sleep(0.2)
        mid = await control.atoxics(topology.edge.name), await control.atoxics(topology.backend.name)
        for _ in range(100):
            if runner.records()[0].removed_at_s is not None and runner.records()[1].removed_at_s is not None:
                break
            await asyncio.sleep(0.02)
        after_schedule = await control.atoxics(topology.edge.name)
        return runner, mid, after_schedule, await runner.heal()

    runner, (edge_mid, backend_mid), edge_after, errors = asyncio.run(run())
    assert sorted((t["name"], t["stream"], t["attributes"]["latency"]) for t in edge_mid) == [
        ("fl0_latency_downstream", "downstream", 50),
        ("fl0_latency_upstream", "upstream", 50),
    ]
    assert sorted((t["name"], t["stream"]) for t in backend_mid) == [
        ("fl1_reset_peer_upstream", "upstream"),
        ("fl2_limit_data_downstream", "downstream"),
        ("fl2_limit_data_upstream", "upstream"),
    ]
    assert edge_after == [] and errors == []
    assert control.toxics(topology.backend.name) == []
    assert [r.removed_by for r in runner.records()] == ["schedule", "schedule", "heal"]
    assert [r.fault.stream for r in runner.log().records] == ["both", "upstream", "both"]  # the log says which


def test_half_applied_pair_is_taken_back(control: ToxiproxyControl, topology) -> None:
    """The upstream half fails (its name is taken): the downstream half must not stay behind."""
    control.add_toxic(topology.edge.name, "fl0_latency_upstream", "latency", {"latency": 1}, stream="upstream")
    schedule = FaultSchedule.parse(["edge:latency:latency=50,stream=both@0+0.2"])

    async def run() -> FaultRunner:
        runner = FaultRunner(schedule, control, topology.names, None)
        runner.start()
        assert await runner.wait(5.0)
        return runner

    (record,) = asyncio.run(run()).records()  # the topology fixture deletes the proxy and its toxics
    assert record.error and "fl0_latency_upstream" in record.error and not record.applied
    assert [t["name"] for t in control.toxics(topology.edge.name)] == ["fl0_latency_upstream"]


def test_failed_apply_is_recorded_not_fatal(control: ToxiproxyControl, topology) -> None:
    schedule = FaultSchedule.parse(["edge:latency:latency=10@0+0.1", "backend:latency:latency=10@0+0.1"])
    names = {"edge": "no_such_proxy", "backend": topology.backend.name}

    async def run() -> FaultRunner:
        runner = FaultRunner(schedule, control, names, None)
        runner.start()
        assert await runner.wait(5.0)
        assert await runner.heal() == []
        return runner

    bad, good = asyncio.run(run()).records()
    assert bad.error and "proxy not found" in bad.error and not bad.applied and bad.removed_at_s is None
    assert good.error is None and good.removed_by == "schedule"


def test_runner_validates_before_any_call(control: ToxiproxyControl) -> None:
    with pytest.raises(ValueError, match="no router controller"):
        FaultRunner(FaultSchedule.parse(["router:stall"]), control, {"edge": "e"}, None)
    with pytest.raises(ValueError, match="no proxy for 'backend'"):
        FaultRunner(FaultSchedule.parse(["backend:down"]), control, {"edge": "e"}, None)


# ---------------------------------------------------------------------------
# process cleanup
# ---------------------------------------------------------------------------


def _gone(pid: int) -> bool:
    return process_gone(pid)


def _wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return _gone(pid)


def test_stop_mid_fault_leaves_nothing(tmp_path: Path, echo: EchoServer) -> None:
    server = ToxiproxyServer(_binary(), tmp_path).start()
    control = server.control()
    info = create_proxy_on_free_port(control, "mid", f"127.0.0.1:{echo.port}")
    control.add_toxic("mid", "hang", "timeout", {"timeout": 0})
    held = socket.create_connection(("127.0.0.1", info.listen_port), timeout=2)  # a connection in the toxic
    try:
        control.disable("mid")
        control.enable("mid")
        pid, port = server.pid, server.port
        assert pid is not None and port is not None
        server.stop()
        server.stop()  # idempotent
    finally:
        held.close()
    assert _wait_gone(pid)
    assert port_is_free("127.0.0.1", port) and port_is_free("127.0.0.1", info.listen_port)
    assert list(tmp_path.glob("*.pid")) == []


_CHILD = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from faultload.faults.toxiproxy import ToxiproxyServer
    from faultload.faults.topology import create_proxy_on_free_port
    server = ToxiproxyServer(Path(sys.argv[1]), Path(sys.argv[2]), die_with_parent=sys.argv[3] == "1").start()
    control = server.control()
    info = create_proxy_on_free_port(control, "k", "127.0.0.1:9")
    control.add_toxic("k", "lat", "latency", {"latency": 5000})
    control.disable("k")
    print(json.dumps({"pid": server.pid, "port": server.port, "proxy_port": info.listen_port}), flush=True)
    time.sleep(60)
""")


def _read_line(child: subprocess.Popen, seconds: float) -> str:
    """One line of the child's stdout, or "" after ``seconds`` or when it exits."""
    deadline = time.monotonic() + seconds
    with selectors.DefaultSelector() as sel:
        sel.register(child.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        while time.monotonic() < deadline and child.poll() is None:
            if sel.select(timeout=0.2):
                return child.stdout.readline()  # type: ignore[union-attr]
    return ""


def _child_holding_server(tmp_path: Path, die_with_parent: bool) -> tuple[subprocess.Popen, dict]:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(_binary()), str(tmp_path), "1" if die_with_parent else "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    line = _read_line(child, 20.0)
    if not line:
        child.kill()
        child.wait(5)
        pytest.fail("child did not start a toxiproxy server")
    return child, json.loads(line)


@pytest.mark.parametrize("die_with_parent", [True, False])
def test_sigkilled_owner_leaves_no_server(tmp_path: Path, die_with_parent: bool) -> None:
    child, info = _child_holding_server(tmp_path, die_with_parent)
    try:
        assert not _gone(info["pid"])
        child.send_signal(signal.SIGKILL)
        child.wait(5)
        if die_with_parent:
            assert _wait_gone(info["pid"]), "parent-death signal did not stop the server"
            reap_stale(tmp_path)  # clears the pid file the dead owner left
        else:
            time.sleep(0.3)
            assert not _gone(info["pid"]), "server should outlive its owner without the death signal"
            assert reap_stale(tmp_path) == [info["pid"]]
            assert _wait_gone(info["pid"])
    finally:
        if not _gone(info["pid"]):
            os.killpg(info["pid"], signal.SIGKILL)
    for port in (info["port"], info["proxy_port"]):
        assert port_is_free("127.0.0.1", port), subprocess.run(["ss", "-tanpo"], capture_output=True, text=True).stdout
    assert list(tmp_path.glob("*.pid")) == []


def test_the_edge_proxy_takes_neither_the_servers_port_nor_the_backends(tmp_path: Path) -> None:
    """A stack starts Toxiproxy while the server is still importing, so the server's port looks free:
    the edge proxy must not take it, and the backend proxy gets exactly the port the server was told."""
    server = ToxiproxyServer(_binary(), tmp_path).start()
    try:
        control = server.control()
        api_port, backend_port = pick_free_port(), pick_free_port()

        class FirstTheTakenPorts(random.Random):  # TEST DOUBLE: offers the two taken ports before any other
            offers = [api_port, backend_port]

            def randint(self, a: int, b: int) -> int:
                return self.offers.pop(0) if self.offers else super().randint(a, b)

        topo = create_topology(
            control,
            f"127.0.0.1:{api_port}",
            "127.0.0.1:9",
            rng=FirstTheTakenPorts(1),
            backend_port=backend_port,
            exclude=frozenset({api_port}),
        )
        assert topo.edge.listen_port not in (api_port, backend_port)
        assert topo.backend.listen_port == backend_port
    finally:
        teardown(server.control(), server)


def test_teardown_resets_and_destroys(tmp_path: Path) -> None:
    server = ToxiproxyServer(_binary(), tmp_path).start()
    control = server.control()
    topo = create_topology(control, "127.0.0.1:9", "127.0.0.1:9")
    control.add_toxic(topo.edge.name, "lat", "latency", {"latency": 10})
    control.disable(topo.backend.name)
    pid = server.pid
    assert teardown(control, server) == []
    assert pid is not None and _wait_gone(pid)
    assert server.process is None
    # Against a dead server, teardown reports (bounded) instead of raising.
    errors = teardown(ToxiproxyControl("127.0.0.1", server.port, timeout_s=0.5), server)  # type: ignore[arg-type]
    assert len(errors) == 2


_CTRL_C_CHILD = textwrap.dedent("""
    import asyncio, faulthandler, signal, sys
    faulthandler.register(signal.SIGUSR1)  # the test asks for every thread's stack if this hangs
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal's: not what a `cmd &` launcher left (ignored)
    from faultload.faults.control import ToxiproxyControl
    from faultload.faults.schedule import FaultRunner
    from faultload.model.faults import FaultSchedule
    control = ToxiproxyControl("127.0.0.1", int(sys.argv[1]))
    schedule = FaultSchedule.parse(["edge:latency:latency=2000", "edge:down@0.1", "edge:bandwidth:rate=1@0+60"])

    async def trial():
        runner = FaultRunner(schedule, control, {"edge": sys.argv[2]})
        runner.start()
        try:
            await runner.wait(0.5)  # the 60 s bandwidth window is still open
            print("applied", flush=True)
            await asyncio.sleep(60)
        finally:
            print("healed", await runner.heal(), flush=True)

    asyncio.run(trial())
""")


def test_ctrl_c_heals(toxiproxy: ToxiproxyServer, control: ToxiproxyControl, proxy) -> None:
    """SIGINT to a process running a trial: asyncio.run cancels it and heal() runs in finally."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CTRL_C_CHILD, str(toxiproxy.port), proxy.name],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert _read_line(child, 20.0).strip() == "applied"
        assert len(control.toxics(proxy.name)) == 2
        assert control.proxies()[proxy.name]["enabled"] is False
        child.send_signal(signal.SIGINT)
        try:
            out, err = child.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGUSR1)  # its threads' stacks, for the failure message
            time.sleep(1.0)
            child.kill()
            out, err = child.communicate(timeout=5)
            pytest.fail(f"no exit 15 s after SIGINT; stdout {out!r}; stacks:\n{err[-6000:]}")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(5)
    assert "healed []" in out, err[-2000:]
    assert control.toxics(proxy.name) == []
    assert control.proxies()[proxy.name]["enabled"] is True


def test_every_kind_is_stated_once_and_the_views_derive_from_it() -> None:
    """model.faults.KINDS is the one record per kind: the parser's tables, the strategies' kinds, the fatal and
    outage sets and the router's timed calls are views of it, and the router serves each timed kind."""
    import importlib
    from pathlib import Path

    from faultload.model import faults as model

    strategies = importlib.import_module("faultload.strategies.faults")  # the package exports a function so named

    assert set(model.KIND) == {k.name for k in model.KINDS} and len(model.KIND) == len(model.KINDS)
    for kind in model.KINDS:
        assert set(kind.links) <= set(model.LINKS) and kind.links
        assert not (kind.toxic and kind.process) and set(kind.fatal_on) <= set(kind.links)
        for link in kind.links:
            assert kind.name in model.kinds_for(link)
    assert set(strategies.ROUTER_KINDS) | {"pause"} == set(model.ROUTER_KINDS)
    assert strategies.FATAL == model.FATAL_FAULTS
    from faultload.strategies.limits import NIGHTLY

    drawn = set(strategies.fault_kinds(NIGHTLY))
    assert {f"{link}:{k.name}" for k in model.KINDS for link in k.links} == drawn  # nightly draws every kind
    root = Path(model.__file__).resolve().parent.parent / "router"
    state_go = (root / "go" / "state.go").read_text()  # the compiled router's one list of the kinds it times
    listed = re.search(r"var timedFaults = \[\]string\{([^}]*)\}", state_go)
    assert listed is not None and set(re.findall(r'"(\w+)"', listed.group(1))) == set(model.ROUTER_TIMED_KINDS)


def test_every_way_of_injecting_has_one_apply_and_one_remove_and_every_kind_names_one() -> None:
    """The fault runner dispatches by FaultKind.injected_by: a kind added to KINDS needs no branch in the runner
    unless it is injected a new way, and a new way without its pair fails here, not in a trial."""
    assert {kind.injected_by for kind in KINDS} == set(INJECTORS)
    assert set(FaultRunner._APPLY) == set(FaultRunner._REMOVE) == set(INJECTORS)
