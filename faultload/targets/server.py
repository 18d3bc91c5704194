"""A server under test: launched by us (SkyRL venv) or started by someone else (url=).

Either way the trial gets a ``ServerHandle``: its base URL, its pid (when
known, for process metrics), its version, where its log goes, and ``stop()``.
A launched server can also be paused (SIGSTOP of the API process alone: its
engine stand-in only sleeps) and respawned on its port (``server:restart``);
the handle then carries the new process, so whoever reads ``pid`` follows it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from faultload.host.network import http_get_json
from faultload.host.network import port_is_free
from faultload.host.pausing import Pauser
from faultload.host.processes import popen_tied
from faultload.model.target import TargetSpec
from faultload.host.processes import child_environment

_HERE = Path(__file__).resolve().parent
LAUNCHER = _HERE / "skyrl_launch.py"
STARTUP_TIMEOUT_S = 180.0
STOP_GRACE_S = 15.0
BASE_MODEL = "Qwen/Qwen3-0.6B"
# A checkout that waits this long for one of the API's DB connections (SQLAlchemy's 5 + 10, whose own
# timeout is 30 s) is logged as pool exhaustion: the server's queries take milliseconds, so a second's
# wait is a pool with no connection to give, and a heartbeat (the SDK's 10 s timeout) starving behind it.
POOL_WAIT_S = 1.0

# faultload's names for the server's knobs -> SkyRL EngineConfig fields.
ENGINE_KNOBS = {
    "forwarding_max_connections": "forwarding_inference_max_connections",
    "forwarding_timeout_s": "forwarding_inference_timeout_sec",
    "retrieved_ttl_s": "external_future_retrieved_ttl_sec",
}


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
    _pauser: Pauser | None = field(default=None, repr=False)

    def pauser(self) -> Pauser:
        if self._pauser is None:
            self._pauser = Pauser(lambda: [self.pid] if self.pid and self.alive() else [], "server")
        return self._pauser

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
        self.process = _spawn_launcher(cmd, cwd, env, self.log_path, append=True)
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
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_healthy(url: str, timeout_s: float, process: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            return False
        _, body = http_get_json(f"{url}/api/v1/healthz", timeout_s=2.0)
        if body is not None:
            return True
        time.sleep(0.2)
    return False


def launch_skyrl(
    spec: TargetSpec,
    python: Path,
    run_dir: Path,
    port: int,
    router_url: str,
    regress: tuple[str, ...] = (),
    time_scale: float = 1.0,
    fixes: tuple[str, ...] = (),
    knobs: dict[str, Any] | None = None,
    profile_path: Path | None = None,
    env: dict[str, str] | None = None,
    while_starting: Callable[[], None] | None = None,
    engine: str = "sleeper",
    null_backend: dict[str, float] | None = None,
    pool_wait_s: float | None = POOL_WAIT_S,
) -> ServerHandle:
    """Start the real ``skyrl.tinker.api`` app (non-colocated megatron) and wait for /healthz.

    ``while_starting`` runs once the server is spawned, before the wait: its
    start-up (imports, patches, the DB seed: ~2.8 s) then overlaps the
    caller's (the router and Toxiproxy). If it raises, the server is stopped.
    ``engine``: ``sleeper`` (no engine: training requests never complete) or
    ``null`` (the release's engine loop, faultload's null backend; ``null_backend``
    may set its ``seconds_per_token``) — see ``skyrl_engine.py``. ``pool_wait_s``: the
    server's DB pool checkouts that wait this long for a connection are written
    to its log as ``DB pool exhausted`` (``skyrl_dbpool.py``; None: not timed).
    """
    if not port_is_free("127.0.0.1", port):
        raise ServerStartError(f"server port {port} on 127.0.0.1 is already in use")
    db_path = run_dir / "tinker.db"
    argv = [
        "--host", "127.0.0.1", "--port", str(port), "--base-model", BASE_MODEL, "--backend", "megatron",
        "--backend-config", json.dumps({"trainer.placement.colocate_all": False}),
        "--database-url", f"sqlite:///{db_path}", "--checkpoints-base", str(run_dir / "checkpoints"),
    ]
    engine_options = {ENGINE_KNOBS[k]: v for k, v in (knobs or {}).items() if v is not None}
    launch_spec = {
        "db_path": str(db_path), "router_url": router_url, "regress": list(regress), "fixes": list(fixes),
        "time_scale": time_scale, "argv": argv, "engine_options": engine_options,
        "profile_path": str(profile_path) if profile_path else None,
        "engine": engine, "null_backend": null_backend or {}, "pool_wait_s": pool_wait_s,
    }
    spec_path = run_dir / "launch.json"
    spec_path.write_text(json.dumps(launch_spec, indent=1))
    log_path = run_dir / "server.log"
    child_env = child_environment({**(env or {}), "COLUMNS": "250", "PYTHONUNBUFFERED": "1"}, drop=("PYTHONPATH",))
    cmd = [str(python), str(LAUNCHER), str(spec_path)]
    proc = _spawn_launcher(cmd, run_dir, child_env, log_path, append=False)
    handle = ServerHandle(spec, f"http://127.0.0.1:{port}", proc.pid, None, log_path, proc,
                          launch=(cmd, run_dir, child_env))
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
    handle.version = _read_launch_version(log_path) or spec.version
    return handle


def _spawn_launcher(cmd: list[str], cwd: Path, env: dict[str, str], log_path: Path, append: bool) -> subprocess.Popen:
    """The launcher in its own session, dying with this process (SIGKILL acts on a stopped one too)."""
    with open(log_path, "ab" if append else "wb") as log:
        return popen_tied(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          cwd=cwd, env=env, start_new_session=True)


def _read_launch_version(log_path: Path) -> str | None:
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("faultload-launch: version "):
            return line.split()[-1]
    return None


def attach_url(spec: TargetSpec, server_pid: int | None) -> ServerHandle:
    """A server someone else started: check it answers /healthz."""
    assert spec.url is not None
    if not wait_healthy(spec.url, timeout_s=10.0):
        raise ServerStartError(f"target {spec.text}: no answer from {spec.url}/api/v1/healthz")
    return ServerHandle(spec, spec.url, server_pid, None)
