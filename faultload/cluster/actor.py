"""One worker job in a Ray actor, run by the code a local worker process runs.

The actor is threaded (``max_concurrency`` > 1): ``run`` holds one thread for
the load while ``live`` (the progress line's and watchdog's counters) and
``stop`` are answered beside it. Times in the returned history are relative
to the ``t0`` it was given, which the pool converts to this node's clock.
This module does not import ``ray``: the pool wraps the class.
"""

from __future__ import annotations

import array
import dataclasses
import os
import threading
import time

from faultload.client.job import COUNTER_SLOTS, WorkerJob, WorkerResult
from faultload.client.workers import prepare_job, process_cpu_s, run_job
from faultload.record.history import History

SLOTS = len(COUNTER_SLOTS)


class LoadWorker:
    """A load worker as a Ray actor: prepare, then run from ``t0``; its counters and stop beside the run."""

    def __init__(self, job: WorkerJob) -> None:
        self.job = job
        # LiveCounters indexes by worker * slots: the slots before this worker's are never touched.
        self.counters = array.array("q", bytes(8 * SLOTS * (job.worker + 1)))
        self._stop = threading.Event()
        self._prepared: object = None
        self._setup_error: str | None = None
        self._startup_cpu_s = 0.0

    def prepare(self) -> int:
        """Set the client up before the clock starts; this actor's pid."""
        self._prepared, self._setup_error = prepare_job(self.job, self.counters)
        self._startup_cpu_s = process_cpu_s()
        return os.getpid()

    def clock(self) -> float:
        """This node's monotonic clock (the pool measures its offset from the driver's)."""
        return time.monotonic()

    def run(self, t0: float) -> WorkerResult:
        """The job's load from ``t0`` (this node's clock) to its result; never raises."""
        if self._setup_error is not None:
            return WorkerResult(self.job.worker, History.empty(0), {}, {}, crashed=self._setup_error)
        result = run_job(dataclasses.replace(self.job, t0=t0), self.counters, self._stop.is_set, self._prepared)
        result.cpu_s, result.startup_cpu_s = process_cpu_s() + result.client_cpu_s, self._startup_cpu_s
        return result

    def live(self) -> list[int]:
        base = self.job.worker * SLOTS
        return list(self.counters[base : base + SLOTS])

    def stop(self) -> None:
        self._stop.set()
