"""The comparative property (``pytest faultload --faultload-baseline BUILD``): each example on two builds.

Each example is one generated load shape with **no faults**: a comparison
judges cost (CPU per request, throughput, latency, fds, RSS, attempts), and a
fault's timing moves those far more than any build difference — a ratio
under faults measures the nemesis, not the fix. The shape runs ``repeats``
times on each build, in ABBA order *within the example* (baseline,
candidate, candidate, baseline, …: :func:`faultload.compare.runner.abba`),
because the verdict is per example: each example must cancel a linear drift
of the shared machine on its own, whatever the examples around it did.
Each build has its own shared stack (one :class:`~faultload.suite.executor.StackExecutor`
per side, both kept for the session, so no trial pays a server start and
both sides' servers are equally warm); an injected executor (a test double)
serves both sides.

The example's outcome is the verdict ``no_worse_than_baseline``: violated
when :func:`faultload.compare.judge.judge_comparison` finds a metric worse,
unknown when a metric was not measured on a side (the property fails
with an unknown example: a comparison that could not be judged is
not a pass). Its figure is the worst metric's ratio over its threshold
(above 1: past it), what Hypothesis steers toward. Beside it, each invariant
a trial of either build violated (one verdict per invariant, naming the
build and trial): every trial is judged as any suite trial is, and the
runner fails the property on a violation whichever trial saw it.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from faultload.checker.compose import overall
from faultload.checker.inputs import Verdict
from faultload.compare.judge import CompareSettings, interval_of, judge_comparison, ratio_of, settings_dict
from faultload.compare.runner import SIDES, SideTrial, abba, config_for
from faultload.model.build import Build
from faultload.store.repro import config_key, figures_of
from faultload.suite.executor import Executor, StackExecutor, TrialOutcome, add_phases
from faultload.suite.reducer import with_requests

INVARIANT = "no_worse_than_baseline"
# The property's weight on its time bound (property_s x WEIGHT); its examples are the profile's
# compare_examples. Each example is 2 x repeats trials of 128-250 requests held 2 s: about 25 s on ci
# (EXAMPLE_S), each trial with nothing beside it; --faultload-baseline adds compare_examples x EXAMPLE_S to the
# session's time bound.
WEIGHT = 2.0
EXAMPLE_S = 25.0
# Fewest requests a comparative example runs (drawn and shrunk): below this a
# trial's server CPU is a few scheduler ticks and its percentiles a handful of
# values, so no ratio of them means anything.
MIN_REQUESTS = 128
# How many ABBA rounds an example may take: a flagged one runs once more and is judged on all its trials. With
# 3 trials a side the bootstrap's interval clears 1 exactly when every candidate trial lands above every baseline
# one, which an unchanged build does 1 time in 20 per metric (3!3!/6!): the 0.4.0 sdist checkout against its
# release, byte-identical code and modules, flagged submit_p50_s x1.99 [1.33, 4.23] and healthz_p99_s x2.53 in
# one of its 4 ci examples. On 6 a side that is 1 in 924; a regression the first round flagged flags again.
ROUNDS = 2
# The generation slots of a router at_least turns into a latency one (the strategies' first, vLLM's default).
LATENCY_SEQS = 256
# How long the router holds a comparative example's load, at least and at most (trial seconds, its
# max_num_seqs-wide rounds of gen_seconds). At least: the monitor samples the server every 0.5 s and a server
# figure needs MIN_SAMPLES of them (compare.metrics); an immediate router answered ci's 128-250-request bursts in
# 0.3-0.9 s, sampled once or twice, and 3 of 5 examples left server CPU unmeasured (ci, 2026-12-05). At most: an
# example is 2 x repeats trials, and a 250-request load held 16 s (64 x 4 s) made one ci example 100 s; 6 s
# keeps one under a minute, the most a comparison started just before the session's bound runs past it.
MIN_LOAD_S = 2.0
MAX_LOAD_S = 6.0
# What a comparative example draws (faultload.strategies.Limits changes, Property.limits):
# no faults, on-time polls, no storms, a router with a fixed generation time (stretched or cut to the window
# above by at_least), one burst, small results (the per-request cost is what builds differ in).
LIMITS = (
    ("max_faults", 0),
    ("max_poll_after_s", 0.0),
    ("storms", False),
    ("router_modes", ("latency",)),
    ("arrivals", ("burst",)),
    ("max_result_tokens", 64),
)


def candidate_of(config) -> Build:
    """The build a config runs: the session's target with its switches."""
    return Build(config.target, tuple(config.regress), tuple(config.fixes))


def at_least(config, requests: int = MIN_REQUESTS):
    """``config`` as a comparative example runs it: at least ``requests`` requests (cap and router processes
    follow; see the reducer), the router holding the load :data:`MIN_LOAD_S` to :data:`MAX_LOAD_S`."""
    config = config if config.shape.requests >= requests else with_requests(config, requests)
    router = config.router
    if router.mode != "latency":  # drawn configs are latency already; a minimal or reduced one may not be
        router = dataclasses.replace(router, mode="latency", max_num_seqs=LATENCY_SEQS, gen_seconds=0.0)
    rounds = max(1, -(-config.shape.requests // router.max_num_seqs))
    held = router.gen_seconds * rounds
    if held < MIN_LOAD_S:  # rounded up and down to the millisecond: the result stays inside the window
        router = dataclasses.replace(router, gen_seconds=math.ceil(MIN_LOAD_S / rounds * 1000) / 1000)
    elif held > MAX_LOAD_S:
        router = dataclasses.replace(router, gen_seconds=max(0.001, math.floor(MAX_LOAD_S / rounds * 1000) / 1000))
    return config if router == config.router else dataclasses.replace(config, router=router)


def fits(config) -> bool:
    """Does ``config`` run as a comparative example (:func:`at_least` leaves it as it is)."""
    return at_least(config) == config


def comparison_key(baseline: Build, repeats: int, config) -> str:
    """The session cache's key of a comparative example (never equal to a plain trial's)."""
    return f"compare:{baseline.text}:{repeats}:{config_key(config)}"


def _badness(row: Mapping[str, Any]) -> float:
    """How far a metric's ratio went toward its threshold (1: at it), in its worse direction."""
    ratio, threshold = ratio_of(row), row["threshold"]
    if row["higher_is_worse"]:
        return ratio / threshold
    return threshold / ratio if ratio > 0 else float("inf")


def _row_text(row: Mapping[str, Any]) -> str:
    low, high = interval_of(row)
    bound = "<=" if row["higher_is_worse"] else ">="
    return f"{row['name']} x{ratio_of(row):.3g} [{low:.3g}, {high:.3g}] (threshold {bound} {row['threshold']:g})"


def trial_violations(seen: list[tuple[str, int, Verdict]]) -> list[Verdict]:
    """The invariants the example's trials violated, one verdict each: the largest figure, the first trial's
    detail naming its build and trial (``seen``: (build, trial number, verdict) in the order run)."""
    by_name: dict[str, list[tuple[str, int, Verdict]]] = {}
    for build, number, verdict in seen:
        by_name.setdefault(verdict.name, []).append((build, number, verdict))
    out = []
    for name, hits in by_name.items():
        build, number, first = hits[0]
        figures = [v.figure for _, _, v in hits if v.figure is not None]
        where = ", ".join(f"{b} trial {n}" for b, n, _ in hits)
        out.append(
            Verdict(
                name=name,
                ok=False,
                figure=max(figures, default=None),
                budget=first.budget,
                head=f"in {len(hits)} of the comparison's trials ({where}); {build} trial {number}: {first.detail}",
            )
        )
    return out


def comparison_verdict(result: Mapping[str, Any]) -> Verdict:
    """The ``faultload.compare/1`` JSON as one verdict: violated when a metric is worse, unknown when one was
    not measured; its figure is the worst ratio over its threshold (budget 1)."""
    rows = [r for r in result["metrics"] if ratio_of(r) is not None]
    worst = max(rows, key=_badness, default=None)
    figure = _badness(worst) if worst is not None else None
    against = f"{result['candidate']} vs {result['baseline']}, {result['repeats']} trials each (ABBA)"
    if result["worse"]:
        by_name = {r["name"]: r for r in rows}
        return Verdict(
            name=INVARIANT,
            ok=False,
            figure=figure,
            budget=1.0,
            head=f"{against}: worse: " + "; ".join(_row_text(by_name[n]) for n in result["worse"]),
        )
    if result["unknown"]:
        return Verdict(
            name=INVARIANT,
            ok=None,
            figure=figure,
            budget=1.0,
            head=f"{against}: not measured: {', '.join(result['unknown'])}",
        )
    closest = f"; closest: {_row_text(worst)}" if worst is not None else ""
    return Verdict(name=INVARIANT, ok=True, figure=figure, budget=1.0, head=f"{against}: no metric worse{closest}")


@dataclasses.dataclass
class _Trials:
    """What an example's trials left so far, both sides, in the order they ran."""

    reports: dict[str, list[Any]] = dataclasses.field(default_factory=lambda: {side: [] for side in SIDES})
    phases: dict[str, float] = dataclasses.field(default_factory=dict)
    seen: list[tuple[str, int, Verdict]] = dataclasses.field(default_factory=list)  # (build, trial, violated)
    trials: list[dict[str, Any]] = dataclasses.field(default_factory=list)


class ComparingExecutor:
    """Runs an example on both builds (``repeats`` each, ABBA) through one executor per side, judges the ratios."""

    def __init__(
        self,
        baseline: Build,
        sides: Mapping[str, Executor],
        repeats: int,
        settings: CompareSettings,
        log: Callable[[str], None],
    ) -> None:
        abba(repeats)  # ValueError for fewer than 1
        self.baseline = baseline
        self.sides = dict(sides)
        self.repeats = repeats
        self.settings = settings
        self._log = log
        self.comparisons = 0  # examples compared (each 2 x repeats trials)

    def run(self, config) -> TrialOutcome:
        builds = {"baseline": self.baseline, "candidate": candidate_of(config)}
        configs = {side: config_for(config, builds[side]) for side in SIDES}
        done = _Trials()
        started = time.monotonic()
        for round_ in range(ROUNDS):
            error = self._round(configs, builds, done)
            if error:
                return TrialOutcome([], {}, config.shape.requests, time.monotonic() - started, error=error)
            result = judge_comparison(
                builds["baseline"].text,
                builds["candidate"].text,
                done.reports["baseline"],
                done.reports["candidate"],
                self.settings,
                done.trials,
            )
            if not result["worse"]:
                break
            if round_ + 1 < ROUNDS:
                self._log(
                    f"comparison: worse ({', '.join(result['worse'])}) after {self.repeats} + {self.repeats} "
                    "trials: running the example again to confirm"
                )
        verdicts = [comparison_verdict(result), *trial_violations(done.seen)]
        self.comparisons += 1
        for verdict in verdicts:
            self._log(f"comparison: {verdict.name}: {verdict.detail[:400]}")
        return TrialOutcome(
            verdicts,
            figures_of(verdicts),
            config.shape.requests,
            time.monotonic() - started,
            comparison=result,
            phases_s=done.phases,
        )

    def _round(self, configs: Mapping[str, Any], builds: Mapping[str, Build], done: "_Trials") -> str | None:
        """One ABBA round of ``repeats`` trials a side added to ``done``; the first trial's error, if any."""
        for side in abba(self.repeats):
            order = len(done.trials)
            outcome = self.sides[side].run(configs[side])
            if outcome.error or outcome.report is None:
                return f"{side} {builds[side].text}: {outcome.error or 'the executor kept no trial report'}"
            done.reports[side].append(outcome.report)
            add_phases(done.phases, outcome.phases_s)
            done.seen += [(builds[side].text, order + 1, v) for v in outcome.verdicts if v.ok is False]
            done.trials.append(
                SideTrial(side, builds[side], order, outcome.report, invariants_ok=overall(outcome.verdicts)).summary()
            )
        return None

    def _executors(self) -> list[Executor]:
        return list({id(e): e for e in self.sides.values()}.values())  # one injected executor serves both

    def describe(self) -> str:
        done = f"{self.comparisons} comparisons of {self.repeats} + {self.repeats} trials"
        if len(self._executors()) == 1:
            return f"{done}; {self.sides['baseline'].describe()}"
        return f"{done}; " + "; ".join(f"{side}: {self.sides[side].describe()}" for side in SIDES)

    @property
    def stack_starts(self) -> int:
        return sum(getattr(e, "stack_starts", 0) for e in self._executors())

    def close(self) -> None:
        for executor in self._executors():
            executor.close()

    def repro_fields(self, outcome: TrialOutcome) -> dict[str, Any]:
        """What a comparative repro adds: both builds, the repeats, the thresholds, the comparison as found
        (``faultload replay`` runs both builds again, as many times each, and judges them by these thresholds)."""
        result = outcome.comparison or {}
        return {
            "baseline": result.get("baseline"),
            "candidate": result.get("candidate"),
            "compare": {"repeats": self.repeats, "settings": settings_dict(self.settings), "result": result},
        }


def comparing_executor(
    baseline: Build,
    injected: Executor | None,
    workspace,
    budgets,
    profile,
    settings: CompareSettings | None,
    log: Callable[[str], None],
) -> ComparingExecutor:
    """The session's comparing executor: ``injected`` (a test double) for both sides, else one real
    shared stack per build, each keeping its trials' reports. ``settings`` None: the judge's defaults."""
    if injected is not None:
        sides: dict[str, Executor] = {side: injected for side in SIDES}
    else:
        sides = {
            side: StackExecutor(
                workspace,
                budgets,
                profile.baseline_wait_s,
                lambda message, side=side: log(f"{side}: {message}"),
                keep_reports=True,
            )
            for side in SIDES
        }
    return ComparingExecutor(
        baseline, sides, profile.compare_repeats, settings if settings is not None else CompareSettings(), log
    )
