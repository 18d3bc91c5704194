"""A server under test: launched by us (its family's launcher, in the target's venv) or started by someone else
(url=). How a family launches is its adapter's (``faultload.targets.family``); what every server is, here.

Either way the trial gets a ``ServerHandle``: its base URL, its pid (when
known, for process metrics), its version, where its log goes, and ``stop()``.
A launched server can also be paused (SIGSTOP of the API process alone: its
engine stand-in only sleeps) and respawned on its port (``server:restart``);
the handle then carries the new process, so whoever reads ``pid`` follows it.
A server that is a process tree (a Ray cluster its launcher starts: ``tree``) is measured and paused whole.
Every launcher starts a session of its own, and a stop kills that session: a process that left the
launcher's process group (a Ray worker) goes with it.
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import psutil

from faultload.host import scratch
from faultload.host.network import http_get_json, port_is_free
from faultload.host.pausing import Pauser
from faultload.host.processes import popen_tied
from faultload.model.target import TargetSpec

STARTUP_TIMEOUT_S = 180.0
STOP_GRACE_S = 15.0
# The base model every launched target serves and every trial's sessions ask for.
BASE_MODEL = "Qwen/Qwen3-0.6B"


class ServerStartError(RuntimeError):
    """The target did not come up; the message carries its log tail."""


@dataclass
class ServerHandle:
    spec: TargetSpec
    url: str
    pid: int | None
    version: str | None
    log_path: Path | None = None
    process: subprocess.Popen | None = None
    details: dict[str, Any] = field(default_factory=dict)
    # How it was launched, to launch it again (server:restart): command, working dir, environment.
    launch: tuple[list[str], Path, dict[str, str]] | None = None
    restarting: bool = False  # between a restart's stop and the new process: not an exit
    restarts: int = 0
    # The server is the launcher's process tree, not the launcher alone (its metrics sum it, a pause stops it)
    tree: bool = False
    # Folders the launch made outside its run dir (a Ray temp dir), removed once it is stopped
    scratch: list[Path] = field(default_factory=list)
    _pauser: Pauser | None = field(default=None, repr=False)

    def pauser(self) -> Pauser:
        if self._pauser is None:
            self._pauser = Pauser(lambda: self.pids() if self.alive() else [], "server")
        return self._pauser

    def pids(self) -> list[int]:
        """The server's processes: its pid, and with ``tree`` every descendant of it."""
        if self.pid is None:
            return []
        return process_tree(self.pid) if self.tree else [self.pid]

    @property
    def healthz_url(self) -> str:
        return f"{self.url}/api/v1/healthz"

    def log_tail(self, lines: int = 20) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def alive(self) -> bool:
        """The process runs, or a restart is replacing it (a restart is not an exit)."""
        return self.restarting or self.process is None or self.process.poll() is None

    def respawn(self) -> None:
        """Start the launcher again on the same port (its log appended); does not wait for /healthz."""
        if self.launch is None:
            raise RuntimeError(f"server {self.url} was not launched by faultload: it cannot be restarted")
        cmd, cwd, env = self.launch
        assert self.log_path is not None
        self.process = spawn_launcher(cmd, cwd, env, self.log_path, append=True)
        self.pid = self.process.pid
        self.restarts += 1

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM the server's process group, SIGKILL it after ``grace_s``. Idempotent."""
        if self._pauser is not None:
            self._pauser.resume_all()  # a stopped process would keep SIGTERM pending
        proc = self.process
        if proc is None:
            return
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.details["stop"] = f"did not exit {grace_s:.0f}s after SIGTERM; killed"
        _signal_group(proc, signal.SIGKILL)  # the engine sleeper and anything else left in the group
        _kill_session(proc.pid)  # what left the group (Ray's workers each make their own)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if not self.restarting:
            for path in self.scratch:
                scratch.remove(path)


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants now (none but ``pid`` when it is gone)."""
    try:
        return [pid] + [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return [pid]


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (a launcher's: it started the session)."""
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid:
                os.kill(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_healthy(
    url: str, timeout_s: float, process: subprocess.Popen | None = None, tls: ssl.SSLContext | None = None
) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            return False
        _, body = http_get_json(f"{url}/api/v1/healthz", timeout_s=2.0, tls=tls)
        if body is not None:
            return True
        time.sleep(0.2)
    return False


def spawn_launcher(cmd: list[str], cwd: Path, env: dict[str, str], log_path: Path, append: bool) -> subprocess.Popen:
    """The launcher in its own session, dying with this process (SIGKILL acts on a stopped one too)."""
    with open(log_path, "ab" if append else "wb") as log:
        return popen_tied(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )


def require_free_port(port: int) -> None:
    """ServerStartError for a port already taken, before a family's launch writes or starts anything."""
    if not port_is_free("127.0.0.1", port):
        raise ServerStartError(f"server port {port} on 127.0.0.1 is already in use")


def start_launcher(
    spec: TargetSpec,
    cmd: list[str],
    run_dir: Path,
    env: dict[str, str],
    port: int,
    while_starting: Callable[[], None] | None,
    tree: bool = False,
) -> ServerHandle:
    """Spawn a family's launcher (its log: ``run_dir/server.log``) and return its handle once /healthz answers.

    ``while_starting`` runs once the server is spawned, before the wait: its start-up (imports, patches)
    then overlaps the caller's (the router and Toxiproxy). If it raises, or the server does not come up
    (ServerStartError with its log's tail), the server is stopped: no process is left behind.
    """
    log_path = run_dir / "server.log"
    proc = spawn_launcher(cmd, run_dir, env, log_path, append=False)
    handle = ServerHandle(
        spec, f"http://127.0.0.1:{port}", proc.pid, None, log_path, proc, launch=(cmd, run_dir, env), tree=tree
    )
    try:
        if while_starting is not None:
            while_starting()
        healthy = wait_healthy(handle.url, STARTUP_TIMEOUT_S, proc)
    except BaseException:  # Ctrl-C or the caller's failure while starting: the handle never reaches the caller
        handle.stop(grace_s=3)
        raise
    if not healthy:
        code = proc.poll()
        handle.stop(grace_s=3)
        state = f"exited with code {code}" if code is not None else f"no /healthz within {STARTUP_TIMEOUT_S:.0f}s"
        raise ServerStartError(f"target {spec.text} failed to start ({state}); log tail:\n{handle.log_tail()}")
    handle.version = read_launch_version(log_path) or spec.version
    return handle


def read_launch_version(log_path: Path) -> str | None:
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("faultload-launch: version "):
            return line.split()[-1]
    return None


def attach_url(spec: TargetSpec, server_pid: int | None, tls: ssl.SSLContext | None = None) -> ServerHandle:
    """A server someone else started: check it answers /healthz (over https with ``tls``)."""
    assert spec.url is not None
    if not wait_healthy(spec.url, timeout_s=10.0, tls=tls):
        raise ServerStartError(f"target {spec.text}: no answer from {spec.url}/api/v1/healthz")
    return ServerHandle(spec, spec.url, server_pid, None)
