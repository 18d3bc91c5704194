"""``faultload run --fault ...`` end to end against the real server and Toxiproxy: a router fault without
proxies, a run killed mid-fault, and both streams' toxics applied and healed.

A run SIGKILLed while a fault window is in force cannot clean up; the kernel's parent-death signal must still take
Toxiproxy (and the proxies it listens on), the router and the server down with it. Every process a run starts
inherits a unique tag in its environment, so other people's runs on this machine are never mistaken for ours. The
runs use the default workspace (``.faultload`` in the working directory), with the working directory a private
folder whose ``.faultload/targets`` and ``tools`` are the real installed ones (the ``fault_home`` fixture, the same as in
``tests/unit/test_fault_cli.py``, which has the bad specs refused before anything starts).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from conftest import (
    TARGETS,
    WORKDIR,
    cli_env,
    end_tagged_run,
    python_exe,
    require_target,
    require_toxiproxy,
    run_faultload_run,
    tagged_named,
    tagged_processes,
    wait_until,
)

from faultload.faults.toxiproxy import process_gone


@pytest.mark.integration
def test_router_fault_with_proxies_off_is_applied_or_refused(fault_home: Path, tmp_path: Path):
    """A router fault does not need Toxiproxy: with --proxies off it must either be applied (and
    show in the report's faults block) or be refused as bad usage - never silently ignored."""
    require_target("0.4.0")
    out = tmp_path / "report.json"
    proc, tag = run_faultload_run(
        fault_home,
        [
            "--fault",
            "router:stall@0.5+2",
            "--proxies",
            "off",
            "--requests",
            "200",
            "--time-scale",
            "0.1",
            "--quiet",
            "--json-out",
            str(out),
        ],
        timeout_s=240.0,
    )
    wait_until(lambda: not tagged_processes(tag), timeout_s=15.0)
    if proc.returncode == 2:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "router" in lines[0], proc.stderr[-2000:]
        return
    rep = json.loads(out.read_text())
    assert [f["spec"] for f in rep["faults"]["applied"]] == ["router:stall@0.5+2.0"], rep["faults"]


# --------------------------------------------------------------------------- killed mid-fault


def _toxiproxy_api(tag: str) -> tuple[int, int] | None:
    """(pid, API port) of the tagged toxiproxy-server, once it runs."""
    for proc in tagged_processes(tag):
        try:
            argv = proc.cmdline()
        except psutil.Error:
            continue
        if argv and argv[0].endswith("toxiproxy-server") and "-port" in argv:
            return proc.pid, int(argv[argv.index("-port") + 1])
    return None


def _proxies(api_port: int) -> dict:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/proxies", timeout=1.0) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError):
        return {}


def _listening(address: str) -> bool:
    host, _, port = address.rpartition(":")
    with socket.socket() as sock:
        sock.settimeout(1.0)
        try:
            sock.connect((host, int(port)))
            return True
        except OSError:
            return False


@dataclass
class Killed:
    tag: str
    toxiproxy_pid: int
    addresses: dict[str, str]  # "api"/"edge"/"backend" -> host:port
    named_before: list[str]
    toxiproxy_gone: bool = False
    still_listening: list[str] = field(default_factory=list)
    named_after: list[str] = field(default_factory=list)
    others_after: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def killed_mid_fault(tmp_path_factory) -> Killed:
    """Start a run whose edge has a 600 s latency toxic in force, SIGKILL the `faultload run`
    process, and record (within bounded waits) what is left. Leftovers are killed afterwards,
    by pid, so the machine stays clean whatever the tests conclude."""
    require_target("0.4.0")
    require_toxiproxy()
    cwd = tmp_path_factory.mktemp("killed")
    (cwd / ".faultload").mkdir()
    (cwd / ".faultload" / "targets").symlink_to(TARGETS, target_is_directory=True)
    (cwd / ".faultload" / "tools").symlink_to(WORKDIR / "tools", target_is_directory=True)
    tag = uuid.uuid4().hex
    cmd = [
        python_exe(),
        "-m",
        "faultload.cli.main",
        "run",
        "--requests",
        "2000",
        "--router-mode",
        "barrier",
        "--barrier",
        "100000",
        "--barrier-timeout",
        "600",
        "--fault",
        "edge:latency:latency=100@1+600",
        "--quiet",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=cli_env(tag, cwd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        api = wait_until(lambda: _toxiproxy_api(tag), timeout_s=120.0, every_s=0.2)
        assert api, "toxiproxy-server never started"
        pid, api_port = api

        def toxic_in_force() -> dict | None:
            proxies = _proxies(api_port)
            return proxies if proxies.get("edge", {}).get("toxics") else None

        proxies = wait_until(toxic_in_force, timeout_s=120.0, every_s=0.2)
        assert proxies, f"the edge toxic never appeared: {_proxies(api_port)}"
        assert proc.poll() is None, "the run ended before it was killed"
        addresses = {
            "api": f"127.0.0.1:{api_port}",
            "edge": proxies["edge"]["listen"],
            "backend": proxies["backend"]["listen"],
        }
        assert all(_listening(a) for a in addresses.values()), addresses
        state = Killed(tag, pid, addresses, tagged_named(tag))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        state.toxiproxy_gone = bool(wait_until(lambda: process_gone(pid), timeout_s=15.0))
        wait_until(lambda: not any(_listening(a) for a in addresses.values()), timeout_s=15.0)
        state.still_listening = [name for name, a in addresses.items() if _listening(a)]
        wait_until(lambda: not tagged_named(tag), timeout_s=15.0)
        state.named_after = tagged_named(tag)
        wait_until(lambda: not tagged_processes(tag), timeout_s=5.0)
        state.others_after = []
        for p in tagged_processes(tag):
            try:
                state.others_after.append(f"{p.pid}: {' '.join(p.cmdline())[:150]}")
            except psutil.Error:
                pass
        return state
    finally:
        end_tagged_run(proc, tag)


@pytest.mark.integration
def test_killed_run_leaves_no_toxiproxy_and_no_proxy_listening(killed_mid_fault: Killed):
    k = killed_mid_fault
    assert any("toxiproxy-server" in line for line in k.named_before), k.named_before
    assert k.toxiproxy_gone, f"toxiproxy-server {k.toxiproxy_pid} outlived the killed run"
    assert k.still_listening == [], {n: k.addresses[n] for n in k.still_listening}
    # The router and the SkyRL server are tied to the run the same way.
    assert k.named_after == [], k.named_after


@pytest.mark.integration
def test_killed_run_leaves_no_process_at_all(killed_mid_fault: Killed):
    assert killed_mid_fault.others_after == [], killed_mid_fault.others_after


# --------------------------------------------------------------------------- both streams, end to end


@pytest.mark.integration
def test_both_streams_and_upstream_toxics_are_applied_and_healed(fault_home: Path, tmp_path: Path):
    """`stream=both` is the pair of toxics on the real Toxiproxy during its window, an upstream
    toxic is one, and after the windows (the run still going) the edge has no toxic left."""
    require_target("0.4.0")
    out = tmp_path / "report.json"
    tag = uuid.uuid4().hex
    cmd = [
        python_exe(),
        "-m",
        "faultload.cli.main",
        "run",
        "--requests",
        "64",
        "--time-scale",
        "0.05",
        "--router-mode",
        "latency",
        "--gen-seconds",
        "5",
        "--quiet",
        "--json-out",
        str(out),
        "--fault",
        "edge:latency:latency=200,stream=both@0.5+2",
        "--fault",
        "edge:latency:latency=100,stream=upstream@0.5+2",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=fault_home,
        env=cli_env(tag, fault_home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        api = wait_until(lambda: _toxiproxy_api(tag), timeout_s=120.0, every_s=0.1)
        assert api, "toxiproxy-server never started"

        def edge_toxics() -> list:
            return _proxies(api[1]).get("edge", {}).get("toxics") or []

        during = wait_until(lambda: edge_toxics() if len(edge_toxics()) == 3 else None, timeout_s=120.0, every_s=0.1)
        assert during, f"the toxics never appeared: {edge_toxics()}"
        assert sorted((t["name"], t["stream"]) for t in during) == [
            ("fl0_latency_downstream", "downstream"),
            ("fl0_latency_upstream", "upstream"),
            ("fl1_latency_upstream", "upstream"),
        ]
        healed = wait_until(
            lambda: proc.poll() is None and _proxies(api[1]).get("edge") and not edge_toxics(),
            timeout_s=30.0,
            every_s=0.1,
        )
        assert healed, f"toxics left after their windows: {edge_toxics()} (run ended: {proc.poll() is not None})"
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    rep = json.loads(out.read_text())
    applied = rep["faults"]["applied"]
    assert [(f["fault"]["stream"], f["streams"], f["removed_by"], f["error"], f["remove_error"]) for f in applied] == [
        ("both", ["downstream", "upstream"], "schedule", None, None),
        ("upstream", ["upstream"], "schedule", None, None),
    ]
    assert rep["completed"] == 64, (rep["completed"], rep["failed"], err[-2000:])
