"""Run one trial: load workers, monitor, watchdog and fault schedule against a stack.

``run_trial(config, workspace, stack=None)`` is the entry point. Without a
stack it starts one for the trial and stops it after; with one (the pytest
suite reuses a stack across examples) it leaves it running. Either way every
process the trial itself starts is stopped on every path out (done, error,
Ctrl-C), keeping whatever history the workers had when they were stopped.
"""

from __future__ import annotations

import contextlib
import random
import resource
import time
from typing import Any, Callable
from urllib.parse import urlsplit

from faultload.client.compiled import find_client
from faultload.client.job import WorkerJob
from faultload.client.session import open_sampling_session, retrieve_futures_advertised
from faultload.client.workers import WorkerPool
from faultload.host.workspace import Workspace
from faultload.model.access import Access, tls_for
from faultload.model.trial import TRIAL_PHASES, TrialConfig
from faultload.model.watchdog import FaultWindow
from faultload.record.history import History
from faultload.record.trial import TrialResult
from faultload.run.gather import INTERRUPTED_MONITOR_WAIT_S, LoadRun, gather_what_can_be, router_cpu_s
from faultload.run.jobs import build_jobs, pools_for_client, pools_for_sdk, spawn_early_workers, start_workers
from faultload.run.monitor import Monitor
from faultload.run.server_faults import ServerFaults
from faultload.run.stack import Stack
from faultload.run.watchdog import Watchdog
from faultload.run.watching import FaultWindows, LogFollower, Progress, reconnect_s, wait_load, watchdog_limits
from faultload.targets.server import BASE_MODEL

# An interrupted trial ends within seconds (the user is waiting): its server gets this long between SIGTERM and
# SIGKILL (its monitor threads: gather.INTERRUPTED_MONITOR_WAIT_S).
INTERRUPTED_SERVER_GRACE_S = 1.5


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _fault_windows(stack: Stack) -> FaultWindows:
    """What the watchdog is told of the faults: the runner's records as they stand (none without a schedule)."""

    def windows() -> tuple[FaultWindow, ...]:
        runner = stack.faults.runner if stack.faults is not None else None
        return runner.log().windows() if runner is not None else ()

    return windows


def _unhealed(stack: Stack) -> tuple:
    """The faults the injector failed to remove so far (contract: fault_not_healed)."""
    runner = stack.faults.runner if stack.faults is not None else None
    return runner.log().unhealed() if runner is not None else ()


def _fault_events(router: Any, pool: WorkerPool) -> dict[str, Callable[[], int]]:
    """Each anchor event's count from now, the load's start (``model.anchors.ANCHOR_EVENTS``): what an anchored
    fault waits for. The router's completion log outlives a trial on a shared stack: counted from here."""
    completions0 = router.completion_count()
    return {
        "completion": lambda: router.completion_count() - completions0,
        "result": lambda: pool.live()["completed"],
        "poll_timeout": lambda: pool.live()["poll_timeouts"],
    }


def _start_faults(stack: Stack, config: TrialConfig, t0: float, events: dict[str, Callable[[], int]]) -> None:
    """The trial's fault schedule from ``t0``; an anchored fault waits for its event until the wall bound."""
    if stack.faults is not None:
        stack.faults.start_schedule(
            config.faults,
            stack.router,
            t0,
            server=ServerFaults(stack.server),
            events=events,
            events_until_s=config.max_wall_s,
        )


def _phase_clock(phases: dict[str, float], started: float) -> Callable[[str], float]:
    """``switch(name)``: end the running phase (its seconds added to ``phases``), start ``name``, return now.

    The phases run back to back from ``started`` (in ``other`` until the first
    switch), so they add up to the wall up to the last switch; a phase a signal
    or an error cuts short keeps its seconds (the next switch ends it).
    """
    phases.update(dict.fromkeys(TRIAL_PHASES, 0.0))
    running, last = "other", started

    def switch(name: str) -> float:
        nonlocal running, last
        now = time.monotonic()
        phases[running] += now - last
        running, last = name, now
        return now

    return switch


def _trial_stack(config: TrialConfig, workspace: Workspace, stack: Stack | None, access: Access) -> Stack:
    """A stack of the trial's own (started now), or the shared ``stack`` switched to the trial's router mode."""
    if stack is None:
        return Stack(config.stack_config(), config.router, workspace, access).start()
    stack.use_router(config.router)
    return stack


def _note_stack(result: TrialResult, stack: Stack):
    """The server of the started ``stack``, its topology and server noted in ``result``."""
    router, server = stack.router, stack.server
    assert router is not None and server is not None
    result.topology = dict(stack.topology)
    result.server.update({"version": server.version, "pid": server.pid, "url": server.url})
    return server


def _monitor(stack: Stack, pool: WorkerPool, t0: float, access: Access) -> Monitor:
    """The trial's monitor (not started): the server's samples and /healthz, the router's /stats."""
    server, router = stack.server, stack.router
    return Monitor(
        lambda: server.pid,
        server.healthz_url,
        f"{router.url}/stats",
        pool.live,
        t0,
        server_port=urlsplit(server.url).port,
        tls=tls_for(server.url, access),
        tree=server.tree,
    )


def run_trial(
    config: TrialConfig,
    workspace: Workspace,
    progress: Progress | None = None,
    progress_every_s: float = 2.0,
    stack: Stack | None = None,
    pools: Callable[[list[WorkerJob]], WorkerPool] = WorkerPool,
    access: Access = Access(),
) -> TrialResult:
    """Run ``config`` once, on ``stack`` or on a stack of its own, its load workers from ``pools``
    (local processes; ``faultload.cluster.RayCluster.pool``: Ray actors), reaching the server with
    ``access`` (a url= target's key, headers and TLS; never recorded in the result).

    Raises ValueError for a bad config (or a stack that does not fit it)
    before starting anything. ``phases_s`` splits ``wall_s`` (model.trial.TRIAL_PHASES):
    ``stack_start`` starting the trial's own stack (on a shared stack: only switching
    its router's mode, about 0 when the mode is unchanged), ``session_open`` the sampling
    session, ``workers_start`` the load workers started and ready, ``load`` t0 to the
    load stopped (``load_stopped_s``), ``gather`` the workers stopped, the drain and
    what was recorded read, ``hold`` the post-load hold (``hold_s``), ``clean_up``
    stopping what the trial started, ``other`` the rest (the moments between them).
    """
    spec = config.validate()
    if stack is not None and stack.config != config.stack_config():
        raise ValueError("this trial's target/regressions/knobs/time scale/proxies differ from the running stack's")
    binary = find_client(workspace.tools) if config.shape.client == "raw" else None  # None: the Python client
    pools = pools_for_client(pools_for_sdk(pools, config.shape, workspace), config.shape, binary)
    started, cpu_start = time.monotonic(), _self_cpu()
    own_stack = stack is None
    pool = monitor = None
    result = TrialResult(config, History.empty(0), server={"spec": spec.text})
    switch = _phase_clock(result.phases_s, started)
    try:
        switch("stack_start")
        pool = spawn_early_workers(pools, config) if own_stack else None
        stack = _trial_stack(config, workspace, stack, access)
        server = _note_stack(result, stack)
        switch("session_open")
        result.server["retrieve_futures"] = retrieve_futures_advertised(server.url, access=access)
        sampling_id = open_sampling_session(server.url, BASE_MODEL, access=access)
        switch("workers_start")
        salt = random.Random(config.shape.seed).getrandbits(16)
        url = stack.load_url_for(config.direct_edge)
        jobs = build_jobs(config, url, sampling_id, salt, server.version, access, str(binary) if binary else None)
        pool = start_workers(pool, pools, jobs)
        switch("other")
        log = LogFollower(server.log_path)
        t0 = switch("load")
        result.start_epoch = time.time()
        monitor = _monitor(stack, pool, t0, access)
        load = _run_load(result, config, stack, pool, monitor, log, t0, progress, progress_every_s)
        result.load_stopped_s = switch("gather") - t0
        pool.stop()
        gather_what_can_be(result, config, load, switch)
    except KeyboardInterrupt:
        result.interrupted = True
        raise
    finally:
        switch("clean_up")
        _clean_up(result, pool, monitor, stack if own_stack else None, stack)
        result.cpu["monitor_and_parent_s"] = _self_cpu() - cpu_start
        result.wall_s = switch("other") - started
    return result


def _run_load(
    result: TrialResult,
    config: TrialConfig,
    stack: Stack,
    pool: WorkerPool,
    monitor: Monitor,
    log: LogFollower,
    t0: float,
    progress: Progress | None,
    progress_every_s: float,
) -> LoadRun:
    """The load from ``t0``: the monitor started, the workers let go, the fault schedule started, then the wait
    until the load ends, the watchdog calls a collapse, a fault stays unhealed or Ctrl-C (the trial interrupted)."""
    router, server = stack.router, stack.server
    monitor.start()
    router_cpu0 = router_cpu_s(router.pids())
    events = _fault_events(router, pool)  # counted from before the load starts
    pool.go(t0)
    _start_faults(stack, config, t0, events)
    watchdog = Watchdog(watchdog_limits(config), monitor.fd_limit, reconnect_s=reconnect_s(config))
    try:
        collapsed = wait_load(
            pool,
            t0 + config.max_wall_s + 30.0,
            progress,
            monitor,
            progress_every_s,
            watchdog,
            server,
            log,
            config.early_stop,
            _fault_windows(stack),
            lambda: bool(_unhealed(stack)),
        )
    except KeyboardInterrupt:
        result.interrupted, collapsed = True, False
    return LoadRun(stack, pool, monitor, log, watchdog, t0, router_cpu0, collapsed)


def _clean_up(
    result: TrialResult,
    pool: WorkerPool | None,
    monitor: Monitor | None,
    own_stack: Stack | None,
    stack: Stack | None,
) -> None:
    """Stop what the trial started, every step even when a signal lands in one of them.

    A Ctrl-C in the middle of one step must not skip the next (that is how a
    run dir or a process is left behind): each step runs whatever happened in
    the ones before. A signal that lands here after the trial itself ended
    marks it interrupted; one that lands after an earlier interrupt is part
    of that interrupt.
    """
    try:
        with contextlib.ExitStack() as steps:  # run last-in first-out
            if own_stack is not None:
                grace = INTERRUPTED_SERVER_GRACE_S if result.interrupted else None
                steps.callback(lambda: result.cleanup_errors.extend(own_stack.close(server_grace_s=grace)))
            if stack is not None and stack.server is not None:
                steps.callback(lambda: result.server.update(log_tail=stack.server.log_tail(40)))
            if stack is not None and stack.faults is not None:
                steps.callback(lambda: result.cleanup_errors.extend(stack.faults.stop_schedule()))
            if monitor is not None:
                steps.callback(monitor.stop, INTERRUPTED_MONITOR_WAIT_S if result.interrupted else None)
            if pool is not None:
                steps.callback(pool.terminate)
    except KeyboardInterrupt:
        result.interrupted = True
