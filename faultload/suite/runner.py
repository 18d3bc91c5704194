"""The engine behind the properties: one shared stack, trials, verdicts, shrink bookkeeping, repros.

One :class:`SuiteRunner` per pytest session. Each Hypothesis example calls
:meth:`SuiteRunner.check` with its drawn ``TrialConfig`` and its property's
:class:`Family`. ``check``:

1. gets the shared stack ready (started on first use; restarted when the
   server or router died — a collapse — or when the server's fds do not come
   back to their start-up baseline within the profile's wait);
2. runs the trial on it (``run_trial(config, workspace, stack=stack)``) and
   judges it (``judge(result, budgets)``), unless the same config already ran
   in this session (results are cached by config: Hypothesis's final replay
   of the shrunk example, and the minimal example every property tries first,
   cost nothing);
3. calls ``hypothesis.target`` with the family's figures;
4. raises ``AssertionError`` naming each of the family's invariants that was
   violated (``ok is False``; unknown is not a failure).

Time bounds (see :mod:`faultload.suite.profiles`): once a bound is spent a
config that has not run yet is *not run* — the example passes without a trial
and is counted and reported, never hidden. While shrinking, that makes every
remaining candidate cheap, so the shrinker finishes at once with the smallest
failure found so far.
"""

from __future__ import annotations

import math
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultload.suite.profiles import Profile
from faultload.targets.skyrl_patches import switches_text

ALL = ("no_lost_results", "result_integrity", "bounded_fds", "bounded_rss", "healthz_latency", "bounded_cpu",
       "retry_amplification", "clean_server_log", "no_collapse")


@dataclass(frozen=True)
class Family:
    """One property: which invariants it asserts, which figures it steers toward, what it draws."""

    name: str
    invariants: tuple[str, ...]  # () = every invariant
    targets: tuple[str, ...]
    # Changes to the profile's strategies.Limits for this family (e.g. storms=False);
    # max_result_wait_s only ever lowers the profile's.
    limits: tuple[tuple[str, Any], ...] = ()
    weight: float = 1.0  # multiplies the profile's examples and time per property
    known: tuple[str, ...] = ()  # known-bug trials (strategies.known) run first when the profile asks


def known_configs(profile: Profile, family: Family, target: str, regress: tuple[str, ...]) -> list:
    """The family's known-bug trials as TrialConfigs, or none when the profile does not run them."""
    if not profile.known_examples or profile.confirm:
        return []
    from strategies.known import known_trial_config

    limits = family_limits(profile, family)
    return [known_trial_config(name, target, profile.time_scale, regress, limits) for name in family.known]


def family_limits(profile: Profile, family: Family):
    """The profile's limits with the family's restrictions (no storms, shorter result waits)."""
    limits = profile.limits
    changes = dict(family.limits)
    if "max_result_wait_s" in changes:
        changes["max_result_wait_s"] = min(limits.max_result_wait_s, changes["max_result_wait_s"])
    return limits.replace(**changes) if changes else limits


def family_examples(profile: Profile, family: Family) -> int:
    return max(1, int(round(profile.max_examples * family.weight)))


# Target label -> how to read it from a trial's figures.
def _verdict_figure(name: str):
    def read(figures: dict[str, Any]) -> float | None:
        block = figures.get(name)
        return block.get("figure") if isinstance(block, dict) else None

    return read


TARGETS = {
    "lost_results": _verdict_figure("no_lost_results"),
    "corrupt_results": _verdict_figure("result_integrity"),
    "fds_per_in_flight": lambda f: f.get("fds_per_in_flight"),
    "rss_growth_mib": lambda f: f.get("rss_growth_mib"),
    "healthz_p99_s": lambda f: f.get("healthz_p99_s"),
    "attempts_per_request": _verdict_figure("retry_amplification"),
    "server_cpu_ms_per_request": _verdict_figure("bounded_cpu"),
    "server_log_errors": _verdict_figure("clean_server_log"),
}


@dataclass
class Outcome:
    """One trial as the suite keeps it."""

    verdicts: list
    figures: dict[str, Any]
    requests: int
    wall_s: float
    result: Any = None  # the TrialResult, kept only when something failed (for the report and PNG)
    error: str | None = None


@dataclass
class PropertyState:
    """Bookkeeping of one property (one test item) for the report and the time bounds."""

    nodeid: str
    family: Family | None = None
    started: float = field(default_factory=time.monotonic)
    trials: int = 0  # trials run for this property
    cached: int = 0  # examples answered from the session's cache
    not_run: int = 0  # examples passed without a trial (a time bound was spent)
    first_failure_at: float | None = None
    first_failure_requests: int | None = None
    last_failure_at: float | None = None
    failures: int = 0
    shrink_cut: bool = False  # the shrink budget ended shrinking
    last_failure: tuple[Any, Outcome] | None = None  # (config, outcome) of the latest failing example
    best: tuple[Any, Outcome] | None = None  # the simplest failing example (see complexity): the repro
    reduce_log: list[dict[str, Any]] = field(default_factory=list)
    broken: str | None = None  # an infrastructure error: every later example fails with it at once
    repro_path: Path | None = None
    ended_at: float | None = None
    remaining_after: int = 0  # properties after this one in the session
    share_s: float | None = None  # its fair share of the session's time left when it started
    shrink_until: float | None = None  # shrinking (the reducer's and Hypothesis's) stops here

    @property
    def shrink_seconds(self) -> float:
        """From the first failure to the end of the property (the final replay included)."""
        if self.first_failure_at is None:
            return 0.0
        return (self.ended_at or self.last_failure_at or self.first_failure_at) - self.first_failure_at

    @property
    def shrinking(self) -> bool:
        return self.first_failure_at is not None


class SuiteError(RuntimeError):
    """The suite could not run a trial (stack did not start, harness crashed): not an invariant."""


class SuiteRunner:
    def __init__(self, profile: Profile, target: str, regress: tuple[str, ...], workspace, budgets,
                 watchdog=None, shrink_s: float | None = None, log=None, fixes: tuple[str, ...] = ()) -> None:
        self.profile = profile
        self.target = target
        self.regress = regress
        self.fixes = fixes
        self.workspace = workspace
        self.budgets = budgets
        self.watchdog = watchdog
        self.shrink_s = profile.shrink_s if shrink_s is None else shrink_s
        self.session_started = time.monotonic()
        self.stack = None
        self.stack_starts = 0
        self.stack_restarts: list[str] = []
        self.cache: dict[str, Outcome] = {}
        self.states: dict[str, PropertyState] = {}
        self.current: PropertyState | None = None
        self.trials = 0
        self._log = log or (lambda message: print(f"faultload: {message}", file=sys.stderr, flush=True))

    # ------------------------------------------------------------------ properties

    def begin(self, nodeid: str, remaining: int = 0) -> PropertyState:
        """A property starts; ``remaining`` properties come after it in this session.

        The session's time left is shared fairly: this property may draw new
        trials for at most its share (and ``property_s``), and a failure may
        shrink only as long as leaves the others ``0.8 × property_s`` each.
        """
        state = self.states.setdefault(nodeid, PropertyState(nodeid))
        state.remaining_after = remaining
        left = self.profile.session_s - (time.monotonic() - self.session_started)
        state.share_s = max(0.0, left / (remaining + 1))
        self.current = state
        return state

    def end(self) -> None:
        if self.current is not None:
            self.current.ended_at = time.monotonic()
        self.current = None

    def check(self, family: Family, config) -> None:
        """Run (or recall) one example and assert the family's invariants."""
        import hypothesis

        state = self.current or self.begin("<outside pytest>")
        state.family = family
        outcome = self._outcome(config, state, family)
        if outcome is None:  # a time bound is spent: not run, counted, reported
            return
        for label in family.targets:
            value = TARGETS[label](outcome.figures)
            if value is not None and isinstance(value, (int, float)) and math.isfinite(value):
                hypothesis.target(float(value), label=label)
        failing = self._failing(family, outcome)
        if failing:
            first = not state.shrinking
            self._record_failure(state, config, outcome)
            if first and self.profile.reduce_share > 0:
                self._reduce(state, family, config)
            lines = [f"{v.name} violated: figure {v.figure} vs budget {v.budget}: {v.detail}" for v in failing]
            raise AssertionError(
                f"{len(failing)} invariant(s) violated by a {config.shape.requests}-request trial "
                f"(target {config.target}{switches_text(config.regress, config.fixes)}, "
                f"time scale {config.shape.time_scale:g}):\n  " + "\n  ".join(lines)
            )

    @staticmethod
    def _failing(family: Family, outcome: Outcome) -> list:
        checked = family.invariants or ALL
        return [v for v in outcome.verdicts if v.name in checked and v.ok is False]

    def _outcome(self, config, state: PropertyState, family: Family, deadline: float | None = None) -> Outcome | None:
        """The trial's outcome (cached, or run now); None when a time bound forbids a new trial."""
        from faultload.repro import config_key

        key = config_key(config)
        outcome = self.cache.get(key)
        if outcome is not None:
            state.cached += 1
        else:
            if state.broken:
                raise SuiteError(state.broken)
            now = time.monotonic()
            if self._out_of_time(state, now, family) or (deadline is not None and now > deadline):
                state.not_run += 1
                if state.shrinking:
                    state.shrink_cut = True
                return None
            outcome = self._run(config, state)
            self.cache[key] = outcome
        if outcome.error:
            raise SuiteError(outcome.error)
        return outcome

    def _out_of_time(self, state: PropertyState, now: float, family: Family) -> bool:
        if now - self.session_started > self.profile.session_s:
            return True
        if state.shrinking:
            return now > (state.shrink_until or now)
        budget = self.profile.property_s * family.weight
        if state.share_s is not None:
            budget = min(budget, state.share_s * family.weight)
        return now - state.started > budget

    def _shrink_until(self, state: PropertyState, now: float) -> float:
        session_end = self.session_started + self.profile.session_s
        reserve = 0.8 * self.profile.property_s * state.remaining_after
        return now + max(min(20.0, self.shrink_s), min(self.shrink_s, session_end - now - reserve))

    def _record_failure(self, state: PropertyState, config, outcome: Outcome) -> None:
        now = time.monotonic()
        state.failures += 1
        if state.first_failure_at is None:
            state.first_failure_at = now
            state.first_failure_requests = config.shape.requests
            state.shrink_until = self._shrink_until(state, now)
        state.last_failure_at = now
        state.last_failure = (config, outcome)
        if state.best is None or complexity(config) < complexity(state.best[0]):
            state.best = (config, outcome)

    def _reduce(self, state: PropertyState, family: Family, config) -> None:
        """Greedy, domain-aware reduction of a first failure, before Hypothesis shrinks it.

        Hypothesis's shrinker is generic and each of its candidates is a whole
        trial; this tries the reductions that matter first — 1 request, half
        the requests (repeatedly), each fault dropped, late/abandoned polls,
        arrivals, storms, router, result size — keeping each that still fails
        the family's invariants. Bounded by ``reduce_share`` of the shrink budget.
        """
        start = state.first_failure_at or time.monotonic()
        deadline = start + ((state.shrink_until or start) - start) * self.profile.reduce_share
        current = config
        essential: set[str] = set()  # steps that made the failure go away: not retried on later passes
        progress = True
        while progress and time.monotonic() < deadline:
            progress = False
            for label, candidate in reductions(current):
                if time.monotonic() >= deadline:
                    break
                if label in essential:
                    continue
                try:
                    candidate.validate()
                except ValueError as exc:
                    self._log(f"reduction {label!r} skipped: {exc}")
                    continue
                started = time.monotonic()
                outcome = self._outcome(candidate, state, family, deadline)
                if outcome is None:
                    break
                fails = bool(self._failing(family, outcome))
                state.reduce_log.append({
                    "step": label, "requests": candidate.shape.requests, "still_fails": fails,
                    "seconds": round(time.monotonic() - started, 1),
                })
                if fails:
                    self._record_failure(state, candidate, outcome)
                    current = candidate
                    progress = True
                    break
                if "requests" not in label:  # "N requests" differs every pass; the others do not
                    essential.add(label)
        self._log(f"reduced {config.shape.requests} -> {current.shape.requests} requests "
                  f"({sum(1 for r in state.reduce_log if r['still_fails'])} of {len(state.reduce_log)} steps kept)")

    # ------------------------------------------------------------------ trials

    def _run(self, config, state: PropertyState) -> Outcome:
        from faultload.judge import judge
        from faultload.repro import figures_of
        from faultload.trial import run_trial

        if self.watchdog is not None:
            import dataclasses

            config = dataclasses.replace(config, watchdog=self.watchdog)
        try:
            stack = self._ready_stack(config)
        except Exception as exc:  # noqa: BLE001 - reported as the property's error, once
            state.broken = f"could not start the stack for {config.target}: {type(exc).__name__}: {exc}"
            raise SuiteError(state.broken) from exc
        started = time.monotonic()
        try:
            result = run_trial(config, self.workspace, stack=stack)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - the harness failed, not the server
            # Reported as the property's error, once: every later example of this
            # property fails with it at once (no trial, no stack restart loop).
            self._close_stack(f"trial raised {type(exc).__name__}")
            state.broken = f"trial raised {type(exc).__name__}: {exc}"
            return Outcome([], {}, config.shape.requests, time.monotonic() - started, error=state.broken)
        if result.interrupted:
            raise KeyboardInterrupt
        self.trials += 1
        state.trials += 1
        verdicts = judge(result, self.budgets)
        figures = figures_of(result, verdicts)
        failed = any(v.ok is False for v in verdicts)
        outcome = Outcome(verdicts, figures, config.shape.requests, result.wall_s, result if failed else None)
        if result.error:
            outcome.error = f"harness error: {result.error}"
        bad = ", ".join(v.name for v in verdicts if v.ok is False) or "none"
        self._log(f"trial {self.trials}: {self._describe(config)} -> {result.wall_s:.1f}s, violated: {bad}")
        for v in verdicts:
            if v.ok is False:
                self._log(f"    {v.name}: {v.detail[:240]}")
        if result.verdict is not None:
            self._log(f"    collapse: {result.verdict.line()[:240]}")
        if result.verdict is not None or (stack.server is not None and not stack.server.alive()):
            self._close_stack("the server collapsed or exited")
        return outcome

    @staticmethod
    def _describe(config) -> str:
        s, r = config.shape, config.router
        parts = [f"{s.requests} req", f"{s.result_tokens}x{s.num_samples} tok", f"cap {s.max_outstanding}"]
        if s.arrival != "burst":
            parts.append(f"{s.arrival}/{s.arrival_span_s:g}s" + (f"x{s.arrival_waves}" if s.arrival == "waves" else ""))
        if s.abandon_polls.fraction:
            parts.append(f"abandon {s.abandon_polls.fraction:g}@{s.abandon_polls.after_s:g}")
        if s.delay_polls.fraction:
            parts.append(f"delay {s.delay_polls.fraction:g}@{s.delay_polls.after_s:g}")
        if s.policy.poll_timeout_s != 45.0:
            parts.append(f"poll timeout {s.policy.poll_timeout_s:g}")
        router = r.mode + (f" {r.max_num_seqs}x{r.gen_seconds:g}s" if r.mode == "latency" else "")
        router += f" {r.barrier}/{r.barrier_timeout_s:g}s" if r.mode == "barrier" else ""
        parts.append(router)
        parts += [f.to_spec() for f in config.faults.faults]
        if config.direct_edge:
            parts.append("direct edge")
        return ", ".join(parts)

    def _ready_stack(self, config):
        from faultload.stack import Stack

        wanted = config.stack_config()
        if self.stack is not None and self.stack.config != wanted:
            self._close_stack("the trial needs another stack (target/regress/fix/scale/proxies)")
        if self.stack is not None:
            problem = self._stack_problem()
            if problem:
                self._close_stack(problem)
        if self.stack is not None and not self.stack.wait_baseline(self.profile.baseline_wait_s):
            self._close_stack(f"server fds not back at baseline after {self.profile.baseline_wait_s:g}s")
        if self.stack is None:
            self._log(f"starting the stack: {config.target}"
                      + switches_text(config.regress, config.fixes)
                      + f", time scale {config.shape.time_scale:g}, proxies {'on' if wanted.proxies else 'off'}")
            self.stack = Stack(wanted, config.router, self.workspace).start()
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
        errors = self.stack.close()
        if errors:
            self._log("stack cleanup: " + "; ".join(errors))
        self.stack = None

    def close(self) -> None:
        if self.stack is not None:
            errors = self.stack.close()
            if errors:
                self._log("stack cleanup: " + "; ".join(errors))
            self.stack = None

    # ------------------------------------------------------------------ repros

    def write_repro(self, state: PropertyState, hypothesis_seed: Any = None) -> Path | None:
        """Write the property's smallest failing trial (its last failure) as a repro, with report and PNG."""
        from faultload import report as report_mod
        from faultload.repro import build_repro, config_key, replay_command, write_repro

        if state.best is None:
            return None
        config, outcome = state.best
        family = state.family
        checked = family.invariants if family and family.invariants else ALL
        shrink_s = state.shrink_seconds
        found_by = {
            "property": state.nodeid,
            "profile": self.profile.name,
            "hypothesis_seed": hypothesis_seed,
            "shrink": {
                "from_requests": state.first_failure_requests,
                "to_requests": config.shape.requests,
                "failing_examples": state.failures,
                "shrink_s": round(shrink_s, 1),
                "cut_by_budget": state.shrink_cut,
                "budget_s": round((state.shrink_until or 0) - (state.first_failure_at or 0), 1),
                "reduce_steps": state.reduce_log,
                "hypothesis_final_requests": state.last_failure[0].shape.requests if state.last_failure else None,
            },
            "trials_run": state.trials,
        }
        stem = f"{_slug(state.nodeid)}-{time.strftime('%Y%m%dT%H%M%S')}-{config_key(config)}"
        directory = self.workspace.root / "repros"
        repro = build_repro(config, outcome.verdicts, outcome.figures, self.budgets, checked=checked,
                            found_by=found_by)
        if outcome.result is not None:
            report = report_mod.build_report(outcome.result, outcome.verdicts)
            report_path = directory / f"{stem}.report.json"
            directory.mkdir(parents=True, exist_ok=True)
            report_mod.write_json(report, report_path)
            repro["report"] = str(report_path)
            try:
                from faultload.plot import write_timeline

                repro["plot"] = str(write_timeline(outcome.result, directory / f"{stem}.png",
                                                   title=f"{state.nodeid}: {config.shape.requests} requests"))
            except Exception as exc:  # noqa: BLE001 - matplotlib missing or a plotting bug: the repro still counts
                repro["plot_error"] = f"{type(exc).__name__}: {exc}"
        path = write_repro(repro, directory, stem)
        state.repro_path = path
        repro["replay"] = replay_command(path)
        write_repro(repro, directory, stem)
        return path

    def summary_dict(self, outcomes: dict[str, str] | None = None) -> dict[str, Any]:
        """The session as data (``--faultload-summary-json``; what ``faultload matrix`` reads).

        ``outcomes``: pytest's outcome per property nodeid (passed, failed, skipped, error).
        """
        outcomes = outcomes or {}
        properties = []
        for state in self.states.values():
            violated: list[str] = []
            if state.best is not None:
                family = state.family
                checked = family.invariants if family and family.invariants else ALL
                violated = [v.name for v in state.best[1].verdicts if v.name in checked and v.ok is False]
            properties.append({
                "nodeid": state.nodeid,
                "name": state.nodeid.split("::")[-1],
                "outcome": outcomes.get(state.nodeid, "unknown"),
                "violated": violated,
                "trials": state.trials,
                "not_run": state.not_run,
                "first_failure_requests": state.first_failure_requests,
                "repro_requests": state.best[0].shape.requests if state.best else None,
                "repro_path": str(state.repro_path) if state.repro_path else None,
                "shrink_s": round(state.shrink_seconds, 1) if state.shrinking else None,
                "error": state.broken,
            })
        return {
            "profile": self.profile.name, "target": self.target, "regress": list(self.regress),
            "fixes": list(self.fixes),
            "trials": self.trials, "wall_s": round(time.monotonic() - self.session_started, 1),
            "stack_starts": self.stack_starts, "properties": properties,
        }

    def summary_lines(self) -> list[str]:
        lines = [
            f"profile {self.profile.name}: target {self.target}"
            + switches_text(self.regress, self.fixes)
            + f", time scale {self.profile.time_scale:g}; {self.trials} trials in "
            f"{time.monotonic() - self.session_started:.0f}s; stack started {self.stack_starts}x"
            + (f" (restarts: {'; '.join(self.stack_restarts)})" if self.stack_restarts else "")
        ]
        for state in self.states.values():
            name = state.nodeid.split("::")[-1]
            text = f"  {name}: {state.trials} trials, {state.cached} cached"
            if state.not_run:
                text += f", {state.not_run} examples not run (time bound spent)"
            if state.shrinking:
                shrink_s = state.shrink_seconds
                final = state.best[0].shape.requests if state.best else None
                text += (f"; FAILED, shrunk from {state.first_failure_requests} to {final} requests "
                         f"in {shrink_s:.0f}s over {state.failures} failing examples"
                         + (" (cut by the shrink budget)" if state.shrink_cut else ""))
            if state.repro_path:
                text += f"\n    repro: {state.repro_path}\n    replay: faultload replay {state.repro_path}"
            if state.broken:
                text += f"; ERROR {state.broken}"
            lines.append(text)
        return lines


def complexity(config) -> tuple:
    """Sort key of a failing trial: smaller is a simpler repro (requests first)."""
    s, r = config.shape, config.router
    return (
        s.requests, len(config.faults.faults), int(s.abandon_polls.fraction > 0) + int(s.delay_polls.fraction > 0),
        int(s.arrival != "burst"), int(s.policy != type(s.policy)()), int(r.mode != "immediate"),
        s.result_tokens * s.num_samples, s.workers, int(s.accept != "proto"), s.max_outstanding,
        s.abandon_polls.after_s + s.delay_polls.after_s,
    )


def with_requests(config, requests: int):
    """``config`` with ``requests`` requests; cap, waves and router processes follow.

    The barrier size stays: a wave the fewer requests no longer fill waits
    for its timeout, which is often what made the trial fail.
    """
    import dataclasses

    from strategies.routers import router_procs

    s = config.shape
    cap = min(s.max_outstanding, requests) if s.max_outstanding else 0
    shape = dataclasses.replace(s, requests=requests, max_outstanding=cap, workers=min(s.workers, requests),
                                arrival_waves=min(s.arrival_waves, requests))
    held = min(requests, cap or requests)
    router = dataclasses.replace(config.router, procs=router_procs(held))
    return dataclasses.replace(config, shape=shape, router=router)


def reductions(config):
    """(label, simpler config) candidates, most valuable first; each differs from ``config``.

    Fewer requests first; then what makes a trial long (late and abandoned
    polls, spread arrivals), so later candidates run faster; then each fault;
    then the client policy, the router and the result size.
    """
    import dataclasses

    from faultload.faults.spec import FaultSchedule
    from faultload.shape import ClientPolicy, PollBehaviour
    from strategies.faults import fatal_kinds
    from strategies.routers import immediate_router

    s = config.shape

    def shape(label, **changes):
        return label, dataclasses.replace(config, shape=dataclasses.replace(s, **changes))

    if s.requests > 1:
        yield "1 request", with_requests(config, 1)
    if s.requests > 3:
        yield f"{s.requests // 2} requests", with_requests(config, s.requests // 2)
    if s.delay_polls.fraction:
        yield shape("no delayed polls", delay_polls=PollBehaviour())
    if s.abandon_polls.fraction:
        yield shape("no abandoned polls", abandon_polls=PollBehaviour())
        if s.abandon_polls.fraction < 1:
            yield shape("every request abandons", abandon_polls=PollBehaviour(1.0, s.abandon_polls.after_s))
    if s.arrival != "burst":
        yield shape("one burst", arrival="burst", arrival_span_s=0.0, arrival_waves=1)
    faults = config.faults.faults
    for i, fault in enumerate(faults):
        rest = FaultSchedule(faults[:i] + faults[i + 1:])
        yield f"without {fault.to_spec()}", dataclasses.replace(config, faults=rest, fatal_faults=fatal_kinds(rest))
    if s.policy != ClientPolicy():
        yield shape("the SDK's poll policy", policy=ClientPolicy())
    if config.router.mode != "immediate":
        yield "immediate router", dataclasses.replace(config, router=immediate_router(s))
    if s.result_tokens > 1 or s.num_samples > 1:
        yield shape("1-token results", result_tokens=1, num_samples=1)
    if s.workers > 1:
        yield shape("1 worker", workers=1)
    if s.accept != "proto":
        yield shape("proto results", accept="proto")


def _slug(nodeid: str) -> str:
    name = nodeid.split("::")[-1]
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:60]
