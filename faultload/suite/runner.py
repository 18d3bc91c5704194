"""The engine behind the properties: one shared stack, trials, verdicts, shrink bookkeeping, repros.

One :class:`SuiteRunner` per pytest session. Each Hypothesis example calls :meth:`SuiteRunner.check` with its
drawn ``TrialConfig`` and its :class:`Property`. ``check`` gets the shared stack ready (started on first use,
restarted after a collapse or fds that do not come back), runs and judges the trial (the
:mod:`~faultload.suite.executor`) unless the same config ran already (cached: the final replay and the minimal
example cost nothing), tallies per invariant judged / unknown / skipped (a property that judged none fails with
that reason), targets the invariants' figures, and raises ``AssertionError`` naming each violation, the
property's own first (with a base, only new ones: :mod:`~faultload.suite.gate`).

Time bounds (:mod:`faultload.suite.profiles`): once a bound is spent a config not run yet is *not run*, counted
and reported, never hidden; while shrinking, that makes every candidate left cheap, so the shrinker finishes
with the smallest failure found so far.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import hypothesis

from faultload.checker.growth import check_session_growth
from faultload.checker.inputs import Verdict
from faultload.host.admission import Admission, AdmissionTimeout
from faultload.model.access import Access
from faultload.store.repro import config_key
from faultload.suite import summary
from faultload.suite.beside_base import BesideBase
from faultload.suite.comparative import MIN_REQUESTS, ComparingExecutor, at_least, comparing_executor, comparison_key
from faultload.suite.executor import Executor, StackExecutor, SuiteError, TrialOutcome, add_phases
from faultload.suite.lanes import Usage, trial_turn
from faultload.suite.profiles import Profile
from faultload.suite.properties import Property, known_configs, target_figure
from faultload.suite.reducer import complexity, greedy_reduce
from faultload.suite.repros import write_property_repro
from faultload.suite.state import PropertyState, Tally
from faultload.suite.verdicts import not_judged_reason, tally, violation_message


class SuiteRunner(BesideBase):
    """One pytest session's bookkeeping: time bounds, cache, tallies, shrinking, repros.

    ``executor`` runs and judges a trial (default: :class:`StackExecutor`, the
    real shared stack, its trials' load workers from ``pools``: local
    processes by default, a Ray cluster's actors with ``--faultload-ray``);
    settings arrive as values, nothing is read behind the caller's back.
    """

    def __init__(
        self,
        profile: Profile,
        target: str,
        regress: tuple[str, ...],
        workspace,
        budgets,
        watchdog=None,
        shrink_s: float | None = None,
        log=None,
        fixes: tuple[str, ...] = (),
        executor: Executor | None = None,
        baseline=None,
        compare_settings=None,
        pools=None,
        access: Access = Access(),
        admission: Admission | None = None,
        lane: str = "",
        base: str | None = None,
        base_executor: Executor | None = None,
        baseline_missing: str | None = None,
    ) -> None:
        self.profile = profile
        self.target = target
        self.regress = regress
        self.fixes = fixes
        self.workspace = workspace
        self.budgets = budgets
        self.watchdog = watchdog
        self.shrink_s = profile.shrink_s if shrink_s is None else shrink_s
        self.session_started = time.monotonic()
        self.cache: dict[str, TrialOutcome] = {}
        self.states: dict[str, PropertyState] = {}
        self.current: PropertyState | None = None
        self.trials = 0
        self.notes: list[str] = []  # what the session decided on its own (a default baseline), said once
        self.phases_s: dict[str, float] = {}  # every trial run's phases, summed (the summary's breakdown)
        self._log = log or (lambda message: print(f"faultload: {message}", file=sys.stderr, flush=True))
        self.executor: Executor = executor or StackExecutor(
            workspace, budgets, profile.baseline_wait_s, self._log, pools=pools, access=access
        )
        # the pull-request gate (suite.gate): the base every example runs on too, and its own stack (made when its
        # first example runs)
        self.base = base
        self.base_executor: Executor | None = base_executor
        self._stack_settings = (pools, access)
        self.baseline = baseline  # the comparative property's other build (a model.build.Build), or None
        self.baseline_missing = baseline_missing  # why a comparison that is due cannot run (its property's error)
        self._compare = (executor, compare_settings)
        self.comparing: ComparingExecutor | None = None  # made when a comparative example first runs
        # session_growth, judged when the last property ends (the stack is shared across the session's trials);
        # a violation fails that property with a line of its own, so pytest exits 1 and the matrix sees it
        self.session_growth: Verdict | None = None
        self.session_failed_in: str | None = None
        # the machine's turns (trials side by side, or alone), shared with every session in the workspace; the
        # lane this runner is (a pytest-xdist worker's id, "" for a session of one lane)
        self.admission = admission
        self.lane = lane
        self.usage = Usage()  # what this lane's trials took of the machine (the next session's lane count)
        self.stop_file: Path | None = None  # a lane's: present once its session should stop (pytest -x, another lane)

    def note(self, line: str) -> None:
        """A line for the terminal now and for the summary's first lines (what the session decided)."""
        self.notes.append(line)
        self._log(line)

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
            if self.current.remaining_after == 0:
                self._judge_session(self.current.nodeid)
        self.current = None

    def _judge_session(self, nodeid: str) -> None:
        """The shared server's growth across the session's trials (``checker.growth``), once the last property
        has run; a violation is charged to that property (``session_failure``)."""
        starts = getattr(self.executor, "trial_starts", [])
        self.session_growth = check_session_growth(starts, self.budgets)
        if self.session_growth.ok is False:
            self.session_failed_in = nodeid
            self._log(f"session: {self.session_growth.detail}")

    def session_failure(self, nodeid: str) -> str | None:
        """The line that fails the session's last property when the shared server grew with its work, or None."""
        if nodeid != self.session_failed_in or self.session_growth is None:
            return None
        return f"session: {self.session_growth.name} violated: {self.session_growth.detail}"

    def check(self, prop: Property, config) -> None:
        """Run (or recall) one example and assert the property's invariants."""
        state = self.current or self.begin("<outside pytest>")
        state.prop = prop
        config = self.as_run(config)
        outcome = self._outcome(config, state, prop)
        if outcome is None:  # a time bound is spent: not run, counted, reported
            return
        if outcome.unjudged:  # no test of the target: reported, and the example rejected (never a pass or a fail)
            if outcome.unjudged not in state.unjudged:
                state.unjudged.append(outcome.unjudged)
            hypothesis.reject()
        for invariant in prop.steers_by:
            value = target_figure(outcome.figures, invariant)
            if value is not None:
                hypothesis.target(value, label=invariant)
        violations = self._failing(prop, config, state, outcome)
        if violations:
            first = not state.shrinking
            self._record_failure(state, config, outcome)
            if first and self.profile.reduce_share > 0:
                self._reduce(state, prop, config)
            raise AssertionError(violation_message(prop, config, violations))

    def _now(self) -> float:
        return time.monotonic()

    def as_run(self, config):
        """``config`` with the session's overrides (the watchdog limits): the config the trial runs,
        caches under and stores in its repro."""
        if self.watchdog is not None and config.watchdog != self.watchdog:
            config = dataclasses.replace(config, watchdog=self.watchdog)
        return config

    def not_judged(self, nodeid: str) -> str | None:
        """Why a property that passed fails still: the session's server grew with its work
        (:meth:`session_failure`, charged to the last property), or it proves nothing
        (:meth:`property_not_judged`); None when it passes."""
        return self.session_failure(nodeid) or self.property_not_judged(nodeid)

    def property_not_judged(self, nodeid: str) -> str | None:
        """Why a property that passed proves nothing (no example judged any of its invariants), or None."""
        return not_judged_reason(self.states.get(nodeid))

    def _outcome(
        self, config, state: PropertyState, prop: Property, deadline: float | None = None
    ) -> TrialOutcome | None:
        """The trial's outcome (cached, or run now); None when a time bound forbids a new trial.

        The property's first examples are its known trials (Hypothesis runs explicit examples first): they run
        whatever the property's own time bound says, and their seconds are not charged to its draws.
        """
        if state.known_left is None:
            state.known_left = len(known_configs(self.profile, prop, self.target, self.regress))
        known = state.known_left > 0 and not state.shrinking
        state.known_left -= known
        started = time.monotonic()
        key = self._key(config, prop)
        outcome = self.cache.get(key)
        if outcome is not None:
            state.cached += 1
        else:
            if state.broken:
                raise SuiteError(state.broken)
            if state.refused:
                raise AssertionError(state.refused)
            now = time.monotonic()
            if known:  # the profile's promise: every session runs it, within the session's bound only
                out = now - self.session_started > self.profile.session_s
            else:
                late = deadline is not None and now - state.shrink_waited_s > deadline
                out = self._out_of_time(state, now, prop) or late
            out = out or self.stopped()
            if out:
                state.not_run += 1
                tally(state, prop, key, None)
                if state.shrinking:
                    state.shrink_cut = True
                return None
            outcome = self._run(config, state, self._executor(prop))
            self.cache[key] = outcome
        if known:
            state.known_s += time.monotonic() - started
        if outcome.error:
            raise SuiteError(outcome.error)
        if outcome.refused:  # every later example of this property fails with it at once, without a trial
            state.refused = outcome.refused
            raise AssertionError(outcome.refused)
        tally(state, prop, key, outcome)
        return outcome

    def stopped(self) -> bool:
        """Whether the session of lanes this runner is one of should stop (``-x``: another lane's property failed):
        its examples from now on are not run, as past a time bound."""
        return self.stop_file is not None and self.stop_file.exists()

    def _out_of_time(self, state: PropertyState, now: float, prop: Property) -> bool:
        if now - self.session_started > self.profile.session_s:
            return True
        if state.shrinking:
            return now - state.shrink_waited_s > (state.shrink_until or now)  # its turns' waits: not its time
        budget = self.profile.property_s * prop.weight
        if state.share_s is not None:
            budget = min(budget, state.share_s * prop.weight)
        return now - state.started - state.known_s > budget

    def _shrink_until(self, state: PropertyState, now: float) -> float:
        session_end = self.session_started + self.profile.session_s
        reserve = 0.8 * self.profile.property_s * state.remaining_after
        return now + max(min(20.0, self.shrink_s), min(self.shrink_s, session_end - now - reserve))

    def _record_failure(self, state: PropertyState, config, outcome: TrialOutcome) -> None:
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

    def _reduce(self, state: PropertyState, prop: Property, config) -> None:
        """Greedy, domain-aware reduction of a first failure, before Hypothesis shrinks it.

        Hypothesis's shrinker is generic and each of its candidates is a whole
        trial; this tries the reductions that matter first — 1 request, half
        the requests (repeatedly), each fault dropped, late/abandoned polls,
        arrivals, storms, router, result size — keeping each that still fails
        the property's invariants. Bounded by ``reduce_share`` of the shrink budget.
        """
        start = state.first_failure_at or time.monotonic()
        deadline = start + ((state.shrink_until or start) - start) * self.profile.reduce_share

        def still_fails(candidate) -> bool | None:
            if prop.comparative:  # as its draws run: enough requests, a load long enough to measure
                candidate = at_least(candidate)
            outcome = self._outcome(candidate, state, prop, deadline)
            if outcome is None:
                return None
            fails = bool(self._failing(prop, candidate, state, outcome))
            if fails:
                self._record_failure(state, candidate, outcome)
            return fails

        current = greedy_reduce(
            config,
            still_fails,
            lambda: time.monotonic() - state.shrink_waited_s >= deadline,
            state.reduce_log,
            allowed=lambda label, candidate: not (prop.comparative and candidate.shape.requests < MIN_REQUESTS),
            log=self._log,
            clock=time.monotonic,
        )
        self._log(
            f"reduced {config.shape.requests} -> {current.shape.requests} requests "
            f"({sum(1 for r in state.reduce_log if r['still_fails'])} of {len(state.reduce_log)} steps kept)"
        )

    # ------------------------------------------------------------------ trials

    def _executor(self, prop: Property) -> Executor:
        """The session's executor, or for the comparative property the one running both builds."""
        if not prop.comparative:
            return self.executor
        if self.baseline is None:
            raise SuiteError(
                f"a comparison is due and cannot run: {self.baseline_missing}"
                if self.baseline_missing
                else "the comparative property needs a baseline build (--faultload-baseline)"
            )
        if self.comparing is None:
            injected, settings = self._compare
            self.comparing = comparing_executor(
                self.baseline, injected, self.workspace, self.budgets, self.profile, settings, self._log
            )
        return self.comparing

    def _key(self, config, prop: Property) -> str:
        if prop.comparative and self.baseline is not None:
            return comparison_key(self.baseline, self.profile.compare_repeats, config)
        return config_key(config)

    def _run(self, config, state: PropertyState, executor: Executor) -> TrialOutcome:
        """Run one trial through the executor, at its turn of the machine; a harness failure breaks the property
        (reported once)."""
        try:
            with self._turn(config, state, executor):
                outcome = executor.run(config)
        except AdmissionTimeout as exc:
            state.broken = f"the machine stayed busy: {exc}"
            raise SuiteError(state.broken) from exc
        except SuiteError as exc:
            state.broken = str(exc)
            raise
        if outcome.usage:
            self.usage.add(**outcome.usage)
        if outcome.error:
            # Every later example of this property fails with it at once (no trial, no restart loop).
            state.broken = outcome.error
            return outcome
        self.trials += 1
        state.trials += 1
        add_phases(self.phases_s, outcome.phases_s)
        return outcome

    def _turn(self, config, state: PropertyState, executor: Executor):
        """The trial's turn of the machine (:func:`faultload.suite.lanes.trial_turn`)."""
        log = lambda line: self._log(f"{state.nodeid.split('::')[-1]}: trial {state.trials + 1} {line}")  # noqa: E731
        return trial_turn(self.admission, self.lane, state, config, executor, log)

    @property
    def stack_starts(self) -> int:
        own = getattr(self.executor, "stack_starts", 0) + getattr(self.base_executor, "stack_starts", 0)
        return own + (self.comparing.stack_starts if self.comparing and self._compare[0] is None else 0)

    def close(self) -> None:
        self.executor.close()
        if self.base_executor is not None:
            self.base_executor.close()
        if self.comparing is not None and self._compare[0] is None:  # an injected executor is closed above
            self.comparing.close()

    # ------------------------------------------------------------------ repros

    def write_repro(self, state: PropertyState, hypothesis_seed: Any = None) -> Path | None:
        """Write the property's smallest failing trial as a repro, with report and PNG (:mod:`.repros`)."""
        comparison = None
        if state.best is not None and state.best[1].comparison is not None and self.comparing is not None:
            comparison = self.comparing.repro_fields(state.best[1])
        return write_property_repro(state, self.profile.name, self.workspace, self.budgets, hypothesis_seed, comparison)

    def summary_dict(self, outcomes: dict[str, str] | None = None) -> dict[str, Any]:
        """The session as data (``--faultload-summary-json``; what ``faultload matrix`` reads): :mod:`.summary`."""
        return summary.summary_dict(self, outcomes)

    def session_tally(self) -> dict[str, Tally]:
        return summary.session_tally(self.states.values())

    def summary_lines(self) -> list[str]:
        return summary.summary_lines(self)
