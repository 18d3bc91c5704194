"""A trial's raw sampling workers as compiled client processes the trial starts itself: no Python worker.

A Python load worker costs ~0.25 s of CPU to start (the interpreter, numpy, the client's imports) before its
first request; in ``make run``'s 1,024-request trial that was half of the workers' CPU. When every job of a
local trial is a sampling job the compiled client runs (no trainers, no Ray), the trial's pool is this one:
the same interface as ``workers.WorkerPool`` (start, go, live, stop, poll, collect, terminate), each job a
:class:`~faultload.client.compiled_run.CompiledProcess` whose counters the parent reads directly.
"""

from __future__ import annotations

import time

import numpy as np

from faultload.client.compiled_run import CompiledClientError, CompiledProcess
from faultload.client.job import COUNTER_SLOTS, WorkerJob, WorkerResult, unfinished_result
from faultload.client.workers import histograms

POLL_S = 0.01  # how often a waiting parent looks for a finished process


class CompiledPool:
    """Start, watch, stop and collect a trial's compiled clients (one process per job)."""

    def __init__(self, jobs: list[WorkerJob]) -> None:
        self.jobs = jobs
        self.processes: list[CompiledProcess] = []
        self.results: list[WorkerResult] = []
        self._collected: set[int] = set()

    def start(self) -> None:
        """Every job's binary started and READY (a failure: CompiledClientError, the ones started stopped)."""
        try:
            for job in self.jobs:
                assert job.client_binary is not None
                self.processes.append(CompiledProcess(job, job.client_binary))
        except BaseException:
            self.terminate()
            raise

    def wait_ready(self, timeout_s: float = 0.0) -> None:
        """Nothing to wait for: ``start`` returns once every binary has said READY."""

    def go(self, t0: float) -> None:
        for process in self.processes:
            process.send(f"GO {t0!r}")

    def live(self) -> dict[str, int]:
        """Totals of the live counters over all processes."""
        if not self.processes:
            return dict.fromkeys(COUNTER_SLOTS, 0)
        totals = np.sum([process.counters for process in self.processes], axis=0)
        return dict(zip(COUNTER_SLOTS, (int(v) for v in totals)))

    def stop(self) -> None:
        for process in self.processes:
            process.send("STOP")

    def alive(self) -> bool:
        return not all(process.exited() for process in self.processes)

    def poll(self, timeout_s: float) -> None:
        """Take every exited process's result; wait up to ``timeout_s`` for one when none is new."""
        deadline = time.monotonic() + timeout_s
        while True:
            new = [p for p in self.processes if p.job.worker not in self._collected and p.exited()]
            for process in new:
                self._take(process)
            if new or time.monotonic() >= deadline:
                return
            time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))

    def _take(self, process: CompiledProcess) -> None:
        job = process.job
        self._collected.add(job.worker)
        try:
            history, examples, crashed = process.history()
        except CompiledClientError as exc:  # killed (as by the OOM killer: said as WorkerPool says it), or failed
            killed = process.code is not None and process.code < 0
            why = f"load worker {job.worker} exited (code {process.code}) without handing back its history"
            result = unfinished_result(job, why if killed else str(exc))
        else:
            submit, e2e = histograms(history)
            result = WorkerResult(job.worker, history, submit, e2e, examples, crashed=crashed)
        result.cpu_s = result.client_cpu_s = process.cpu_s
        result.startup_cpu_s = process.startup_cpu_s
        result.client_impl, result.address = "compiled", job.source_ip
        process.close()
        self.results.append(result)

    def finished(self) -> bool:
        return len(self._collected) >= len(self.processes)

    def collect(self, timeout_s: float) -> list[WorkerResult]:
        """Every process's result (bounded), then every process gone; one that never finished is unfinished."""
        deadline = time.monotonic() + timeout_s
        while not self.finished() and time.monotonic() < deadline:
            self.poll(0.5)
        for process in self.processes:
            if process.job.worker not in self._collected:
                process.close()
                self._collected.add(process.job.worker)
                why = f"the compiled client of worker {process.job.worker} did not hand back its history in time"
                self.results.append(unfinished_result(process.job, why))
        return sorted(self.results, key=lambda r: r.worker)

    def terminate(self) -> None:
        for process in self.processes:
            process.close()

    def pids(self) -> list[int]:
        return [process.pid for process in self.processes if process.pid is not None]


def runs_compiled(jobs: list[WorkerJob]) -> bool:
    """Whether a local trial's jobs can all run in a CompiledPool: each a sampling job of the compiled client."""
    return bool(jobs) and all(job.role == "sample" and job.client_binary is not None for job in jobs)
