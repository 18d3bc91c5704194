"""The engine behind the properties: one shared stack, trials, verdicts, shrink bookkeeping, repros.

One :class:`SuiteRunner` per pytest session. Each Hypothesis example calls
:meth:`SuiteRunner.check` with its drawn ``TrialConfig`` and its property's
:class:`Family`. ``check``:

1. gets the shared stack ready (started on first use; restarted when the
   server or router died — a collapse — or when the server's fds do not come
   back to their start-up baseline within the profile's wait);
2. runs the trial on it and judges it (the :mod:`~faultload.suite.executor`:
   ``run_trial`` then ``judge``), unless the same config already ran in this
   session (results are cached by the config as run: Hypothesis's final
   replay of the shrunk example, and the minimal example every property
   tries first, cost nothing);
3. tallies, per invariant the family asserts, whether the trial *judged* it
   (ok True or False) or left it *unknown*; an example a time bound stopped
   is *skipped* for every one of them. A property whose examples judged none
   of its invariants fails with that reason (:meth:`SuiteRunner.not_judged`):
   a green property has judged something;
4. calls ``hypothesis.target`` with the family's invariants' verdict figures
   (the very numbers the invariants judge);
5. raises ``AssertionError`` naming each of the family's invariants that was
   violated (``ok is False``; unknown is not a failure, but it is counted).

Time bounds (see :mod:`faultload.suite.profiles`): once a bound is spent a
config that has not run yet is *not run* — the example passes without a trial
and is counted and reported, never hidden. While shrinking, that makes every
remaining candidate cheap, so the shrinker finishes at once with the smallest
failure found so far.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultload.checker.compose import CHECKERS
from faultload.suite.executor import Executor, Outcome, SuiteError, StackExecutor, describe_config
from faultload.suite.profiles import Profile
from faultload.targets.skyrl_patches import switches_text

# Every invariant a trial is judged by: the checkers' and the watchdog's (judge.collapse_verdict).
ALL = tuple(name for name, _ in CHECKERS) + ("no_collapse",)


@dataclass(frozen=True)
class Family:
    """One property: which invariants it asserts, which figures it steers toward, what it draws."""

    name: str
    invariants: tuple[str, ...]  # () = every invariant
    targets: tuple[str, ...]  # invariants whose verdict figure Hypothesis steers toward (hypothesis.target)
    # Changes to the profile's strategies.Limits for this family (e.g. storms=False);
    # max_result_wait_s only ever lowers the profile's.
    limits: tuple[tuple[str, Any], ...] = ()
    weight: float = 1.0  # multiplies the profile's examples and time per property
    known: tuple[str, ...] = ()  # known-bug trials (strategies.known) run first when the profile asks


def known_configs(profile: Profile, family: Family, target: str, regress: tuple[str, ...]) -> list:
    """The family's known-bug trials as TrialConfigs, or none when the profile does not run them."""
    if profile.confirm:
        return []
    from strategies.known import known_trial_config

    limits = family_limits(profile, family, target)
    return [known_trial_config(name, target, profile.time_scale, regress, limits)
            for name in family.known if name in profile.known_examples]


def family_limits(profile: Profile, family: Family, target: str | None = None):
    """The profile's limits with the family's restrictions (no storms, shorter result waits).

    A ``url=`` target is a server someone else started, with its own backend:
    only the edge (client to server) is ours to break, so only edge faults are drawn.
    """
    limits = profile.limits
    changes = dict(family.limits)
    if target is not None and target.startswith("url="):
        changes["fault_links"] = tuple(link for link in limits.fault_links if link == "edge")
    if "max_result_wait_s" in changes:
        changes["max_result_wait_s"] = min(limits.max_result_wait_s, changes["max_result_wait_s"])
    return limits.replace(**changes) if changes else limits


def family_examples(profile: Profile, family: Family) -> int:
    return max(1, int(round(profile.max_examples * family.weight)))


def checked(family: Family | None) -> tuple[str, ...]:
    """The invariants a family asserts (all of them for the combined property)."""
    return family.invariants if family is not None and family.invariants else ALL


def target_figure(figures: dict[str, Any], invariant: str) -> float | None:
    """The figure ``invariant``'s verdict judged (what Hypothesis steers by), or None when it had none."""
    block = figures.get(invariant)
    value = block.get("figure") if isinstance(block, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


@dataclass
class Tally:
    """How often one invariant was judged, left unknown, or skipped (not run) by a property's examples."""

    judged: int = 0
    unknown: int = 0
    skipped: int = 0

    def add(self, other: "Tally") -> None:
        self.judged += other.judged
        self.unknown += other.unknown
        self.skipped += other.skipped


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
    tally: dict[str, Tally] = field(default_factory=dict)  # per invariant the family asserts
    judged_trials: int = 0  # distinct trials that judged at least one of them
    counted: set[str] = field(default_factory=set)  # config keys already tallied for this property
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


class SuiteRunner:
    """One pytest session's bookkeeping: time bounds, cache, tallies, shrinking, repros.

    ``executor`` runs and judges a trial (default: :class:`StackExecutor`, the
    real shared stack); settings arrive as values, nothing is read behind the
    caller's back.
    """

    def __init__(self, profile: Profile, target: str, regress: tuple[str, ...], workspace, budgets,
                 watchdog=None, shrink_s: float | None = None, log=None, fixes: tuple[str, ...] = (),
                 executor: Executor | None = None) -> None:
        self.profile = profile
        self.target = target
        self.regress = regress
        self.fixes = fixes
        self.workspace = workspace
        self.budgets = budgets
        self.watchdog = watchdog
        self.shrink_s = profile.shrink_s if shrink_s is None else shrink_s
        self.session_started = time.monotonic()
        self.cache: dict[str, Outcome] = {}
        self.states: dict[str, PropertyState] = {}
        self.current: PropertyState | None = None
        self.trials = 0
        self._log = log or (lambda message: print(f"faultload: {message}", file=sys.stderr, flush=True))
        self.executor: Executor = executor or StackExecutor(workspace, budgets, profile.baseline_wait_s, self._log)

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
        config = self.as_run(config)
        outcome = self._outcome(config, state, family)
        if outcome is None:  # a time bound is spent: not run, counted, reported
            return
        for invariant in family.targets:
            value = target_figure(outcome.figures, invariant)
            if value is not None:
                hypothesis.target(value, label=invariant)
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

    def as_run(self, config):
        """``config`` with the session's overrides (the watchdog limits): the config the trial runs,
        caches under and stores in its repro."""
        if self.watchdog is not None and config.watchdog != self.watchdog:
            config = dataclasses.replace(config, watchdog=self.watchdog)
        return config

    @staticmethod
    def _failing(family: Family, outcome: Outcome) -> list:
        names = checked(family)
        return [v for v in outcome.verdicts if v.name in names and v.ok is False]

    @staticmethod
    def _tally(state: PropertyState, family: Family, key: str, outcome: Outcome | None) -> None:
        """Count one example per invariant: judged, unknown, or skipped (``outcome`` None: not run).

        A trial is counted once per property, however often Hypothesis replays it.
        """
        names = checked(family)
        if outcome is not None:
            if key in state.counted:
                return
            state.counted.add(key)
        by_name = {v.name: v for v in outcome.verdicts} if outcome is not None else {}
        judged_any = False
        for name in names:
            tally = state.tally.setdefault(name, Tally())
            if outcome is None:
                tally.skipped += 1
            elif name in by_name and by_name[name].ok is not None:
                tally.judged += 1
                judged_any = True
            else:
                tally.unknown += 1
        if judged_any:
            state.judged_trials += 1

    def not_judged(self, nodeid: str) -> str | None:
        """Why a property that passed proves nothing (no example judged any of its invariants), or None."""
        state = self.states.get(nodeid)
        if state is None or state.broken or state.shrinking or state.judged_trials:
            return None
        names = checked(state.family)
        unknown = sum(t.unknown for t in state.tally.values())
        reasons = []
        if state.not_run:
            reasons.append(f"{state.not_run} examples not run (time bound spent)")
        if unknown:
            reasons.append(f"{state.trials + state.cached} examples left every invariant unknown")
        return (f"not judged: no example judged any of {', '.join(names)}"
                + (f" ({'; '.join(reasons)})" if reasons else " (no example ran)"))

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
                self._tally(state, family, key, None)
                if state.shrinking:
                    state.shrink_cut = True
                return None
            outcome = self._run(config, state)
            self.cache[key] = outcome
        if outcome.error:
            raise SuiteError(outcome.error)
        self._tally(state, family, key, outcome)
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
        """Run one trial through the executor; a harness failure breaks the property (reported once)."""
        try:
            outcome = self.executor.run(config)
        except SuiteError as exc:
            state.broken = str(exc)
            raise
        if outcome.error:
            # Every later example of this property fails with it at once (no trial, no restart loop).
            state.broken = outcome.error
            return outcome
        self.trials += 1
        state.trials += 1
        return outcome

    @staticmethod
    def _describe(config) -> str:
        return describe_config(config)

    @property
    def stack_starts(self) -> int:
        return getattr(self.executor, "stack_starts", 0)

    def close(self) -> None:
        self.executor.close()

    # ------------------------------------------------------------------ repros

    def write_repro(self, state: PropertyState, hypothesis_seed: Any = None) -> Path | None:
        """Write the property's smallest failing trial (its last failure) as a repro, with report and PNG."""
        from faultload import report as report_mod
        from faultload.repro import build_repro, config_key, replay_command, write_repro

        if state.best is None:
            return None
        config, outcome = state.best
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
        repro = build_repro(config, outcome.verdicts, outcome.figures, self.budgets, checked=checked(state.family),
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
        ``invariants`` (per property and for the session): how many examples
        judged each invariant, left it unknown, or were skipped by a time bound.
        """
        outcomes = outcomes or {}
        properties = []
        for state in self.states.values():
            violated: list[str] = []
            if state.best is not None:
                names = checked(state.family)
                violated = [v.name for v in state.best[1].verdicts if v.name in names and v.ok is False]
            properties.append({
                "nodeid": state.nodeid,
                "name": state.nodeid.split("::")[-1],
                "outcome": outcomes.get(state.nodeid, "unknown"),
                "violated": violated,
                "trials": state.trials,
                "cached": state.cached,
                "not_run": state.not_run,
                "judged_trials": state.judged_trials,
                "invariants": tallies_dict(state.tally),
                "first_failure_requests": state.first_failure_requests,
                "repro_requests": state.best[0].shape.requests if state.best else None,
                "repro_path": str(state.repro_path) if state.repro_path else None,
                "shrink_s": round(state.shrink_seconds, 1) if state.shrinking else None,
                "error": state.broken or self.not_judged(state.nodeid),
            })
        return {
            "profile": self.profile.name, "target": self.target, "regress": list(self.regress),
            "fixes": list(self.fixes),
            "trials": self.trials, "wall_s": round(time.monotonic() - self.session_started, 1),
            "stack_starts": self.stack_starts, "judged_trials": sum(p["judged_trials"] for p in properties),
            "invariants": tallies_dict(self.session_tally()), "properties": properties,
        }

    def session_tally(self) -> dict[str, Tally]:
        """Every property's tallies summed per invariant."""
        total: dict[str, Tally] = {}
        for state in self.states.values():
            for name, tally in state.tally.items():
                total.setdefault(name, Tally()).add(tally)
        return total

    def summary_lines(self) -> list[str]:
        lines = [
            f"profile {self.profile.name}: target {self.target}"
            + switches_text(self.regress, self.fixes)
            + f", time scale {self.profile.time_scale:g}; {self.trials} trials in "
            f"{time.monotonic() - self.session_started:.0f}s; {self.executor.describe()}"
        ]
        for state in self.states.values():
            name = state.nodeid.split("::")[-1]
            text = f"  {name}: {state.trials} trials, {state.cached} cached, {state.judged_trials} judged"
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
            elif self.not_judged(state.nodeid):
                text += f"; FAILED {self.not_judged(state.nodeid)}"
            lines.append(text)
        total = self.session_tally()
        if total:
            lines.append("  " + tally_text(total))
        return lines


def tally_text(tallies: dict[str, Tally]) -> str:
    """``invariants (judged / unknown / skipped): name j/u/s, ...`` for the terminal."""
    return "invariants (judged / unknown / skipped): " + ", ".join(
        f"{name} {t.judged}/{t.unknown}/{t.skipped}" for name, t in tallies.items())


def tallies_dict(tallies: dict[str, Tally]) -> dict[str, dict[str, int]]:
    return {name: dataclasses.asdict(t) for name, t in tallies.items()}


def complexity(config) -> tuple:
    """Sort key of a failing trial: smaller is a simpler repro (requests first)."""
    s, r = config.shape, config.router
    return (
        s.requests, len(config.faults.faults), int(s.abandon_polls.fraction > 0) + int(s.delay_polls.fraction > 0),
        int(s.arrival != "burst"), int(s.policy != type(s.policy)()), int(r.mode != "immediate"),
        s.result_tokens * s.num_samples, s.workers, int(s.client != "raw"), int(s.accept != "proto"),
        s.max_outstanding,
        s.abandon_polls.after_s + s.delay_polls.after_s,
    )


def with_requests(config, requests: int):
    """``config`` with ``requests`` requests; cap, waves and router processes follow.

    The barrier size stays: a wave the fewer requests no longer fill waits
    for its timeout, which is often what made the trial fail.
    """
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
    if s.client != "raw":  # the raw client's repro is easier to read (every attempt in the attempts table)
        yield shape("raw client", client="raw")
    if s.accept != "proto":
        yield shape("proto results", accept="proto")


def _slug(nodeid: str) -> str:
    name = nodeid.split("::")[-1]
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:60]
