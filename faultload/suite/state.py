"""What the suite keeps per property: its tallies, its failures, its time bounds' landmarks."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultload.suite.executor import TrialOutcome
from faultload.suite.gate import GateTally
from faultload.suite.properties import Property


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
    prop: Property | None = None
    started: float = field(default_factory=time.monotonic)
    trials: int = 0  # trials run for this property
    cached: int = 0  # examples answered from the session's cache
    not_run: int = 0  # examples passed without a trial (a time bound was spent)
    first_failure_at: float | None = None
    first_failure_requests: int | None = None
    last_failure_at: float | None = None
    failures: int = 0
    shrink_cut: bool = False  # the shrink budget ended shrinking
    last_failure: tuple[Any, TrialOutcome] | None = None  # (config, outcome) of the latest failing example
    best: tuple[Any, TrialOutcome] | None = None  # the simplest failing example (see complexity): the repro
    reduce_log: list[dict[str, Any]] = field(default_factory=list)
    broken: str | None = None  # an infrastructure error: every later example fails with it at once
    refused: str | None = None  # the server failed before any load (no session): every later example fails so
    unjudged: list[str] = field(default_factory=list)  # trials that were no test of the target, and why
    repro_path: Path | None = None
    bundle_path: Path | None = None  # the repro's trial bundle (faultload check), when its result was kept
    html_path: Path | None = None  # the repro's trial page (the HTML report), when its result was kept
    ended_at: float | None = None
    remaining_after: int = 0  # properties after this one in the session
    tally: dict[str, Tally] = field(default_factory=dict)  # per invariant the property asserts
    judged_trials: int = 0  # distinct trials that judged at least one of them
    counted: set[str] = field(default_factory=set)  # config keys already tallied for this property
    share_s: float | None = None  # its fair share of the session's time left when it started
    shrink_until: float | None = None  # shrinking (the reducer's and Hypothesis's) stops here
    known_left: int | None = None  # its known trials not yet run (None: not counted yet); they run first
    known_s: float = 0.0  # seconds its known trials took, not charged to its draws' time bound
    # seconds its shrink's trials waited for their turns of the machine (the other lanes' trials between its
    # candidates): added to its shrink budget, which is spent on its own trials
    shrink_waited_s: float = 0.0
    # with a base (suite.gate): its examples per class, and the known violations of each failing example (by its
    # config's key), which its failure does not count
    gate: GateTally = field(default_factory=GateTally)
    known_in_failure: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def shrink_seconds(self) -> float:
        """From the first failure to the end of the property (the final replay included)."""
        if self.first_failure_at is None:
            return 0.0
        return (self.ended_at or self.last_failure_at or self.first_failure_at) - self.first_failure_at

    @property
    def shrinking(self) -> bool:
        return self.first_failure_at is not None


def tally_text(tallies: dict[str, Tally]) -> str:
    """``invariants (judged / unknown / skipped): name j/u/s, ...`` for the terminal."""
    return "invariants (judged / unknown / skipped): " + ", ".join(
        f"{name} {t.judged}/{t.unknown}/{t.skipped}" for name, t in tallies.items()
    )


def tallies_dict(tallies: dict[str, Tally]) -> dict[str, dict[str, int]]:
    return {name: dataclasses.asdict(t) for name, t in tallies.items()}
