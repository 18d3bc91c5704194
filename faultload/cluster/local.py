"""A Ray cluster of several nodes on this machine, on loopback addresses other than 127.0.0.1.

For the tests and ``bench/`` (and anyone trying ``--ray`` on one machine):
``ray start`` from this Python's environment, the head on the first address
and one node on each further address, all sharing a temp dir of their own.
Ray rewrites 127.0.0.1/localhost to the machine's external address, so
those are refused. ``stop`` kills exactly the processes of this cluster (every
process whose command line names its temp dir, and their descendants), not
other Ray clusters on the machine as ``ray stop`` would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil

from faultload.host import scratch
from faultload.host.network import pick_free_port
from faultload.host.processes import child_environment

START_TIMEOUT_S = 90.0
# Ray's authentication, stated for every node this cluster starts, so that what the user's machine holds does
# not decide it: Ray 2.59+ writes ~/.ray/auth_token on any local ray.init(), and with that file present a node
# joining with `ray start --address` then failed for want of a token in its environment (5 of 5 Ray tests). The
# cluster is a test rig on loopback addresses, as it ran before that file existed.
AUTH_MODE = "disabled"


class LocalCluster:
    """``with LocalCluster(("127.0.0.3", "127.0.0.2")) as cluster:`` ... ``cluster.address``."""

    def __init__(self, addresses: tuple[str, ...] = ("127.0.0.3", "127.0.0.2"), cpus_per_node: int = 1) -> None:
        if not addresses or any(a in ("127.0.0.1", "localhost") or not a.startswith("127.") for a in addresses):
            raise ValueError(f"LocalCluster: loopback addresses other than 127.0.0.1 only, got {addresses}")
        self.addresses = addresses
        self.cpus = cpus_per_node
        self.temp_dir = ""
        self.address = ""

    def _ray(self, *args: str) -> None:
        ray_cli = Path(sys.executable).with_name("ray")
        env = child_environment({"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": AUTH_MODE})
        proc = subprocess.run(
            [str(ray_cli), "start", *args, f"--num-cpus={self.cpus}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"ray start {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")

    def start(self) -> "LocalCluster":
        # Ray's socket paths must stay under 107 bytes: a short temp dir, not pytest's deep one.
        self.temp_dir = str(scratch.make("fl-ray-", "/tmp"))
        head = self.addresses[0]
        port = pick_free_port(head)
        self.address = f"{head}:{port}"
        try:
            self._ray(
                "--head",
                f"--node-ip-address={head}",
                f"--port={port}",
                "--include-dashboard=false",
                "--disable-usage-stats",
                f"--temp-dir={self.temp_dir}",
            )
            for other in self.addresses[1:]:
                self._ray(f"--address={self.address}", f"--node-ip-address={other}")
        except BaseException:
            self.stop()
            raise
        return self

    def processes(self) -> list[psutil.Process]:
        """This cluster's processes: those naming its temp dir, and their descendants."""
        roots = []
        for proc in psutil.process_iter(["cmdline"]):
            if self.temp_dir and any(self.temp_dir in part for part in proc.info["cmdline"] or ()):
                roots.append(proc)
        found = {p.pid: p for p in roots}
        for root in roots:
            try:
                found.update({c.pid: c for c in root.children(recursive=True)})
            except psutil.NoSuchProcess:
                pass
        return list(found.values())

    def stop(self, timeout_s: float = 3.0) -> None:
        """Kill every process of this cluster (TERM, then KILL after ``timeout_s``) and remove its temp dir."""
        procs = self.processes()
        for proc in procs:
            try:
                proc.terminate()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(procs, timeout=timeout_s)
        for proc in alive:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=5.0)
        deadline = time.monotonic() + 5.0
        while self.temp_dir and os.path.isdir(self.temp_dir) and time.monotonic() < deadline:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        if self.temp_dir:
            scratch.remove(self.temp_dir)

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
