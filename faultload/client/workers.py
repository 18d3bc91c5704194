"""Spread a trial's load over worker processes, each on its own source address.

One process cannot hold 131k sockets (20,000 open files per process here) and
one source IP has 28k ephemeral ports, so the load runs in N spawned
processes bound to 127.0.1.1, 127.0.1.2, ... Workers report live counters
through a shared array (read by progress and the watchdog), start together on
a shared clock, stop early when told, and hand back their history.
"""

from __future__ import annotations

import contextlib
import cProfile
import dataclasses
import multiprocessing as mp
import os
import queue as queue_mod
import resource
import signal
import time
import traceback
from multiprocessing import resource_tracker
from multiprocessing import spawn as mp_spawn
from typing import Any, Callable, Iterator

import numpy as np

from faultload.client.compiled_run import prepare_compiled
from faultload.client.job import COUNTER_SLOTS, WorkerJob, WorkerResult, unfinished_result
from faultload.client.raw import run_raw
from faultload.client.training import run_training
from faultload.client.training_bodies import TrainingCodec
from faultload.host import eventloop
from faultload.host.processes import die_with_parent, ignore_terminal_signals, terminal_signals_blocked
from faultload.record.histogram import Histogram
from faultload.record.history import History

_READY_TIMEOUT_S = 60.0


def source_ip(worker: int) -> str:
    """Distinct loopback source address for worker ``worker`` (127.0.1.1 upward)."""
    return f"127.0.{1 + worker // 250}.{1 + worker % 250}"


def raise_nofile_limit() -> int:
    """Raise this process's soft open-file limit to its hard limit; return it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def histograms(history: History) -> tuple[dict, dict]:
    submit, e2e = Histogram(), Histogram()
    submit.record_many(history["submit_end"] - history["submit_start"])
    e2e.record_many(history["done"] - history["submit_start"])
    return submit.to_state(), e2e.to_state()


def _prepare(job: WorkerJob, counters: Any) -> Any:
    """What a client must set up before the trial's clock starts: for the SDK, its client with the
    session open (what the SDK raised doing so is that client's to record); None for the raw client.

    Only an SDK worker imports the SDK: tinker alone is ~250 ms and ~450 modules, which no raw worker needs.
    """
    if job.role == "train":
        TrainingCodec(job.training_encoding)  # imports what its bodies need (tinker for proto) before t0
        return None
    if job.client_binary is not None:
        return prepare_compiled(job, counters, len(COUNTER_SLOTS))
    if job.shape.client != "sdk":
        return None
    from faultload.client.sdk import prepare_sdk  # local import: tinker is loaded by SDK workers only

    return prepare_sdk(job, counters, len(COUNTER_SLOTS))


async def _run(job: WorkerJob, counters: Any, stopped: Callable[[], bool], prepared: Any, built: Callable[[Any], None]):
    """Run the worker's client; ``built`` gets the client as soon as it exists (its history outlives a crash)."""
    if prepared is not None:
        built(prepared)
        return await prepared.start(job.t0, stopped)
    if job.role == "train":
        return await run_training(job, stopped, built)
    return await run_raw(job, counters, len(COUNTER_SLOTS), stopped, built)


def _crash_result(job: WorkerJob, clients: list, exc: BaseException) -> WorkerResult:
    """A crashed worker still hands back what its client recorded (unfinished requests stay pending)."""
    crashed = f"{exc!r}\n{traceback.format_exc()}"
    if not clients:
        return WorkerResult(job.worker, History.empty(0), {}, {}, crashed=crashed)
    client = clients[-1]
    with contextlib.suppress(Exception):
        client.close()  # the SDK client's: freezes its attempt rows
    submit, e2e = histograms(client.history)
    return WorkerResult(
        job.worker,
        client.history,
        submit,
        e2e,
        client.examples,
        crashed=crashed,
        training=getattr(client, "training", None),
    )


def prepare_job(job: WorkerJob, counters: Any) -> tuple[Any, str | None]:
    """Set up the job's client before the clock starts: (what ``run_job`` takes, the set-up error or None).

    Shared by a local worker process and a Ray actor (``faultload.cluster``), so both run the same code.
    """
    raise_nofile_limit()
    try:
        return _prepare(job, counters), None
    except BaseException as exc:  # the harness's own failure (the SDK's is the client's): reported as a crash
        return None, f"setting up the {job.shape.client} client: {exc!r}\n{traceback.format_exc()}"


def run_job(
    job: WorkerJob, counters: Any, stopped: Callable[[], bool], prepared: Any, profile_dir: str | None = None
) -> WorkerResult:
    """Run a prepared job (``job.t0`` on this process's monotonic clock) to its result; never raises.
    Given ``profile_dir``, the run's CPU profile is written there as ``worker-<n>.prof``."""
    # CPU time, not wall: a worker waits on its sockets most of a trial, and a wall-clock profile shows that wait.
    profiler = cProfile.Profile(time.process_time) if profile_dir else None
    clients: list = []
    try:
        if profiler is not None:
            profiler.enable()
        client = eventloop.run(_run(job, counters, stopped, prepared, clients.append))
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(os.path.join(profile_dir, f"worker-{job.worker}.prof"))
        submit, e2e = histograms(client.history)
        result = WorkerResult(
            job.worker, client.history, submit, e2e, client.examples, training=getattr(client, "training", None)
        )
    except BaseException as exc:  # the worker must always report, never hang the trial
        result = _crash_result(job, clients, exc)
    result.client_cpu_s = getattr(clients[-1], "cpu_s", 0.0) if clients else 0.0
    if job.role == "sample" and job.shape.client != "sdk":
        result.client_impl = "python" if job.client_binary is None else "compiled"
    result.address = job.source_ip
    return result


def process_cpu_s() -> float:
    """This process's user + system CPU so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _await_job(jobs_in: Any) -> WorkerJob | None:
    """The job an early-spawned worker is sent once the stack is up; None if the trial ended first."""
    try:
        return jobs_in.recv() if jobs_in.poll(_READY_TIMEOUT_S * 2) else None
    except (EOFError, OSError):  # the parent closed its end: the trial ended before assigning one
        return None
    finally:
        jobs_in.close()


PROFILE_ENV = "FAULTLOAD_PROFILE_WORKERS"  # a folder: profile each local worker there (finding hot spots)


def _worker_main(
    job: WorkerJob | None,
    jobs_in: Any,
    counters: Any,
    ready: Any,
    go: Any,
    t0: Any,
    stop: Any,
    out: Any,
    parent_pid: int,
) -> None:
    """A local worker process's entry point: an edge, so it reads its one setting (``PROFILE_ENV``) here, and
    sets the one its SDK client reads (``SSL_CERT_FILE``, an https target's CA)."""
    # A worker never outlives the trial that started it, even one killed with SIGKILL.
    die_with_parent(parent_pid)
    # Ctrl-C and a closed terminal's SIGHUP reach the whole foreground group: the
    # parent decides when workers stop, and collects the history they hold.
    ignore_terminal_signals()
    if job is None:
        job = _await_job(jobs_in)
        if job is None:
            return
    if job.access.ca_cert is not None:  # the SDK client's httpx trusts what SSL_CERT_FILE names: this process's own
        os.environ["SSL_CERT_FILE"] = job.access.ca_cert
    prepared, setup_error = prepare_job(job, counters)
    startup_cpu_s = process_cpu_s()
    with ready.get_lock():
        ready.value += 1
    if not go.wait(_READY_TIMEOUT_S * 2):
        out.put(WorkerResult(job.worker, History.empty(0), {}, {}, crashed="never told to start"))
        return
    if setup_error is not None:
        out.put(WorkerResult(job.worker, History.empty(0), {}, {}, crashed=setup_error))
        return
    result = run_job(
        dataclasses.replace(job, t0=t0.value), counters, stop.is_set, prepared, profile_dir=os.environ.get(PROFILE_ENV)
    )
    result.cpu_s, result.startup_cpu_s = process_cpu_s() + result.client_cpu_s, startup_cpu_s
    out.put(result)


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with SIGHUP blocked for good.

    It sits in the terminal's process group; killed by a hang-up it would be
    started again at exit, complaining about every semaphore. A signal blocked
    at its fork stays blocked in it (it unblocks only SIGINT and SIGTERM, which
    it ignores); here the block lasts only for the fork, so a SIGHUP meanwhile
    is delivered right after.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        resource_tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})


@contextlib.contextmanager
def sys_path_first(folder: str | None) -> Iterator[None]:
    """Processes spawned inside start with ``folder`` first on their ``sys.path`` (None: as this one).

    A spawned child takes its parent's ``sys.path`` from the preparation data multiprocessing sends it
    before it unpickles its target (``spawn.get_preparation_data``), so the folder must be in that data for the
    child's first import of faultload's client (and of the SDK release the folder holds) to find it; this
    process's own ``sys.path`` is left alone, so nothing it imports meanwhile comes from there.
    """
    if folder is None:
        yield
        return
    original = mp_spawn.get_preparation_data

    def prepared(name: str) -> dict:
        data = original(name)
        data["sys_path"] = [folder] + [entry for entry in data["sys_path"] if entry != folder]
        return data

    mp_spawn.get_preparation_data = prepared
    try:
        yield
    finally:
        mp_spawn.get_preparation_data = original


class WorkerLost(RuntimeError):
    """A load worker died before it could run its job: the harness failed, not the server."""


class WorkerPool:
    """Start, watch, stop and collect a trial's load workers.

    ``sdk_folder``: an SDK release installed on its own (``targets.install.ensure_sdk``), first on the workers'
    ``sys.path`` so that their sdk client runs it; None: the SDK installed beside faultload.
    """

    def __init__(self, jobs: list[WorkerJob], count: int | None = None, sdk_folder: str | None = None) -> None:
        self.jobs = jobs
        self._count = len(jobs) if count is None else count
        self._sdk_folder = sdk_folder
        _start_resource_tracker()
        ctx = mp.get_context("spawn")
        self._ctx = ctx
        self.counters = ctx.Array("q", self._count * len(COUNTER_SLOTS), lock=False)
        self._ready = ctx.Value("i", 0)
        self._go = ctx.Event()
        self._t0 = ctx.Value("d", 0.0, lock=False)
        self._stop = ctx.Event()
        self._out = ctx.Queue()
        self.processes: list[mp.process.BaseProcess] = []
        self.results: list[WorkerResult] = []
        self._jobs_out: list[Any] = []  # an early-spawned worker's pipe for its job (see spawn_early)

    @classmethod
    def spawn_early(cls, count: int, sdk_folder: str | None = None) -> "WorkerPool":
        """``count`` workers started before their jobs exist (a trial's own stack still starting): each
        interpreter starts and imports the load client meanwhile (~0.3 s of each worker's start, ~0.9 s
        for a training worker's), then waits for the job :meth:`assign` sends it once the server is up."""
        pool = cls([], count, sdk_folder)
        try:
            for index in range(count):
                jobs_in, jobs_out = pool._ctx.Pipe(duplex=False)
                pool._jobs_out.append(jobs_out)
                pool._spawn(None, jobs_in, index)
                jobs_in.close()  # the child holds its own copy: closing ours lets it see EOF when we close jobs_out
        except BaseException:  # a Ctrl-C between two spawns: the caller never gets the pool to stop
            pool.terminate()
            raise
        return pool

    def assign(self, jobs: list[WorkerJob]) -> None:
        """Send each early-spawned worker its job (as many jobs as workers, in order)."""
        if len(jobs) != len(self._jobs_out):
            raise ValueError(f"{len(jobs)} jobs for {len(self._jobs_out)} early-spawned workers")
        self.jobs = jobs
        for jobs_out, job, proc in zip(self._jobs_out, jobs, self.processes):
            try:
                jobs_out.send(job)
            except OSError as exc:  # it died waiting (killed, out of memory): the harness's failure, said so
                raise WorkerLost(
                    f"load worker {job.worker} exited before it got its job "
                    f"(exit code {proc.exitcode}): {exc.strerror or exc}"
                ) from None

    def start(self) -> None:
        for job in self.jobs:
            self._spawn(job, None, job.worker)

    def _spawn(self, job: WorkerJob | None, jobs_in: Any, index: int) -> None:
        proc = self._ctx.Process(
            target=_worker_main,
            args=(job, jobs_in, self.counters, self._ready, self._go, self._t0, self._stop, self._out, os.getpid()),
            name=f"faultload-worker-{index}",
            daemon=True,
        )
        # terminal signals blocked until the worker ignores them: a Ctrl-C during its imports
        with terminal_signals_blocked(), sys_path_first(self._sdk_folder):
            proc.start()
        self.processes.append(proc)

    def wait_ready(self, timeout_s: float = _READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while self._ready.value < self._count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {self._ready.value}/{self._count} load workers started in {timeout_s:.0f}s")
            dead = [p for p in self.processes if p.exitcode is not None]
            if dead:
                raise WorkerLost(f"a load worker exited during start-up (exit code {dead[0].exitcode})")
            time.sleep(0.02)

    def go(self, t0: float) -> None:
        self._t0.value = t0
        self._go.set()

    def live(self) -> dict[str, int]:
        """Totals of the live counters over all workers."""
        values = np.frombuffer(self.counters, dtype=np.int64).reshape(self._count, len(COUNTER_SLOTS))
        return dict(zip(COUNTER_SLOTS, (int(v) for v in values.sum(axis=0))))

    def stop(self) -> None:
        self._stop.set()

    def alive(self) -> bool:
        return any(p.is_alive() for p in self.processes)

    def poll(self, timeout_s: float) -> None:
        """Take any finished worker's result off the queue.

        Must be called while waiting: a worker whose result is larger than a
        pipe buffer cannot exit until the parent reads it.
        """
        try:
            self.results.append(self._out.get(timeout=timeout_s))
        except queue_mod.Empty:
            pass

    def finished(self) -> bool:
        """Every worker has reported, or none is left that could."""
        return len(self.results) >= len(self.processes) or (not self.alive() and self._out.empty())

    def collect(self, timeout_s: float) -> list[WorkerResult]:
        """Gather each worker's result (bounded), then make sure every process is gone."""
        deadline = time.monotonic() + timeout_s
        while not self.finished() and time.monotonic() < deadline:
            self.poll(0.5)
        self.terminate()
        reported = {r.worker for r in self.results}
        for job, proc in zip(self.jobs, self.processes):  # spawned in job order
            if job.worker not in reported:  # killed (SIGKILL, the OOM killer): its requests as unfinished
                self.results.append(
                    unfinished_result(
                        job, f"load worker {job.worker} exited (code {proc.exitcode}) without handing back its history"
                    )
                )
        return sorted(self.results, key=lambda r: r.worker)

    def terminate(self) -> None:
        for jobs_out in self._jobs_out:
            jobs_out.close()  # an early-spawned worker still waiting for its job exits
        self._stop.set()
        self._go.set()
        for proc in self.processes:
            proc.join(timeout=2.0)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=2.0)

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes if p.pid is not None]
