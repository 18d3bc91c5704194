"""One raw client's job run by the compiled client's binary, and that run as a load worker's prepared client.

:class:`CompiledProcess` is the binary's side of the protocol (``client/go/main.go``): it is started with the
job's spec before the trial's clock, let go at t0, told to stop, and its history read back: the same columns
the Python client fills, checked against ``record.history``'s dtypes. Its live counters are a shared file the
parent reads directly. :class:`CompiledClient` runs one inside a Python load worker (a Ray actor, or a
trial that also trains), relaying the counters into the trial's shared array; ``client.compiled_pool`` runs
them with no Python worker at all.
"""

from __future__ import annotations

import asyncio
import json
import mmap
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from faultload.client.compiled_spec import client_spec, write_arrivals
from faultload.client.counters import LiveCounters
from faultload.client.job import COUNTER_SLOTS, WorkerJob
from faultload.record.history import ATTEMPT_COLUMNS, COLUMNS, History

READY_TIMEOUT_S = 30.0  # the binary starts in milliseconds; this bounds a machine under load
DONE_TIMEOUT_S = 30.0  # from STOP (or the deadline) to the history written: the client unwinds within 5 s
RELAY_S = 0.01  # as often as an anchored fault reads the counters (faults/schedule.py)


class CompiledClientError(RuntimeError):
    """The compiled client could not start, or ended without handing back its history: the harness's fault."""


class CompiledProcess:
    """The binary running one job: started and READY on construction (or CompiledClientError, nothing left)."""

    def __init__(self, job: WorkerJob, binary: str) -> None:
        self.job = job
        self.cpu_s = 0.0  # the binary's own CPU, once it has exited
        self.startup_cpu_s = 0.0  # of which before it said READY
        self.code: int | None = None  # its exit code, once it has exited
        self._dir = Path(tempfile.mkdtemp(prefix=f"faultload-client-{job.worker}-"))
        self._proc: subprocess.Popen | None = None
        try:
            self._start(binary)
        except BaseException:
            self.close()
            raise

    def _start(self, binary: str) -> None:
        counters = self._dir / "counters"
        counters.write_bytes(bytes(8 * len(COUNTER_SLOTS)))
        with open(counters, "r+b") as fh:
            self._map = mmap.mmap(fh.fileno(), 8 * len(COUNTER_SLOTS))
        self.counters = np.frombuffer(self._map, dtype=np.int64)  # the binary's live counters, as it adds them
        arrivals = write_arrivals(self.job, self._dir / "arrivals.f64")
        spec = client_spec(self.job, self._dir, counters, arrivals)
        self._stderr = open(self._dir / "stderr", "wb")
        self._proc = subprocess.Popen(
            [binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, bufsize=0
        )
        self.send(json.dumps(spec))  # the key is in it: on stdin, never in argv or the environment
        word, _, cpu = (self._line(READY_TIMEOUT_S) or "").partition(" ")
        if word != "READY":
            raise CompiledClientError(f"the compiled client did not start: {self.said()}")
        self.startup_cpu_s = float(cpu)  # its CPU before the load: the runtime's start, the spec, the counters' map

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def send(self, line: str) -> None:
        """One line to the binary (GO <t0>, STOP); a binary already gone is noticed by ``exited``."""
        if self._proc is None or self._proc.stdin is None:
            return
        try:
            self._proc.stdin.write(line.encode() + b"\n")
        except (BrokenPipeError, ValueError):
            pass

    def _line(self, timeout_s: float) -> str | None:
        """The binary's next stdout line within ``timeout_s``; None if it ended or said nothing in time."""
        assert self._proc is not None and self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout_s)
        if not ready:
            return None
        line = self._proc.stdout.readline()
        return line.decode(errors="replace").strip() if line else None

    def said(self) -> str:
        """What the binary wrote to stderr (its last line), or its exit code."""
        self._stderr.flush()
        text = (self._dir / "stderr").read_text(errors="replace").strip()
        return text.splitlines()[-1] if text else f"no message (exit code {self.code})"

    def exited(self) -> bool:
        """Whether the binary has ended; once it has, its exit code and its CPU from the kernel's account."""
        if self.code is not None or self._proc is None:
            return True
        pid, status, usage = os.wait4(self._proc.pid, os.WNOHANG)
        if pid == 0:
            return False
        self._proc.returncode = self.code = os.waitstatus_to_exitcode(status)
        self.cpu_s = usage.ru_utime + usage.ru_stime
        return True

    def history(self) -> tuple[History, dict[str, str], str | None]:
        """The history and error examples the binary wrote (it has exited 0), and its crash (a bug it recovered
        from, its history kept) or None; CompiledClientError when it handed back none."""
        if self.code != 0:
            raise CompiledClientError(f"the compiled client exited {self.code}: {self.said()}")
        columns = {name: self._column(name, dtype, self.job.count) for name, dtype in COLUMNS.items()}
        attempts = {name: self._column(f"attempt_{name}", dtype, None) for name, dtype in ATTEMPT_COLUMNS.items()}
        if len({col.size for col in attempts.values()}) != 1:
            raise CompiledClientError("the compiled client's attempt columns differ in length")
        crashed = json.loads((self._dir / "result.json").read_text()).get("crashed") or None
        examples = json.loads((self._dir / "examples.json").read_text())
        return History(columns, attempts), examples, crashed

    def _column(self, name: str, dtype: np.dtype, size: int | None) -> np.ndarray:
        column = np.load(self._dir / f"{name}.npy")
        if column.dtype != dtype or column.ndim != 1 or (size is not None and column.size != size):
            raise CompiledClientError(f"the compiled client's {name} is {column.dtype}[{column.size}], not {dtype}")
        return column

    def close(self) -> None:
        """Kill the binary if it still runs, and remove its folder (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if self.code is None:  # not reaped: its pid is still its own (Popen.kill would reap it first)
                os.kill(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                self.code, self.cpu_s = os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
        if hasattr(self, "counters"):
            self.counters = self.counters.copy()  # the last values kept, the map let go
            self._map.close()
        if hasattr(self, "_stderr"):
            self._stderr.close()
        shutil.rmtree(self._dir, ignore_errors=True)


class CompiledClient:
    """A prepared client inside a Python load worker (``workers._run`` starts it at t0): ``history`` and
    ``examples`` as RawClient's, ``cpu_s`` the binary's."""

    def __init__(self, job: WorkerJob, counter_array: Any, slots: int, binary: str) -> None:
        self.job = job
        self.history = History.empty(job.count)
        self.history["worker"][:] = job.worker
        self.examples: dict[str, str] = {}
        self._live = LiveCounters(counter_array, job.worker, slots)
        self._process = CompiledProcess(job, binary)

    @property
    def cpu_s(self) -> float:
        return self._process.cpu_s

    async def start(self, t0: float, stopped: Callable[[], bool]) -> "CompiledClient":
        """Run from ``t0`` until the binary ends (every request done, the deadline, or ``stopped()``)."""
        process = self._process
        try:
            process.send(f"GO {t0!r}")
            told_at = None
            while not process.exited():
                self._relay()
                if told_at is None and stopped():
                    process.send("STOP")
                    told_at = time.monotonic()
                if told_at is not None and time.monotonic() - told_at > DONE_TIMEOUT_S:
                    raise CompiledClientError(f"the compiled client did not stop within {DONE_TIMEOUT_S:.0f}s")
                await asyncio.sleep(RELAY_S)
            self._relay()
            self.history, self.examples, crashed = process.history()
            if crashed:
                raise CompiledClientError(f"the compiled client crashed: {crashed}")
        finally:
            self.close()
        return self

    def _relay(self) -> None:
        for slot, value in enumerate(self._process.counters.tolist()):
            self._live.set(slot, value)

    def close(self) -> None:
        self._process.close()


def prepare_compiled(job: WorkerJob, counter_array: Any, slots: int) -> CompiledClient:
    """The job's compiled client, started and waiting for t0 (``job.client_binary`` names the binary)."""
    assert job.client_binary is not None
    return CompiledClient(job, counter_array, slots, job.client_binary)
