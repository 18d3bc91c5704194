"""After a trial's load stopped: what happened, read into its :class:`TrialResult`.

Kept apart from :mod:`faultload.run.trial`, which starts and stops things: this reads what the stopped load
left — the collapse verdict, the workers' histories, the faults' log, the drain and the post-load hold, the
monitor's samples, the server log, the router's record and everyone's CPU — and fills the result in place, so
whatever was gathered before a signal landed is still reported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import psutil

from faultload.client.workers import WorkerPool
from faultload.model.training import DB_POOL_FDS
from faultload.model.trial import TrialConfig
from faultload.record.history import History, Outcome
from faultload.record.samples import MonitorSamples
from faultload.record.serverlog import classify_log
from faultload.record.training import TrainingLog
from faultload.record.trial import TrialResult, WorkerSummary
from faultload.run.monitor import Monitor, drain_fds
from faultload.run.stack import Stack
from faultload.run.watchdog import Watchdog
from faultload.run.watching import LogFollower

# An interrupted trial ends within seconds (the user is waiting): its monitor threads get this long to finish
# a /healthz probe (up to 10 s against a stalled server) before they are left to end on their own (daemons:
# they stop with the server, or with this process).
INTERRUPTED_MONITOR_WAIT_S = 0.5


@dataclass
class LoadRun:
    """One trial's load as it ran: what it ran on, what watched it, and how it ended (``collapsed``: the
    watchdog called a collapse and stopped it early)."""

    stack: Stack
    pool: WorkerPool
    monitor: Monitor
    log: LogFollower
    watchdog: Watchdog
    t0: float  # the load's start (monotonic)
    router_cpu0: float  # the router's CPU seconds at t0
    collapsed: bool


def router_cpu_s(pids: list[int]) -> float:
    """The router processes' CPU seconds so far, their children's included (a process gone counts none)."""
    total = 0.0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            times = proc.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
        except psutil.Error:
            pass
    return total


def unhealed_error(unhealed: tuple) -> str:
    """The harness error of a trial with a fault the injector could not heal."""
    first = unhealed[0]
    return (
        f"the fault injector could not heal {first.fault.to_spec()}: {first.remove_error}; it may hold it "
        f"still (Toxiproxy's control port can hang removing a toxic under traffic, Shopify/toxiproxy#558), "
        f"so the rest of this trial is no test of the server (the load was stopped)"
    )


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


def gather_what_can_be(result: TrialResult, config: TrialConfig, load: LoadRun, switch: Callable[[str], float]) -> None:
    """:func:`gather`, keeping what was gathered when a signal lands in it (or a second one killed the stack)."""
    try:
        gather(result, config, load, switch)
    except KeyboardInterrupt:  # a signal while gathering: report what was gathered
        result.interrupted = True
        _keep_samples(result, load.monitor)
    except Exception as exc:
        if not result.interrupted:
            raise
        # A second signal killed the stack while it was being read: report what was gathered.
        result.cleanup_errors.append(f"gathering after the interrupt: {type(exc).__name__}: {exc}")
        _keep_samples(result, load.monitor)


def gather(result: TrialResult, config: TrialConfig, load: LoadRun, switch: Callable[[str], float]) -> None:
    """After the load stopped: the verdict, the workers' histories, healed faults, the drain, the hold, samples, CPU.

    Fills ``result`` in place, so whatever was gathered before a signal
    landed is still reported (the caller catches it). ``switch`` is the
    trial's phase clock (the hold is a phase of its own).
    """
    stack, router = load.stack, load.stack.router
    _judge_collapse(result, config, load)
    workers = _collect_workers(result, config, load)
    if stack.faults is not None:  # heal before the drain, so the drain sees a healthy stack
        result.cleanup_errors += stack.faults.stop_schedule()
        result.fault_log = stack.faults.log()
    _drain_and_hold(result, config, load, switch)
    # Judged up to the end of the drain: what the server prints while we stop it is ours.
    if result.server_log is None:
        result.server_log = classify_log(load.log.text())
    result.router_stats = router.stats()
    if result.start_epoch is not None:
        result.router_completed_s, result.router_repeats = load_completions(router, result.start_epoch)
    result.cpu = _cpu_s(config, workers, load, result.monitor)
    _note_harness_error(result)


def _judge_collapse(result: TrialResult, config: TrialConfig, load: LoadRun) -> None:
    """The watchdog's verdict, with its evidence; a collapsed server is killed first, its log judged as it was."""
    result.stopped_early = load.collapsed
    if load.collapsed:
        # Judge the log as it was when the collapse was called: what the server
        # prints while we kill it (its engine "crashing") is ours, not its.
        result.server_log = classify_log(load.log.text())
        load.stack.server.stop(grace_s=3.0)  # a collapsed server may not honour SIGTERM: kill it, keep the history
    load.log.poll(load.watchdog, time.monotonic() - load.t0)
    result.verdict = load.watchdog.verdict(_collapse_evidence(load.log, load.watchdog, load.stack, config))


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


def _collect_workers(result: TrialResult, config: TrialConfig, load: LoadRun) -> list:
    """The workers' results (returned), merged into the result: the history, each worker, the training log, and
    whether the wall bound cut requests off."""
    workers = load.pool.collect(timeout_s=30.0)
    result.load_s = time.monotonic() - load.t0
    result.history = History.merge(w.history for w in workers)
    result.workers = [WorkerSummary.of(w) for w in workers]
    logs = [w.training for w in workers if w.training is not None]
    result.training = TrainingLog.merge(logs) if config.shape.training.enabled else None
    result.cut_off = result.load_s >= config.max_wall_s and bool((result.history["outcome"] == Outcome.PENDING).any())
    return workers


def _drain_and_hold(result: TrialResult, config: TrialConfig, load: LoadRun, switch: Callable[[str], float]) -> None:
    """The server's fds drained back, the post-load hold, then the monitor stopped and its samples kept."""
    # An interrupted trial is not waited on (the user wants out within seconds):
    # its drained figures are not measured, and the invariants say so.
    drained = None
    if not result.interrupted:
        # The router's idle timeout, run out now that the load is over: the drain then waits for the
        # server alone, not its keep-alive to the router too (0.4.0: ~2.5 s of every trial's wall).
        load.stack.router.close_idle()
        kept = DB_POOL_FDS if config.shape.training.enabled else 0
        baseline = load.monitor.baseline.fds if load.monitor.baseline else None
        drained = drain_fds(load.stack.server.pid, baseline, config.drain_s, kept, load.stack.server.tree)
        _hold(config, load.collapsed, switch)
    load.monitor.stop(wait_s=INTERRUPTED_MONITOR_WAIT_S if result.interrupted else None)
    result.monitor = load.monitor.result(drained)


def _hold(config: TrialConfig, collapsed: bool, switch: Callable[[str], float]) -> None:
    """The post-load hold (``config.hold_s``, phase ``hold``): the monitor keeps sampling the idle server, so
    what it still holds once its TTLs and a sweep have passed is measured (``releases_results``). A collapsed
    server was killed: nothing to hold for."""
    if config.hold_s > 0 and not collapsed:
        switch("hold")
        time.sleep(config.hold_s)
        switch("gather")


def _cpu_s(config: TrialConfig, workers: list, load: LoadRun, samples: MonitorSamples) -> dict[str, float]:
    """The trial's CPU seconds: the sampling workers' (and of those, before the load), the router's, the
    server's; the training client's when the trial trained."""
    sampling = [w for w in workers if w.training is None]
    cpu = {
        "workers_s": sum(w.cpu_s for w in sampling),
        "workers_startup_s": sum(w.startup_cpu_s for w in sampling),  # of workers_s: before the load
        "router_s": router_cpu_s(load.stack.router.pids()) - load.router_cpu0,
        "server_s": _server_cpu_s(samples),
    }
    if config.shape.training.enabled:
        cpu["training_client_s"] = sum(w.cpu_s for w in workers if w.training is not None)
    return cpu


def _server_cpu_s(samples: MonitorSamples) -> float:
    cpu = samples.samples["cpu_s"]
    valid = cpu[cpu >= 0]
    return float(valid[-1] - valid[0]) if valid.size >= 2 else 0.0


def _note_harness_error(result: TrialResult) -> None:
    """A load worker that crashed, or a fault the injector could not heal, makes the trial a harness error."""
    crashed = [w for w in result.workers if w.crashed]
    if crashed:
        result.error = f"load worker {crashed[0].worker} crashed: {crashed[0].crashed.splitlines()[0]}"
    elif result.fault_log is not None and result.fault_log.unhealed():
        result.error = unhealed_error(result.fault_log.unhealed())


def _keep_samples(result: TrialResult, monitor: Monitor) -> None:
    """An interrupted gather still reports the monitor's samples taken so far."""
    if result.monitor is None:
        monitor.stop(wait_s=INTERRUPTED_MONITOR_WAIT_S)
        result.monitor = monitor.result()
