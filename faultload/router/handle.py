"""The parent's side of a router: start it as a subprocess, crash, restart, control, read its stats.

Runs in the harness, not in the router, so it imports neither aiohttp nor the
serving code; the router is launched as ``python -m faultload.router``.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from faultload.host import scratch
from faultload.host.pausing import Pauser
from faultload.host.processes import child_environment, popen_tied
from faultload.model.faults import KIND
from faultload.model.router import CLOSE_IDLE_SIGNAL, SHUTDOWN_S, RouterConfig
from faultload.router.completions import count_completions, read_completions, repeated_completions


def _process_gone(pid: int) -> bool:
    """True if ``pid`` no longer runs (a zombie counts as gone: it holds no socket)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """Poll until all ``pids`` are gone or the timeout passes; returns the ones left."""
    deadline = time.monotonic() + timeout_s
    left = [p for p in pids if not _process_gone(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.01)
        left = [p for p in left if not _process_gone(p)]
    return left


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


class RouterHandle:
    """A running router subprocess (its own process group) and its control calls."""

    def __init__(self, config: RouterConfig, host: str, compiled: Path | None = None) -> None:
        self.config = config
        self.host = host
        self.compiled = compiled  # the compiled router's binary, which serves a one-process config
        self.port = 0
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._workers: list[int] = []
        self._log_dir = scratch.make("faultload-router-")
        # router:pause stops every router process at once: the kernel still accepts connections into
        # the listen backlog, nobody answers, and SIGCONT resumes every held generation where it was.
        self._pauser = Pauser(self.pids, "router")

    # -- lifecycle

    @property
    def pid(self) -> int:
        """Main (supervisor or sole server) pid of the current incarnation."""
        return self._proc.pid if self._proc is not None else -1

    @property
    def impl(self) -> str:
        """Which router serves the current config: "compiled" (one process, a binary given) or "python"."""
        return "compiled" if self.compiled is not None and self.config.procs == 1 else "python"

    def _spawn(self, port: int, ready_timeout_s: float) -> None:
        # the folder holding this faultload package (a checkout, or site-packages when installed), so the
        # router runs the same faultload as its parent whatever the working directory
        root = str(Path(__file__).resolve().parents[2])
        env = child_environment()
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        program = [str(self.compiled)] if self.impl == "compiled" else [sys.executable, "-m", "faultload.router"]
        cmd = [*program, "--host", self.host, "--port", str(port), "--completions-dir", str(self._log_dir)]
        self._log_dir.mkdir(parents=True, exist_ok=True)
        out_path, err_path = self._log_dir / "stdout.log", self._log_dir / "stderr.log"
        with open(out_path, "wb") as out, open(err_path, "ab") as err:
            self._proc = popen_tied(
                cmd + self.config.to_argv(),
                sig=signal.SIGTERM,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                env=env,
                cwd=root,
            )
        try:
            self.port = self._wait_ready_line(out_path, ready_timeout_s)
            self.url = f"http://{self.host}:{self.port}"
            self._wait_health(ready_timeout_s)
        except RuntimeError:
            self._kill_all()
            raise RuntimeError(f"router failed to start: {self.stderr_tail()}") from None
        self._workers = self._child_pids()

    def _wait_ready_line(self, out_path: Path, timeout_s: float) -> int:
        assert self._proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            m = re.search(rb"READY (\d+)", out_path.read_bytes())
            if m:
                return int(m.group(1))
            if self._proc.poll() is not None:
                raise RuntimeError("exited")
            time.sleep(0.02)
        raise RuntimeError("timeout")

    def _wait_health(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if self._request("GET", "/health", timeout_s=1.0)[0] == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.02)
        raise RuntimeError("no /health")

    def _child_pids(self) -> list[int]:
        try:
            return [c.pid for c in psutil.Process(self.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def pids(self) -> list[int]:
        """All live router process pids (main first), e.g. for CPU accounting."""
        if self._proc is None or self._proc.poll() is not None:
            return [p for p in self._workers if not _process_gone(p)]
        return [self.pid] + [p for p in self._child_pids() if not _process_gone(p)]

    def stderr_tail(self, lines: int = 10) -> str:
        """Last lines of the router's stderr (all incarnations), joined by ' | '."""
        try:
            text = (self._log_dir / "stderr.log").read_bytes().decode(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def _kill_all(self) -> None:
        """SIGKILL workers first (the supervisor reaps them: no orphans), then the group."""
        if self._proc is None:
            return
        workers = self._child_pids() or self._workers
        for pid in workers:
            _kill(pid, signal.SIGKILL)
        _wait_gone(workers, 5.0)
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self._proc.wait(5.0)
        except subprocess.TimeoutExpired:
            pass

    def crash(self) -> None:
        """SIGKILL every router process; the port stops answering until :meth:`restart`."""
        self._kill_all()

    def reconfigure(self, config: RouterConfig, ready_timeout_s: float = 20.0) -> None:
        """Restart on the same port with ``config`` (a new mode, barrier or latency)."""
        config.validate()
        self.config = config
        self.restart(ready_timeout_s)

    def restart(self, ready_timeout_s: float = 20.0) -> None:
        """Start again on the same port and config (stopping a live one first); wait until ready."""
        self.stop(remove_logs=False)
        self._spawn(self.port, ready_timeout_s)

    def stop(self, remove_logs: bool = True) -> None:
        """SIGTERM, then SIGKILL after a few seconds; waits for exit. Idempotent."""
        self._pauser.resume_all()  # a stopped process would keep SIGTERM pending
        proc = self._proc
        if proc is not None and proc.poll() is None:
            workers = self._child_pids()
            _kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(SHUTDOWN_S + 5.0)
            except subprocess.TimeoutExpired:
                self._kill_all()
            _wait_gone(workers, 2.0)
        if proc is not None and proc.poll() is None:
            self._kill_all()
        if remove_logs:
            scratch.remove(self._log_dir)

    def __enter__(self) -> RouterHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- control

    def _request(self, method: str, path: str, body: Any = None, timeout_s: float = 5.0) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout_s)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def _control(self, path: str, body: Any = None) -> dict[str, Any]:
        status, raw = self._request("POST", path, body)
        if status != 200:
            raise RuntimeError(f"router {path} answered {status}: {raw[:200].decode(errors='replace')}")
        return json.loads(raw)

    def stats(self, timeout_s: float = 5.0) -> dict[str, Any]:
        """GET /stats: counters summed over all router processes, and ``impl`` (which router served)."""
        status, raw = self._request("GET", "/stats", timeout_s=timeout_s)
        if status != 200:
            raise RuntimeError(f"router /stats answered {status}")
        return {**json.loads(raw), "impl": self.impl}

    def completions(self, since_epoch: float = 0.0) -> dict[int, float]:
        """nonce -> first completion (epoch seconds) since ``since_epoch``, over every incarnation."""
        return read_completions(self._log_dir, since_epoch)

    def repeated_completions(self, since_epoch: float = 0.0) -> dict[int, int]:
        """nonce -> completions, for the nonces completed more than once since ``since_epoch``."""
        return repeated_completions(self._log_dir, since_epoch)

    def completion_count(self) -> int:
        """Completions answered so far over every incarnation (a count, not the nonces: cheap to poll)."""
        return count_completions(self._log_dir)

    # Each window carries its deadline (CLOCK_MONOTONIC is system-wide): a call that waits in the socket of a
    # paused router is applied when the router resumes and must still end when the schedule meant it to,
    # not seconds later, in the next trial on a shared stack (nightly 2026-12-01, a truncate sent during a
    # router pause cut the next trial's first 47 bodies).
    def timed_fault(self, kind: str, seconds: float, *attributes: Any) -> None:
        """Open the router's ``kind`` window for ``seconds`` (its own timer ends it): POST ``/control/<kind>``.

        ``attributes`` are the kind's, in the order its record states them (required, then optional;
        ``model.fault_kinds``), sent by name; one left out takes the router's default.
        """
        names = KIND[kind].attribute_names
        body = {"seconds": seconds, **dict(zip(names, attributes)), "until_monotonic": time.monotonic() + seconds}
        self._control(f"/control/{kind}", body)

    def reset_faults(self) -> None:
        self._control("/control/reset")

    def close_idle(self) -> None:
        """Have every router process close its keep-alive connections (each does only if nothing is in flight).

        The load is over: the router's idle timeout runs out now, not after the
        server's own keep-alive to it. Asynchronous, like the server's close.
        """
        for pid in self.pids():  # the supervisor ignores it
            _kill(pid, CLOSE_IDLE_SIGNAL)

    def pause(self, seconds: float) -> None:
        """SIGSTOP every router process (a weight sync: connections accepted, nothing answered)."""
        self._pauser.pause(seconds)

    def resume(self) -> None:
        """SIGCONT them (after the last of nested pauses): held generations go on."""
        self._pauser.resume()


def start_router(
    config: RouterConfig,
    host: str = "127.0.0.1",
    port: int = 0,
    ready_timeout_s: float = 20.0,
    compiled: Path | None = None,
) -> RouterHandle:
    """Launch the router in its own session; return once /health answers.

    ``compiled`` (:func:`faultload.router.compiled.find_router`) serves every
    one-process config; ``python -m faultload.router`` serves the others, and
    all of them when it is None. Raises ValueError for a bad config and
    RuntimeError("router failed to start: ...") otherwise, leaving no process behind.
    """
    config.validate()
    handle = RouterHandle(config, host, compiled)
    try:
        handle._spawn(port, ready_timeout_s)
    except BaseException:
        handle.stop()
        raise
    return handle
