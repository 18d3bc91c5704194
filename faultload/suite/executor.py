"""How the suite gets an example's outcome: run its trial on the session's shared real stack, judge it.

Kept apart from :mod:`faultload.suite.runner` (time bounds, cache, shrink
bookkeeping, repros) so that bookkeeping can be tested against an executor
whose failures are known in advance (``tests/quality``), and so the real one
is the only place that starts servers. An executor is anything with
``run(config) -> TrialOutcome`` and ``close()``; :class:`StackExecutor` is the real
one: one stack (router, Toxiproxy, SkyRL server) shared by every example,
started on first use and restarted when the server or router died — a
collapse — or when the server's fds do not come back to their baseline.
"""

from __future__ import annotations

import sys
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

from faultload.checker.growth import TrialStart
from faultload.checker.judge import judge
from faultload.client.session import SessionUnreadable
from faultload.model.access import Access
from faultload.model.sdk import SDK_POLL_TIMEOUT_S
from faultload.model.switches import switches_text
from faultload.run.monitor import snapshot
from faultload.run.stack import Stack
from faultload.run.trial import INTERRUPTED_SERVER_GRACE_S, run_trial
from faultload.store.report import build_report
from faultload.store.repro import figures_of
from faultload.suite.errors import SuiteError  # noqa: F401 - raised here, and imported from here by others


@dataclass
class TrialOutcome:
    """One trial as the suite keeps it."""

    verdicts: list
    figures: dict[str, Any]
    requests: int
    wall_s: float
    result: Any = None  # the TrialResult, kept only when something failed (for the report and PNG)
    error: str | None = None  # the harness failed (not a verdict on the target)
    refused: str | None = None  # the server failed before any load (a session no SDK can read): a failure
    # the trial ran but is no test of the target (a fault the injector could not heal): not judged, and the
    # example is rejected, so it neither fails the property nor stays in Hypothesis's database
    unjudged: str | None = None
    report: dict[str, Any] | None = None  # the trial's JSON report, when the executor keeps reports (comparisons)
    comparison: dict[str, Any] | None = None  # a comparative example's faultload.compare/1 JSON (suite.comparative)
    # phase -> wall seconds: stack_ready (the executor readying its shared stack), the trial's
    # TrialResult.phases_s and judge; summed over both sides' trials for a comparative example
    phases_s: dict[str, float] = field(default_factory=dict)
    # what the trial took of the machine (cpu_s, wall_s, rss_bytes, fds): the lanes' measured needs
    usage: dict[str, float] = field(default_factory=dict)


def add_phases(total: dict[str, float], phases: Mapping[str, float]) -> None:
    """Add ``phases``' seconds into ``total`` (a phase first seen is appended: the order they run in)."""
    for name, seconds in phases.items():
        total[name] = total.get(name, 0.0) + seconds


def trial_usage(result) -> dict[str, float]:
    """What a trial took of the machine: its processes' CPU seconds (server, router, load workers, trainers), its
    wall, the server's largest RSS, and the server's and the load's open files at their most."""
    samples = result.monitor.samples if result.monitor is not None else {}

    def most(name: str) -> float:
        column = samples.get(name)
        return float(column.max()) if column is not None and column.size else 0.0

    cpu = {k: v for k, v in result.cpu.items() if k != "workers_startup_s"}  # startup is part of workers_s
    return {
        "cpu_s": float(sum(cpu.values())),
        "wall_s": float(result.wall_s),
        "rss_bytes": most("rss"),
        "fds": most("fds") + most("client_connections_peak"),
    }


class Executor(Protocol):
    def run(self, config) -> TrialOutcome: ...

    def close(self) -> None: ...

    def describe(self) -> str: ...


def describe_config(config) -> str:
    """One line naming what a trial drew (for progress lines)."""
    s, r = config.shape, config.router
    parts = [f"{s.requests} req", f"{s.result_tokens}x{s.num_samples} tok", f"cap {s.max_outstanding}"]
    if s.client != "raw":
        parts.append(f"client {s.client}" + (f" {s.sdk}" if s.sdk else ""))
    if s.arrival != "burst":
        parts.append(f"{s.arrival}/{s.arrival_span_s:g}s" + (f"x{s.arrival_waves}" if s.arrival == "waves" else ""))
    if s.abandon_polls.fraction:
        parts.append(f"abandon {s.abandon_polls.fraction:g}@{s.abandon_polls.after_s:g}")
    if s.delay_polls.fraction:
        parts.append(f"delay {s.delay_polls.fraction:g}@{s.delay_polls.after_s:g}")
    if s.policy.poll_timeout_s != SDK_POLL_TIMEOUT_S:
        parts.append(f"poll timeout {s.policy.poll_timeout_s:g}")
    t = s.training
    if t.enabled:
        parts.append(
            f"train {t.trainers}x{t.steps}:{t.datums}@{t.datum_tokens}"
            + (f" spread {t.spread_s:g}s" if t.spread_s else "")
        )
    router = r.mode + (f" {r.max_num_seqs}x{r.gen_seconds:g}s" if r.mode == "latency" else "")
    router += f" {r.barrier}/{r.barrier_timeout_s:g}s" if r.mode == "barrier" else ""
    parts.append(router)
    parts += [f.to_spec() for f in config.faults.faults]
    if config.direct_edge:
        parts.append("direct edge")
    return ", ".join(parts)


class StackExecutor:
    """Runs each config on one shared real stack and judges it against the budgets."""

    def __init__(
        self,
        workspace,
        budgets,
        baseline_wait_s: float,
        log: Callable[[str], None] | None = None,
        keep_reports: bool = False,
        pools: Callable | None = None,
        access: Access = Access(),
    ) -> None:
        self.workspace = workspace
        self.access = access  # a url= target's key, headers and TLS: never in a trial's config or report
        # where a trial's load workers run: None, local processes; a RayCluster's pool, its nodes (--faultload-ray)
        self.pools = {"pools": pools} if pools is not None else {}
        self.keep_reports = keep_reports  # a comparison reads its metrics from every trial's report
        self.budgets = budgets
        self.baseline_wait_s = baseline_wait_s
        self.stack = None
        self.stack_starts = 0
        self.stack_restarts: list[str] = []
        self.trials = 0
        # the shared server as each trial found it (checker.growth: the session's growth with the requests served)
        self.trial_starts: list[TrialStart] = []
        self._served: dict[int, int] = {}  # server pid -> sample requests its trials sent it
        self._log = log or (lambda message: print(f"faultload: {message}", file=sys.stderr, flush=True))

    def run(self, config) -> TrialOutcome:
        """The judged outcome of one trial; SuiteError when the stack cannot start.

        A trial that raises (the harness failed, not the server) comes back as
        an ``TrialOutcome`` with ``error`` set; an interrupted one re-raises
        KeyboardInterrupt, so the session ends as pytest ends on Ctrl-C.
        """
        ready_from = time.monotonic()
        stack = self.prepare(config)
        self._note_start(stack, config.shape)
        started = time.monotonic()
        try:
            result = run_trial(config, self.workspace, stack=stack, access=self.access, **self.pools)
        except KeyboardInterrupt:  # the session ends: stop the stack without waiting on in-flight forwards
            self.close(server_grace_s=INTERRUPTED_SERVER_GRACE_S)
            raise
        except SessionUnreadable as exc:  # the server's fault before any load; the stack itself is sound
            return TrialOutcome([], {}, config.shape.requests, time.monotonic() - started, refused=exc.verdict_line())
        except Exception as exc:  # noqa: BLE001 - the harness failed, not the server
            self._close_stack(f"trial raised {type(exc).__name__}")
            return TrialOutcome(
                [],
                {},
                config.shape.requests,
                time.monotonic() - started,
                error=f"trial raised {type(exc).__name__}: {exc}",
            )
        if result.interrupted:
            self.close(server_grace_s=INTERRUPTED_SERVER_GRACE_S)
            raise KeyboardInterrupt
        self.trials += 1
        if stack.server is not None and stack.server.pid is not None:
            self._served[stack.server.pid] = self._served.get(stack.server.pid, 0) + config.shape.requests
        verdicts = judge(result, self.budgets)
        outcome = self._judged_outcome(
            config, result, verdicts, {"stack_ready": started - ready_from, **result.phases_s}
        )
        self._log_trial(config, result, verdicts)
        if result.verdict is not None or (stack.server is not None and not stack.server.alive()):
            self._close_stack("the server collapsed or exited")
        elif result.fault_log is not None and result.fault_log.unhealed():
            self._close_stack("the fault injector could not heal a fault")  # its Toxiproxy may hold it still
        return outcome

    def _judged_outcome(self, config, result, verdicts: list, phases_s: dict[str, float]) -> TrialOutcome:
        """The judged trial as the suite keeps it: its result only when something failed (for the repro's report
        and PNG); no verdict at all when a fault was never healed (the trial was no test of the target); a
        harness error beside the verdicts when the trial reported one."""
        failed = any(v.ok is False for v in verdicts)
        outcome = TrialOutcome(
            verdicts,
            figures_of(verdicts),
            config.shape.requests,
            result.wall_s,
            result if failed else None,
            report=build_report(result, verdicts) if self.keep_reports else None,
            phases_s=phases_s,
            usage=trial_usage(result),
        )
        if result.fault_log is not None and result.fault_log.unhealed():  # contract: fault_not_healed
            outcome = TrialOutcome(
                [],
                {},
                config.shape.requests,
                result.wall_s,
                unjudged=f"not judged: {result.error}",
                phases_s=outcome.phases_s,
            )
        elif result.error:
            outcome.error = f"harness error: {result.error}"
        return outcome

    def _log_trial(self, config, result, verdicts: list) -> None:
        """The trial's progress line: what it drew, its wall, what it violated and why, and the collapse."""
        bad = ", ".join(v.name for v in verdicts if v.ok is False) or "none"
        self._log(f"trial {self.trials}: {describe_config(config)} -> {result.wall_s:.1f}s, violated: {bad}")
        for v in verdicts:
            if v.ok is False:
                self._log(f"    {v.name}: {v.detail[:240]}")
        if result.verdict is not None:
            self._log(f"    collapse: {result.verdict.line()[:240]}")

    def _note_start(self, stack, shape) -> None:
        """The server's RSS and fds as this trial finds it, beside the requests it has served (its process's) and
        the load this trial asks of it."""
        pid = stack.server.pid if stack.server is not None else None
        snap = snapshot(pid, stack.server is not None and stack.server.tree)
        if pid is not None and snap is not None:
            tokens = shape.requests * shape.result_tokens * shape.num_samples
            self.trial_starts.append(
                TrialStart(pid, self._served.get(pid, 0), snap.rss, snap.fds, shape.requests, tokens)
            )

    def prepare(self, config) -> Stack:
        """The stack ready for ``config``: started, restarted or waited on (``run`` does it too; the suite's lanes
        do it first when a start is due, at a turn of its own); SuiteError when it cannot start."""
        try:
            return self._ready_stack(config)
        except Exception as exc:  # noqa: BLE001 - reported as the property's error, once
            raise SuiteError(f"could not start the stack for {config.target}: {type(exc).__name__}: {exc}") from exc

    def needs_start(self, config) -> bool:
        """Whether this trial starts a stack first (none yet, or one for another target, switches or scale)."""
        return self.stack is None or self.stack.config != config.stack_config()

    def describe(self) -> str:
        return f"stack started {self.stack_starts}x" + (
            f" (restarts: {'; '.join(self.stack_restarts)})" if self.stack_restarts else ""
        )

    def _ready_stack(self, config):
        wanted = config.stack_config()
        if self.stack is not None and self.stack.config != wanted:
            self._close_stack("the trial needs another stack (target/regress/fix/scale/proxies)")
        if self.stack is not None:
            problem = self._stack_problem()
            if problem:
                self._close_stack(problem)
        unsettled = self.stack.wait_baseline(self.baseline_wait_s) if self.stack is not None else None
        if unsettled:
            self._close_stack(unsettled)
        if self.stack is None:
            self._log(
                f"starting the stack: {config.target}"
                + switches_text(config.regress, config.fixes)
                + f", time scale {config.shape.time_scale:g}, proxies {'on' if wanted.proxies else 'off'}"
            )
            self.stack = Stack(wanted, config.router, self.workspace, self.access).start()
            self.stack_starts += 1
        return self.stack

    def _stack_problem(self) -> str | None:
        stack = self.stack
        if stack.server is None or not stack.server.alive():
            return "the server exited"
        if stack.router is None:
            return "no router"
        try:
            with urllib.request.urlopen(f"{stack.router.url}/health", timeout=3.0) as response:
                if response.status != 200:
                    return f"router /health answered {response.status}"
        except OSError as exc:
            return f"router /health failed: {exc}"
        return None

    def _close_stack(self, why: str) -> None:
        if self.stack is None:
            return
        self._log(f"restarting the stack: {why}")
        self.stack_restarts.append(why)
        self.close()

    def close(self, server_grace_s: float | None = None) -> None:
        """Stop the shared stack (``server_grace_s``: shorten the server's SIGTERM-to-SIGKILL grace)."""
        if self.stack is not None:
            errors = self.stack.close(server_grace_s=server_grace_s)
            if errors:
                self._log("stack cleanup: " + "; ".join(errors))
            self.stack = None
