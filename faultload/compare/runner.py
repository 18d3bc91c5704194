"""Run one trial on two builds, interleaved A B B A …, each trial on its own fresh stack.

ABBA order puts each build first as often as second, so a drift on a shared
machine (another job starting, the page cache warming, thermal limits) moves
both sides alike instead of one. Each trial is :func:`faultload.run.trial.run_trial`
as ``faultload run`` runs it — its own server, router and proxies — judged by the
invariants as ever; only the build (target and switches) differs between sides.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from faultload.checker.budgets import Budgets
from faultload.checker.compose import overall
from faultload.checker.judge import judge
from faultload.compare.judge import CompareSettings, judge_comparison
from faultload.host.admission import Admission
from faultload.host.workspace import Workspace
from faultload.model.build import Build
from faultload.model.trial import TrialConfig
from faultload.run.trial import run_trial
from faultload.store.plot import completions_per_s
from faultload.store.report import build_report

SIDES = ("baseline", "candidate")


def abba(repeats: int) -> list[str]:
    """The sides in running order: baseline, candidate, candidate, baseline, … (``repeats`` trials each)."""
    if repeats < 1:
        raise ValueError(f"--repeats {repeats}: a comparison needs at least 1 trial per side")
    order: list[str] = []
    for i in range(repeats):
        order += list(SIDES) if i % 2 == 0 else list(reversed(SIDES))
    return order


def config_for(config: TrialConfig, build: Build) -> TrialConfig:
    """``config`` on ``build``: its target and switches, everything else the same."""
    out = dataclasses.replace(config, target=build.target, regress=build.regress, fixes=build.fixes)
    out.validate()
    return out


@dataclass
class SideTrial:
    """One trial of a comparison: which side, its report, and its completions timeline (for the plot)."""

    side: str
    build: Build
    order: int
    report: dict[str, Any]
    timeline: tuple[np.ndarray, np.ndarray] = field(default_factory=lambda: (np.empty(0), np.empty(0)))
    invariants_ok: bool | None = None  # the invariants' overall verdict (Jepsen's merge): None if one was unknown

    def summary(self) -> dict[str, Any]:
        """What the comparison's JSON says about this trial."""
        invariants = self.report.get("invariants") or []
        return {
            "order": self.order,
            "side": self.side,
            "build": self.build.text,
            "requested": self.report["requested"],
            "completed": self.report["completed"],
            "wall_s": self.report["wall_s"],
            "load_s": self.report["load_s"],
            "invariants_ok": self.invariants_ok,
            "violated": [v["name"] for v in invariants if v["ok"] is False],
            "error": self.report.get("error"),
        }


def judge_trials(builds: dict[str, Build], trials: list[SideTrial], settings: CompareSettings) -> dict[str, Any]:
    """The ``faultload.compare/1`` JSON of a comparison's trials (each side's reports in the order they ran)."""
    sides = {side: [t.report for t in trials if t.side == side] for side in SIDES}
    return judge_comparison(
        builds["baseline"].text,
        builds["candidate"].text,
        sides["baseline"],
        sides["candidate"],
        settings,
        [t.summary() for t in trials],
    )


def run_comparison(
    config: TrialConfig,
    builds: dict[str, Build],
    repeats: int,
    workspace: Workspace,
    budgets: Budgets,
    log: Callable[[str], None] = lambda message: None,
    run: Callable[..., Any] = run_trial,
    admission: Admission | None = None,
) -> list[SideTrial]:
    """Every trial of the comparison, in the order run. Each side's config is checked before the first trial.

    With ``admission`` (the workspace's turns of the machine) each trial runs with nothing beside it: the two
    builds' timings are compared, and a neighbour would load some of their trials and not others.

    An interrupted trial (Ctrl-C, SIGTERM) ends the comparison with KeyboardInterrupt: no further trial starts.
    """
    configs = {side: config_for(config, builds[side]) for side in SIDES}
    trials: list[SideTrial] = []
    order = abba(repeats)
    for i, side in enumerate(order):
        log(f"trial {i + 1}/{len(order)}: {side} {builds[side].text}")
        with admission.alone(f"comparison trial {i + 1}/{len(order)}") if admission else nullcontext():
            result = run(configs[side], workspace)
        if result.interrupted:  # Ctrl-C once the load ran: the trial stopped its stack; so does the comparison
            raise KeyboardInterrupt
        verdicts = judge(result, budgets)
        report = build_report(result, verdicts)
        trials.append(SideTrial(side, builds[side], i, report, completions_per_s(result, 1.0), overall(verdicts)))
        violated = [v.name for v in verdicts if v.ok is False]
        note = f" (violated: {', '.join(violated)})" if violated else ""
        log(
            f"trial {i + 1}/{len(order)}: {side} {report['completed']}/{report['requested']} in "
            f"{report['wall_s']:.1f}s{note}"
        )
    return trials
