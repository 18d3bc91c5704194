"""Shrink one failed trial outside a suite session: the suite's reducer, each candidate on a fresh stack.

``faultload shrink SOURCE`` takes a trial that failed — a bundle (``faultload
run --bundle DIR``), a JSON report (``--json-out``) or a repro — and reduces it
with :func:`faultload.suite.reducer.greedy_reduce`, the steps the suite takes
on a first failure (fewer requests, then what makes a trial long, then each
fault, the client, router and result), keeping each candidate that still
violates one of the invariants the trial failed. Bounded in trials and in
time; the smallest failing trial found is written as a repro that
``faultload replay`` runs. Hypothesis's own shrinker is not used: it needs the
draws a strategy made, and a trial from the command line has none.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from faultload.checker.budgets import Budgets
from faultload.checker.inputs import Verdict
from faultload.checker.judge import judge
from faultload.model.codec import config_from_dict
from faultload.model.trial import TrialConfig
from faultload.record.trial import TrialResult
from faultload.store.bundle import MANIFEST, load_bundle
from faultload.store.repro import build_repro, config_key, figures_of, load_repro
from faultload.suite.reducer import greedy_reduce


@dataclass
class Failure:
    """A trial that failed, as its source holds it: what to shrink, and what it violated."""

    config: TrialConfig
    failing: tuple[str, ...]  # the invariants it violated
    verdicts: list[Verdict]
    budgets: Budgets | None  # None: the source keeps none (a JSON report): judged by the caller's


@dataclass
class Shrunk:
    """What shrinking found: the smallest failing config (the source's when no step kept failing)."""

    config: TrialConfig
    verdicts: list[Verdict]
    steps: list[dict] = field(default_factory=list)
    trials: int = 0
    stopped: str | None = None  # why it stopped before trying every step (a bound, a harness error)


def load_failure(source: str | Path) -> Failure:
    """The failed trial in ``source``: a bundle directory, a JSON report or a repro; ValueError naming what is
    wrong (not there, not one of them)."""
    path = Path(source)
    if path.is_dir() or path.name == MANIFEST:
        stored = load_bundle(path if path.is_dir() else path.parent)
        return Failure(stored.config, _failing(stored.verdicts), list(stored.verdicts), stored.budgets)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ValueError(f"{source}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source}: not JSON ({exc})") from None
    if isinstance(data, dict) and "repro_version" in data:
        data, config, budgets = load_repro(path)
        if data.get("compare") is not None:
            raise ValueError(f"{source}: a comparative repro; its trials are shrunk by the suite only")
        verdicts = [Verdict.from_dict(v) for v in data.get("verdicts") or []]
        return Failure(config, _failing(verdicts), verdicts, budgets)
    if isinstance(data, dict) and "report_version" in data and isinstance(data.get("config"), dict):
        verdicts = [Verdict.from_dict(v) for v in data.get("invariants") or []]
        config = config_from_dict(data["config"])
        config.validate()
        return Failure(config, _failing(verdicts), verdicts, None)
    raise ValueError(f"{source}: not a faultload bundle, JSON report or repro")


def _failing(verdicts: list[Verdict]) -> tuple[str, ...]:
    return tuple(v.name for v in verdicts if v.ok is False)


def shrink(
    failure: Failure,
    budgets: Budgets,
    run: Callable[[TrialConfig], TrialResult],
    *,
    max_trials: int,
    time_limit_s: float,
    log: Callable[[str], None] = lambda message: None,
    clock: Callable[[], float] = time.monotonic,
    judge_trial: Callable[[TrialResult, Budgets], list[Verdict]] = judge,
) -> Shrunk:
    """Reduce ``failure`` with ``run`` (a fresh stack per candidate), at most ``max_trials`` trials and
    ``time_limit_s`` seconds (no trial starts after it); a candidate fails when it violates one of the
    invariants the failure violated. Ctrl-C (a trial interrupted) ends it: KeyboardInterrupt."""
    until = clock() + time_limit_s
    found = Shrunk(failure.config, failure.verdicts)

    def out_of_time() -> bool:
        if found.trials >= max_trials:
            found.stopped = found.stopped or f"--max-trials {max_trials} reached"
        elif clock() >= until:
            found.stopped = found.stopped or f"--time-limit {time_limit_s:g} s reached"
        return found.stopped is not None

    def still_fails(candidate: TrialConfig) -> bool | None:
        result = run(candidate)
        found.trials += 1
        if result.interrupted:
            raise KeyboardInterrupt
        if result.error:  # the harness's failure says nothing about the server: stop, keep what was found
            found.stopped = f"harness error in a trial: {result.error}"
            return None
        verdicts = judge_trial(result, budgets)
        fails = any(v.ok is False and v.name in failure.failing for v in verdicts)
        log(
            f"trial {found.trials}: {candidate.shape.requests} requests, {len(candidate.faults.faults)} faults: "
            + ("still fails" if fails else "passes")
        )
        if fails:
            found.config, found.verdicts = candidate, verdicts
        return fails

    greedy_reduce(failure.config, still_fails, out_of_time, found.steps, log=log, clock=clock)
    return found


def shrunk_repro(
    failure: Failure, shrunk: Shrunk, budgets: Budgets, source: str | Path, seconds: float
) -> tuple[str, dict[str, Any]]:
    """(file stem, repro) for what ``shrink`` found: ``faultload replay`` runs it."""
    found_by = {
        "shrink": {
            "source": str(source),
            "from_requests": failure.config.shape.requests,
            "to_requests": shrunk.config.shape.requests,
            "trials": shrunk.trials,
            "shrink_s": round(seconds, 1),
            "stopped": shrunk.stopped,
            "reduce_steps": shrunk.steps,
        }
    }
    repro = build_repro(
        shrunk.config, shrunk.verdicts, figures_of(shrunk.verdicts), budgets, checked=failure.failing, found_by=found_by
    )
    stem = f"shrink-{time.strftime('%Y%m%dT%H%M%S')}-{config_key(shrunk.config)}"
    return stem, repro
