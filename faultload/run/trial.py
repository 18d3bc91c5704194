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

import psutil

from faultload.client.job import WorkerJob
from faultload.client.session import open_sampling_session, retrieve_futures_advertised
from faultload.client.workers import WorkerPool
from faultload.host.workspace import Workspace
from faultload.model.access import Access, tls_for
from faultload.model.training import DB_POOL_FDS
from faultload.model.trial import TRIAL_PHASES, TrialConfig
from faultload.model.watchdog import FaultWindow
from faultload.record.history import History, Outcome
from faultload.record.samples import MonitorSamples
from faultload.record.serverlog import classify_log
from faultload.record.training import TrainingLog
from faultload.record.trial import TrialResult, WorkerSummary
from faultload.run.jobs import build_jobs, pools_for_sdk, spawn_early_workers, start_workers
from faultload.run.monitor import Monitor, drain_fds
from faultload.run.server_faults import ServerFaults
from faultload.run.stack import Stack
from faultload.run.watchdog import Watchdog
from faultload.run.watching import FaultWindows, LogFollower, Progress, reconnect_s, wait_load, watchdog_limits
from faultload.targets.server import BASE_MODEL

# An interrupted trial ends within seconds (the user is waiting): its server gets
# this long between SIGTERM and SIGKILL, its monitor threads this long to finish
# a /healthz probe (up to 10 s against a stalled server) before they are left to
# end on their own (daemons: they stop with the server, or with this process).
INTERRUPTED_SERVER_GRACE_S = 1.5
INTERRUPTED_MONITOR_WAIT_S = 0.5


def _router_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            times = proc.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
        except psutil.Error:
            pass
    return total


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


def unhealed_error(unhealed: tuple) -> str:
    """The harness error of a trial with a fault the injector could not heal."""
    first = unhealed[0]
    return (f"the fault injector could not heal {first.fault.to_spec()}: {first.remove_error}; it may hold it "
            f"still (Toxiproxy's control port can hang removing a toxic under traffic, Shopify/toxiproxy#558), "
            f"so the rest of this trial is no test of the server (the load was stopped)")


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
        stack.faults.start_schedule(config.faults, stack.router, t0, server=ServerFaults(stack.server), events=events,
                                    events_until_s=config.max_wall_s)


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
    """(router, server) of the started ``stack``, its topology and server noted in ``result``."""
    router, server = stack.router, stack.server
    assert router is not None and server is not None
    result.topology = dict(stack.topology)
    result.server.update({"version": server.version, "pid": server.pid, "url": server.url})
    return router, server


def _monitor(stack: Stack, pool: WorkerPool, t0: float, access: Access) -> Monitor:
    """The trial's monitor (not started): the server's samples and /healthz, the router's /stats."""
    server, router = stack.server, stack.router
    return Monitor(lambda: server.pid, server.healthz_url, f"{router.url}/stats", pool.live, t0,
                   server_port=urlsplit(server.url).port, tls=tls_for(server.url, access))


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
    pools = pools_for_sdk(pools, config.shape, workspace)
    started, cpu_start = time.monotonic(), _self_cpu()
    own_stack = stack is None
    pool = monitor = None
    result = TrialResult(config, History.empty(0), server={"spec": spec.text})
    switch = _phase_clock(result.phases_s, started)
    try:
        switch("stack_start")
        pool = spawn_early_workers(pools, config) if own_stack else None
        stack = _trial_stack(config, workspace, stack, access)
        router, server = _note_stack(result, stack)
        switch("session_open")
        result.server["retrieve_futures"] = retrieve_futures_advertised(server.url, access=access)
        sampling_id = open_sampling_session(server.url, BASE_MODEL, access=access)
        switch("workers_start")
        salt = random.Random(config.shape.seed).getrandbits(16)
        jobs = build_jobs(config, stack.load_url_for(config.direct_edge), sampling_id, salt, server.version, access)
        pool = start_workers(pool, pools, jobs)
        switch("other")
        log = LogFollower(server.log_path)
        t0 = switch("load")
        result.start_epoch = time.time()
        monitor = _monitor(stack, pool, t0, access)
        monitor.start()
        router_cpu0 = _router_cpu(router.pids())
        events = _fault_events(router, pool)  # counted from before the load starts
        pool.go(t0)
        _start_faults(stack, config, t0, events)
        watchdog = Watchdog(watchdog_limits(config), monitor.fd_limit, reconnect_s=reconnect_s(config))
        try:
            collapsed = wait_load(
                pool, t0 + config.max_wall_s + 30.0, progress, monitor, progress_every_s,
                watchdog, server, log, config.early_stop, _fault_windows(stack), lambda: bool(_unhealed(stack)),
            )
        except KeyboardInterrupt:
            result.interrupted, collapsed = True, False
        result.load_stopped_s = switch("gather") - t0
        pool.stop()
        _gather_what_can_be(result, config, stack, pool, monitor, log, watchdog, t0, router_cpu0, collapsed, switch)
    except KeyboardInterrupt:
        result.interrupted = True
        raise
    finally:
        switch("clean_up")
        _clean_up(result, pool, monitor, stack if own_stack else None, stack)
        result.cpu["monitor_and_parent_s"] = _self_cpu() - cpu_start
        result.wall_s = switch("other") - started
    return result


def _collapse_evidence(log: LogFollower, watchdog: Watchdog, stack: Stack, config: TrialConfig) -> list[str]:
    """What the collapse verdict cites besides the watchdog's signals: fd-exhaustion log lines, faults in force."""
    evidence = [f"{log.fd_lines} 'Too many open files' lines in the server log"] if log.fd_lines else []
    first = watchdog.first_signal()
    if first is not None and stack.faults is not None and stack.faults.runner is not None:
        evidence += [
            f"fault {r.fault.to_spec()} active from t={r.applied_at_s:.1f}s"
            + (f" to t={r.removed_at_s:.1f}s" if r.removed_at_s is not None else "")
            for r in stack.faults.runner.records()
            if r.applied_at_s is not None and r.applied_at_s <= first.at_s + config.watchdog.confirm_s
        ]
    return evidence


def _gather(result: TrialResult, config: TrialConfig, stack: Stack, pool: WorkerPool, monitor: Monitor,
            log: LogFollower, watchdog: Watchdog, t0: float, router_cpu0: float, collapsed: bool,
            switch: Callable[[str], float]) -> None:
    """After the load stopped: the verdict, the workers' histories, healed faults, the drain, the hold, samples, CPU.

    Fills ``result`` in place, so whatever was gathered before a signal
    landed is still reported (the caller catches it).
    """
    router, server = stack.router, stack.server
    result.stopped_early = collapsed
    if collapsed:
        # Judge the log as it was when the collapse was called: what the server
        # prints while we kill it (its engine "crashing") is ours, not its.
        result.server_log = classify_log(log.text())
        server.stop(grace_s=3.0)  # a collapsed server may not honour SIGTERM: kill it, keep the history
    log.poll(watchdog, time.monotonic() - t0)
    result.verdict = watchdog.verdict(_collapse_evidence(log, watchdog, stack, config))
    workers = pool.collect(timeout_s=30.0)
    result.load_s = time.monotonic() - t0
    result.history = History.merge(w.history for w in workers)
    result.workers = [WorkerSummary.of(w) for w in workers]
    logs = [w.training for w in workers if w.training is not None]
    result.training = TrainingLog.merge(logs) if config.shape.training.enabled else None
    result.cut_off = result.load_s >= config.max_wall_s and bool(
        (result.history["outcome"] == Outcome.PENDING).any())
    if stack.faults is not None:  # heal before the drain, so the drain sees a healthy stack
        result.cleanup_errors += stack.faults.stop_schedule()
        result.fault_log = stack.faults.log()
    # An interrupted trial is not waited on (the user wants out within seconds):
    # its drained figures are not measured, and the invariants say so.
    drained = None
    if not result.interrupted:
        # The router's idle timeout, run out now that the load is over: the drain then waits for the
        # server alone, not its keep-alive to the router too (0.4.0: ~2.5 s of every trial's wall).
        router.close_idle()
        kept = DB_POOL_FDS if config.shape.training.enabled else 0
        drained = drain_fds(server.pid, monitor.baseline.fds if monitor.baseline else None, config.drain_s, kept)
        _hold(config, collapsed, switch)
    monitor.stop(wait_s=INTERRUPTED_MONITOR_WAIT_S if result.interrupted else None)
    result.monitor = monitor.result(drained)
    # Judged up to the end of the drain: what the server prints while we stop it is ours.
    if result.server_log is None:
        result.server_log = classify_log(log.text())
    result.router_stats = router.stats()
    if result.start_epoch is not None:
        result.router_completed_s, result.router_repeats = load_completions(router, result.start_epoch)
    sampling = [w for w in workers if w.training is None]
    result.cpu = {
        "workers_s": sum(w.cpu_s for w in sampling),
        "workers_startup_s": sum(w.startup_cpu_s for w in sampling),  # of workers_s: before the load
        "router_s": _router_cpu(router.pids()) - router_cpu0,
        "server_s": _server_cpu(result.monitor),
    }
    if config.shape.training.enabled:
        result.cpu["training_client_s"] = sum(w.cpu_s for w in workers if w.training is not None)
    crashed = [w for w in result.workers if w.crashed]
    if crashed:
        result.error = f"load worker {crashed[0].worker} crashed: {crashed[0].crashed.splitlines()[0]}"
    elif result.fault_log is not None and result.fault_log.unhealed():
        result.error = unhealed_error(result.fault_log.unhealed())


def load_completions(router, start_epoch: float) -> tuple[dict[int, float], dict[int, int]]:
    """The router's completions of this load (nonce -> trial seconds of its first) and its repeated nonces.

    Both from the load's start exactly, never a moment before: no request of this trial exists before it,
    and a shared stack's previous trial with the same seed (a comparison's repeats of one example, a shrink
    step that kept the seed) completed the same nonces. One of those in the second before this load stood
    for this trial's request, and a poll waiting on the real one was judged held past a result that did
    not exist yet (``polls_held``: 124 of 716 polls in a comparison's second trial on one stack).
    """
    completed = {nonce: epoch - start_epoch for nonce, epoch in router.completions(start_epoch).items()}
    return completed, router.repeated_completions(start_epoch)


def _gather_what_can_be(result: TrialResult, config: TrialConfig, stack: Stack, pool: WorkerPool,
                        monitor: Monitor, log: LogFollower, watchdog: Watchdog, t0: float, router_cpu0: float,
                        collapsed: bool, switch: Callable[[str], float]) -> None:
    """:func:`_gather`, keeping what was gathered when a signal lands in it (or a second one killed the stack)."""
    try:
        _gather(result, config, stack, pool, monitor, log, watchdog, t0, router_cpu0, collapsed, switch)
    except KeyboardInterrupt:  # a signal while gathering: report what was gathered
        result.interrupted = True
        _keep_samples(result, monitor)
    except Exception as exc:
        if not result.interrupted:
            raise
        # A second signal killed the stack while it was being read: report what was gathered.
        result.cleanup_errors.append(f"gathering after the interrupt: {type(exc).__name__}: {exc}")
        _keep_samples(result, monitor)


def _hold(config: TrialConfig, collapsed: bool, switch: Callable[[str], float]) -> None:
    """The post-load hold (``config.hold_s``, phase ``hold``): the monitor keeps sampling the idle server, so
    what it still holds once its TTLs and a sweep have passed is measured (``releases_results``). A collapsed
    server was killed: nothing to hold for."""
    if config.hold_s > 0 and not collapsed:
        switch("hold")
        time.sleep(config.hold_s)
        switch("gather")


def _keep_samples(result: TrialResult, monitor: Monitor) -> None:
    """An interrupted gather still reports the monitor's samples taken so far."""
    if result.monitor is None:
        monitor.stop(wait_s=INTERRUPTED_MONITOR_WAIT_S)
        result.monitor = monitor.result()


def _clean_up(
    result: TrialResult, pool: WorkerPool | None, monitor: Monitor | None, own_stack: Stack | None,
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


def _server_cpu(samples: MonitorSamples) -> float:
    cpu = samples.samples["cpu_s"]
    valid = cpu[cpu >= 0]
    return float(valid[-1] - valid[0]) if valid.size >= 2 else 0.0
