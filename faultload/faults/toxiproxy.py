"""The real Toxiproxy server: finding it, checking it, running it.

The server runs in its own process group so a Ctrl-C on the terminal reaches
the suite, which then heals the faults *through* the still-running server before
stopping it.  If the suite itself dies (SIGKILL), the kernel kills the server
too (``PR_SET_PDEATHSIG``), and a pid file lets the next run reap anything that
was left behind anyway.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

from faultload.faults.control import FaultControlError, ToxiproxyControl  # noqa: F401  (re-exported)
from faultload.host.network import pick_free_port
from faultload.host.processes import child_environment, popen_tied

PINNED_VERSION = "2.12.0"
BINARY_NAME = "toxiproxy-server"
CONTAINER_IMAGE = f"ghcr.io/shopify/toxiproxy:{PINNED_VERSION}"


def find_toxiproxy(tool_dir: Path) -> Path | None:
    """The toxiproxy-server binary: ``tool_dir`` first (where setup puts it), then PATH."""
    candidate = Path(tool_dir) / BINARY_NAME
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which(BINARY_NAME)
    return Path(found) if found else None


def binary_version(binary: Path, timeout_s: float = 5.0) -> str | None:
    """Version printed by ``binary --version`` (e.g. ``2.12.0``); None if it does not run."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = (out.stdout + out.stderr).split()
    return words[-1] if out.returncode == 0 and words else None


def find_go(named: str | None = None) -> str | None:
    """The Go toolchain: ``named`` (the caller's ``$GO``) if given, else PATH, else /usr/local/go/bin/go.

    A ``named`` one that is not executable means no Go (it is not silently
    replaced by another), as a user who set ``GO`` would expect.
    """
    if named:
        return named if os.access(named, os.X_OK) else None
    found = shutil.which("go")
    if found:
        return found
    fallback = Path("/usr/local/go/bin/go")
    return str(fallback) if fallback.is_file() and os.access(fallback, os.X_OK) else None


def check_toxiproxy(tool_dir: Path, explicit: Path | None = None, go: str | None = None) -> tuple[bool, str]:
    """Readiness for ``faultload doctor``: (ok, one-line message saying how to fix it).

    ``explicit`` is a ``--toxiproxy PATH`` given by the user; ``go`` overrides
    the Go toolchain lookup (tests use it to simulate a machine without Go).
    """
    binary = Path(explicit) if explicit else find_toxiproxy(tool_dir)
    if binary is None or not binary.exists():
        where = f"--toxiproxy {explicit}" if explicit else f"{tool_dir} or PATH"
        go = go if go is not None else find_go()
        if go:
            return False, (
                f"toxiproxy-server not found in {where}: run `faultload setup` "
                f"(builds {PINNED_VERSION} with go, ~1 min) or pass --toxiproxy PATH"
            )
        return False, (
            f"toxiproxy-server not found in {where} and no `go` to build it: get the "
            f"{PINNED_VERSION} release binary or the container image {CONTAINER_IMAGE}, "
            f"then pass --toxiproxy PATH"
        )
    version = binary_version(binary)
    if version is None:
        return (
            False,
            f"{binary} does not run (`{binary} --version` failed); run `faultload setup` or pass --toxiproxy PATH",
        )
    if version != PINNED_VERSION:
        return True, f"toxiproxy-server {version} at {binary} (pinned {PINNED_VERSION}: `faultload setup` installs it)"
    return True, f"toxiproxy-server {version} at {binary}"


class ToxiproxyServer:
    """One toxiproxy-server process on a free loopback port, with its log in ``log_dir``.

    ``die_with_parent`` ties the server's life to the thread that starts it (the
    kernel's parent-death signal fires when that *thread* exits), so it is only
    applied when started from the main thread; the pid file covers the rest
    (see :func:`reap_stale`).  ``seed`` seeds Toxiproxy's toxicity choices.
    """

    def __init__(
        self,
        binary: Path,
        log_dir: Path,
        host: str = "127.0.0.1",
        port: int | None = None,
        seed: int | None = None,
        log_level: str = "info",
        start_timeout_s: float = 10.0,
        stop_timeout_s: float = 5.0,
        die_with_parent: bool = True,
        rng: random.Random | None = None,
    ) -> None:
        self.binary = Path(binary)
        self.log_dir = Path(log_dir)
        self.host = host
        self.port = port
        self.seed = seed
        self.log_level = log_level
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.die_with_parent = die_with_parent
        self.rng = rng or random.Random()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None
        self.pid_path: Path | None = None
        self._log: IO[bytes] | None = None

    @property
    def api_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def control(self, timeout_s: float = 5.0) -> ToxiproxyControl:
        """A control adapter for this server."""
        if self.port is None:
            raise FaultControlError("toxiproxy server not started")
        return ToxiproxyControl(self.host, self.port, timeout_s=timeout_s)

    def start(self, attempts: int = 3) -> "ToxiproxyServer":
        """Launch and wait (bounded) until ``/version`` answers; retry on a port race."""
        if self.process is not None:
            return self
        self.log_dir.mkdir(parents=True, exist_ok=True)
        fixed_port = self.port
        last_error = ""
        for _ in range(attempts):
            self.port = fixed_port or pick_free_port(self.host, rng=self.rng)
            error = self._launch_and_wait()
            if error is None:
                return self
            last_error = error
            self.stop()
            if fixed_port:
                break
        raise FaultControlError(f"toxiproxy-server did not start: {last_error} (log: {self.log_path})")

    def _launch_and_wait(self) -> str | None:
        self.log_path = self.log_dir / f"toxiproxy-{self.port}.log"
        self._log = open(self.log_path, "ab")
        cmd = [str(self.binary), "-host", self.host, "-port", str(self.port)]
        if self.seed is not None:
            cmd += ["-seed", str(self.seed)]
        tie = self.die_with_parent and threading.current_thread() is threading.main_thread()
        self.process = popen_tied(
            cmd,
            tie=tie,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=child_environment({"LOG_LEVEL": self.log_level}),
        )
        self.pid_path = self.log_dir / f"toxiproxy-{self.port}.pid"
        self.pid_path.write_text(json.dumps({"pid": self.process.pid, "port": self.port, "binary": str(self.binary)}))
        deadline = time.monotonic() + self.start_timeout_s
        for _ in range(int(self.start_timeout_s / 0.05) + 1):
            if self.process.poll() is not None:
                return f"exited with {self.process.returncode}: {self._log_tail()}"
            if self._answers():
                return None
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        return f"API at {self.api_url} did not answer within {self.start_timeout_s} s"

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.api_url + "/version", timeout=0.5) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def _log_tail(self, limit: int = 400) -> str:
        try:
            text = self.log_path.read_bytes()[-limit:].decode(errors="replace") if self.log_path else ""
        except OSError:
            return ""
        return " | ".join(line for line in text.splitlines()[-3:])

    def stop(self) -> None:
        """Terminate the process group, then kill it; idempotent, waits (bounded)."""
        proc, self.process = self.process, None
        if proc is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
                try:
                    proc.wait(timeout=self.stop_timeout_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.pid_path is not None:
            self.pid_path.unlink(missing_ok=True)
            self.pid_path = None

    def __enter__(self) -> "ToxiproxyServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def process_gone(pid: int) -> bool:
    """True when no thread of ``pid`` is still running.

    The thread-group leader of a multithreaded (Go) process can show as a zombie
    while other threads are still tearing down, sockets open; so every thread
    in /proc/PID/task is checked.
    """
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return True
    for task in tasks[:10_000]:
        try:
            state = (task / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            return False
    return True


def _is_toxiproxy(pid: int, port: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(argv) and argv[0].endswith(BINARY_NAME.encode()) and str(port).encode() in argv


def reap_stale(log_dir: Path, wait_s: float = 5.0) -> list[int]:
    """Kill toxiproxy servers left behind by a run that died; returns the pids killed.

    Only processes whose pid file is in ``log_dir`` *and* whose command line is
    still that toxiproxy-server on that port are touched (pids get reused).
    """
    killed: list[int] = []
    for pid_file in sorted(Path(log_dir).glob("toxiproxy-*.pid"))[:100]:
        try:
            info = json.loads(pid_file.read_text())
            pid, port = int(info["pid"]), int(info["port"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _is_toxiproxy(pid, port):
            try:
                os.killpg(pid, signal.SIGKILL) if os.getpgid(pid) == pid else os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
        pid_file.unlink(missing_ok=True)
    deadline = time.monotonic() + wait_s
    while killed and time.monotonic() < deadline and not all(process_gone(p) for p in killed):
        time.sleep(0.05)
    return killed
