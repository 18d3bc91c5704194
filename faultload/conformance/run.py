"""Run the conformance table's trials on each target and judge each cell: kept, broken, not applicable, not
judged, or a harness error.

Every trial runs on its own stack (``faultload.run.trial.run_trial``), judged by the same checkers as any trial;
a cell reads the verdicts of its rule's invariants only. A broken cell keeps its trial as a repro file, so
``faultload replay`` runs it again. The session row asks the release as it is, without the fixes given: the
other rows run with them (a fix that lets the SDK open its session lets the rest be asked at all).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from faultload.checker.budgets import Budgets
from faultload.checker.judge import judge
from faultload.client.session import SessionUnreadable
from faultload.conformance.rules import (
    BROKEN,
    HARNESS,
    KEPT,
    NOT_APPLICABLE,
    NOT_JUDGED,
    RULES,
    STATUSES,
    ConformanceRule,
    Skip,
)
from faultload.host.workspace import Workspace
from faultload.model.family import TRAITS
from faultload.model.target import parse_target
from faultload.model.trial import TrialConfig
from faultload.run.trial import run_trial
from faultload.store.repro import build_repro, figures_of, replay_command, write_repro

__all__ = ["BROKEN", "HARNESS", "KEPT", "NOT_APPLICABLE", "NOT_JUDGED", "STATUSES", "Cell", "Conformance"]
SESSION_RULE = "sdk_opens_a_sampling_session"


@dataclass
class Cell:
    """One target's answer to one rule."""

    target: str
    rule: str
    status: str
    detail: str = ""
    repro: str | None = None
    wall_s: float = 0.0


@dataclass
class Conformance:
    targets: tuple[str, ...]
    fixes: tuple[str, ...]
    time_scale: float
    rules: tuple[ConformanceRule, ...]
    cells: list[Cell] = field(default_factory=list)
    wall_s: float = 0.0

    def cell(self, target: str, rule: str) -> Cell | None:
        return next((c for c in self.cells if c.target == target and c.rule == rule), None)


def fixes_for(target: str, fixes: tuple[str, ...]) -> tuple[str, ...]:
    """The fixes given that ``target``'s family has."""
    family = TRAITS[parse_target(target).family]
    return tuple(name for name in fixes if name in family.fixes)


def check_arguments(targets: tuple[str, ...], fixes: tuple[str, ...], rules: tuple[str, ...]) -> None:
    """ValueError naming what is wrong: a target no family launches, a fix no target has, an unknown rule."""
    if not targets:
        raise ValueError("--targets: name at least one target")
    for target in targets:
        if parse_target(target).kind == "url":
            raise ValueError(f"--targets: {target}: the table launches each target; a url= server is not one")
    for name in fixes:
        if not any(name in fixes_for(target, (name,)) for target in targets):
            raise ValueError(f"--fix {name}: no target's family has it")
    known = {rule.name for rule in RULES}
    for name in rules:
        if name not in known:
            raise ValueError(f"--rules: unknown rule {name!r}; known: {', '.join(sorted(known))}")


def run_conformance(
    targets: tuple[str, ...],
    fixes: tuple[str, ...],
    time_scale: float,
    workspace: Workspace,
    repros: Path,
    rules: tuple[str, ...] = (),
    log: Callable[[str], None] = lambda line: None,
) -> Conformance:
    """Every rule (or those named) on every target, in order; each cell as it came out."""
    chosen = tuple(rule for rule in RULES if not rules or rule.name in rules)
    table = Conformance(tuple(targets), tuple(fixes), time_scale, chosen)
    started = time.monotonic()
    for target in targets:
        for rule in chosen:
            cell = _ask(target, rule, fixes_for(target, fixes), time_scale, workspace, repros)
            log(
                f"{target} {rule.name}: {cell.status}{f' ({cell.detail})' if cell.detail else ''} in {cell.wall_s:.0f} s"
            )
            table.cells.append(cell)
    table.wall_s = time.monotonic() - started
    return table


def _ask(
    target: str, rule: ConformanceRule, fixes: tuple[str, ...], time_scale: float, workspace: Workspace, repros: Path
) -> Cell:
    started = time.monotonic()
    trials = rule.trials(target, time_scale)
    if isinstance(trials, Skip):
        return Cell(target, rule.name, trials.status, trials.reason)
    cells = [
        _one(
            target,
            rule,
            dataclasses.replace(config, fixes=() if rule.name == SESSION_RULE else fixes),
            workspace,
            repros,
        )
        for config in trials
    ]
    merged = _merge(target, rule.name, cells)
    merged.wall_s = time.monotonic() - started
    return merged


def _one(target: str, rule: ConformanceRule, config: TrialConfig, workspace: Workspace, repros: Path) -> Cell:
    try:
        result = run_trial(config, workspace)
    except SessionUnreadable as exc:
        if rule.name == SESSION_RULE:
            return Cell(target, rule.name, BROKEN, str(exc), f"faultload run --target {target} --requests 1")
        return Cell(target, rule.name, NOT_JUDGED, f"no session: see {SESSION_RULE}")
    except (RuntimeError, OSError) as exc:
        return Cell(target, rule.name, HARNESS, f"{type(exc).__name__}: {exc}")
    if result.error:
        return Cell(target, rule.name, HARNESS, result.error)
    if not rule.invariants:  # the session opened: the trial ran
        return Cell(target, rule.name, KEPT)
    verdicts = judge(result, Budgets())
    mine = [v for v in verdicts if v.name in rule.invariants]
    broken = [v for v in mine if v.ok is False]
    if broken:
        stem = f"conformance-{rule.name}-{parse_target(target).venv_name}"
        path = write_repro(build_repro(config, verdicts, figures_of(verdicts), Budgets()), repros, stem)
        detail = "; ".join(f"{v.name}: {v.detail}" for v in broken)
        return Cell(target, rule.name, BROKEN, detail, replay_command(path))
    unknown = [v for v in mine if v.ok is None]
    if unknown or len(mine) < len(rule.invariants):
        return Cell(target, rule.name, NOT_JUDGED, "; ".join(f"{v.name}: {v.detail}" for v in unknown))
    figure = next((v for v in mine if v.name == "bounded_cpu"), None)
    return Cell(target, rule.name, KEPT, figure.detail if figure is not None else "")


def _merge(target: str, rule: str, cells: list[Cell]) -> Cell:
    """One cell of several trials: the worst status, its details."""
    for status in (HARNESS, BROKEN, NOT_JUDGED):
        hit = [c for c in cells if c.status == status]
        if hit:
            return Cell(target, rule, status, " | ".join(c.detail for c in hit), hit[0].repro)
    return Cell(target, rule, KEPT, " | ".join(c.detail for c in cells if c.detail))
